"""Optional dependencies (pyproject's extras) and errors that name the extra to install.

Every package an extra provides is listed in `EXTRA_MODULES`, so a missing one, wherever it is imported, turns
into a `MissingExtraError` saying what to run (`install_hint`: robot-rl is not on a package index, so the command
names this checkout, ``pip install -e 'CHECKOUT[EXTRA]'``, or for an installed wheel the wheel file,
``pip install 'robot_rl-VERSION-py3-none-any.whl[EXTRA]'``); the `robot-rl` command prints that as one line instead
of a traceback.

Usage::

    franky = optional_import("franky", extra="real")   # MissingExtraError if not installed
    require_extras(("sim", "learn"), "robot-rl sim")    # checks without importing anything
    try:
        import torch
    except ImportError as err:
        raise missing_extra(err) or err                 # MissingExtraError naming 'learn'
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from robot_rl.errors import MissingExtraError

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "sim": ("mujoco", "gymnasium", "numba", "matplotlib"),
    "learn": ("torch", "safetensors", "tensorboard"),
    "real": ("pyrealsense2", "franky", "cv2"),
    "teleop": ("pygame", "hid", "hidraw", "pynput"),
    "video": ("imageio_ffmpeg",),
    "export": ("rosbags", "pyarrow"),
    "ros": ("rclpy", "geometry_msgs", "sensor_msgs", "std_msgs", "std_srvs", "rcl_interfaces"),
    "bench": ("gym_hil",),
    "jax": ("jax", "jaxlib"),
}
"""extra -> the top-level modules it provides (matplotlib comes with both sim and learn; sim is named)."""
REQUIRED_MODULES: dict[str, tuple[str, ...]] = {"sim": ("mujoco", "gymnasium"), "learn": ("torch",), "ros": ("rclpy",)}
"""What `require_extras` checks per extra (the others are optional within their extra); default: all of it."""


def extra_of(module: str) -> str | None:
    """The extra providing `module` (any dotted name; its top-level package counts), or None."""
    root = module.split(".")[0]
    return next((extra for extra, mods in EXTRA_MODULES.items() if root in mods), None)


def checkout_root() -> Path | None:
    """The source checkout robot_rl runs from (the directory with pyproject.toml above the package), or None when
    it runs from an installed wheel."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "robot_rl").is_dir() else None


def install_hint(extra: str) -> str:
    """The command that adds `extra` (comma-separated extras too) to this robot-rl: `pip install -e
    'CHECKOUT[extra]'` in a source checkout (`bash scripts/dev.sh setup` installs the development set), the wheel
    file with the extra for an installed wheel (robot-rl is on no package index: `pip install 'robot-rl[extra]'`
    would not find it)."""
    root = checkout_root()
    if root is not None:
        return f"pip install -e '{root}[{extra}]'"
    try:
        version = importlib.metadata.version("robot-rl")
    except importlib.metadata.PackageNotFoundError:
        version = "VERSION"
    return (f"pip install 'robot_rl-{version}-py3-none-any.whl[{extra}]' (the wheel this robot-rl came from; build "
            f"one in a checkout with: python -m build --wheel)")


def _message(module: str, extra: str, purpose: str, detail: str) -> str:
    what = f" (needed for {purpose})" if purpose else ""
    return (f"the optional package '{module}'{what} is not installed or failed to import ({detail}); "
            f"install it with: {install_hint(extra)}")


def missing_extra(err: ImportError) -> MissingExtraError | None:
    """The MissingExtraError for an ImportError of a package some extra provides (itself if it already is
    one); None when the missing module belongs to no extra (a bug, not a missing install)."""
    if isinstance(err, MissingExtraError):
        return err
    name = err.name or ""
    extra = extra_of(name)
    if extra is None:
        return None
    detail = " ".join(str(err).split())  # one line
    return MissingExtraError(_message(name.split(".")[0], extra, "", detail))


def optional_import(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Import `module`, or raise `MissingExtraError` telling the user what to install (`install_hint`)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # ModuleNotFoundError or a broken shared library
        raise MissingExtraError(_message(module, extra, purpose, " ".join(str(err).split()))) from err


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import; a module without __spec__
        return False


def require_extras(extras: Iterable[str], purpose: str) -> None:
    """Check, without importing them, that the packages of `extras` are installed (`REQUIRED_MODULES`); else
    raise one MissingExtraError naming every extra to install."""
    wanted = list(extras)
    missing = {extra: [m for m in REQUIRED_MODULES.get(extra, EXTRA_MODULES[extra]) if not _installed(m)]
               for extra in wanted}
    missing = {e: mods for e, mods in missing.items() if mods}
    if missing:
        mods = ", ".join(m for ms in missing.values() for m in ms)
        raise MissingExtraError(f"{purpose} needs {mods} (not installed); install with: "
                                f"{install_hint(','.join(missing))}")
