"""No import circles among the project's modules, counting imports inside functions (a circle closed through a
function-level import is still two modules that each need the other). Walks every module's imports with `ast`.

PACKAGES lists the packages checked; every package whose circles are gone belongs in it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("robot_rl", "controllers", "envs", "actors", "demos")


def _modules(packages: tuple[str, ...]) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The module `name` refers to: itself, or its longest prefix that is a module (an attribute import)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its body (`from pkg import sub` counts as pkg.sub when
    that is a module, else as pkg)."""
    mods = _modules(packages)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                         for a in node.names]
            for name in names:
                target = _resolve(name, mods)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_circles() -> None:
    found = cycles(import_graph(PACKAGES))
    assert not found, "import circles (imports inside functions count): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_check_finds_a_circle_closed_inside_a_function() -> None:
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert cycles(graph) == [["a.x", "a.y", "a.z"]]
    mods = _modules(("demos",))
    assert _resolve("demos.formats.video.find_ffmpeg", mods) == "demos.formats.video"
