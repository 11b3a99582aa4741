"""The import layering of DESIGN.md, enforced by walking every module's imports with `ast`.

Rules: robot_rl imports none of the other packages (except robot_rl/cli.py, lazily); controllers ->
robot_rl; envs -> controllers, robot_rl; learners -> robot_rl only (never envs, controllers, rclpy, zmq);
actors -> envs, robot_rl and learners.agents.policy / learners.rewards.reward_model; demos -> envs, robot_rl and
learners.rewards.reward_model (record-demos --reward classifier:DIR runs the reward model as an actor does);
supervisor -> robot_rl only (it runs everything else as child processes, so it never imports torch, mujoco,
gymnasium or zmq).
Hardware/heavy packages are imported lazily (inside functions), never at module top level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("robot_rl", "controllers", "envs", "learners", "actors", "demos", "supervisor")
ALLOWED: dict[str, set[str]] = {
    "robot_rl": {"robot_rl"},
    "controllers": {"robot_rl", "controllers"},
    "envs": {"robot_rl", "controllers", "envs"},
    "learners": {"robot_rl", "learners"},
    "actors": {"robot_rl", "envs", "actors", "learners.agents.policy", "learners.rewards.reward_model"},
    "demos": {"robot_rl", "envs", "demos", "learners.rewards.reward_model"},
    "supervisor": {"robot_rl", "supervisor"},
}
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "learners": {"zmq", "rclpy", "mujoco"},
    "supervisor": {"torch", "mujoco", "gymnasium", "numba", "zmq", "rclpy"},
}
# learners works on any gymnasium env but only the training entry point imports gymnasium, lazily
# the JAX learner backend (learners.agents.jax.agent, learners.agents.jax.nets) imports jax only when a backend=jax
# agent is built
LAZY_IN_PACKAGE: dict[str, set[str]] = {"learners": {"gymnasium", "jax", "jaxlib", "flax", "optax"},
                                        "robot_rl": {"torch", "gymnasium", "mujoco"}}
LAZY_ONLY = {"rclpy", "pyrealsense2", "franky", "cv2", "pygame", "pyspacemouse", "pynput", "wandb", "hid",
             "geometry_msgs",
             "sensor_msgs", "std_msgs", "std_srvs", "rcl_interfaces", "franka_msgs"}


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, at_top_level) for every import; relative imports are not used in this project."""
    out: list[tuple[str, bool]] = []
    top_level_nodes = set(id(n) for n in getattr(tree, "body", []))
    # imports under `if TYPE_CHECKING:` / try at top level count as top level
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, id(node) in top_level_nodes) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import at line {node.lineno}"
            mod = node.module or ""
            out.append((mod, id(node) in top_level_nodes))
            out.extend((f"{mod}.{a.name}", id(node) in top_level_nodes) for a in node.names)
    return out


def _module_files() -> list[Path]:
    files = []
    for pkg in PACKAGES:
        files.extend(sorted((ROOT / pkg).rglob("*.py")))
    return files


@pytest.mark.parametrize("path", _module_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_respect_layering(path: Path) -> None:
    pkg = path.relative_to(ROOT).parts[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    for mod, top in _imports(tree):
        root = mod.split(".")[0]
        if root in PACKAGES:
            if pkg == "robot_rl" and path.name == "cli.py" and not top:
                continue  # the front door imports the subcommand it runs, lazily
            allowed = ALLOWED[pkg]
            ok = root in allowed or any(mod == a or mod.startswith(a + ".") for a in allowed)
            # `from learners import policy` shows up as both "learners" and "learners.agents.policy"
            if not ok and pkg == "actors" and mod == "learners":
                continue
            assert ok, f"{path.relative_to(ROOT)} imports {mod}: {pkg} may import only {sorted(allowed)}"
        assert root not in FORBIDDEN_THIRD_PARTY.get(pkg, set()), f"{path} imports {mod}"
        if root in LAZY_ONLY or root in LAZY_IN_PACKAGE.get(pkg, set()):
            assert not top, f"{path.relative_to(ROOT)} imports {mod} at top level: hardware imports must be lazy"


def test_walker_catches_a_violation(tmp_path: Path) -> None:
    """The checker itself can fail: a learners module importing envs is a violation."""
    tree = ast.parse("import numpy\nfrom envs.twin import TwinRobot\n")
    mods = {m for m, _ in _imports(tree)}
    assert "envs.twin" in mods
    assert not any(m.split(".")[0] in ALLOWED["learners"] - {"learners", "robot_rl"} for m in mods)
    assert "envs" not in ALLOWED["learners"]


def test_every_package_is_in_the_wheel() -> None:
    """Subpackages too (robot_rl.transport, envs.robot_server, ...): setuptools' package discovery (pyproject's
    [tool.setuptools.packages.find]) finds every package of the product and nothing else; tests/test_wheel.py checks
    the built wheel itself."""
    import fnmatch
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    for pkg in PACKAGES:
        for init in sorted((ROOT / pkg).rglob("__init__.py")):
            dotted = ".".join(init.parent.relative_to(ROOT).parts)
            assert any(fnmatch.fnmatch(dotted, pattern) for pattern in include), f"{dotted} is left out of the wheel"
    for other in ("tests", "benchmarks", "launch", "docs", "scripts"):
        assert not any(fnmatch.fnmatch(other, pattern) for pattern in include), f"{other} would go into the wheel"
