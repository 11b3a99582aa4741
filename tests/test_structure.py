"""The shape of the house, enforced: no import circles (imports inside functions count), thin command modules
that nothing imports, no product module over 600 lines, and a docstring on every package.

The import graph is built with `ast` from every module of the product packages. An import names a module (the
longest dotted prefix that is a module of ours); `from pkg import name` names `pkg.name` when that is a submodule,
else `pkg` itself. Importing `a.b.c` also runs `a/__init__` and `a/b/__init__`, but a package's `__init__` that
imports nothing of its children cannot close a circle, so the graph keeps only the named module.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable
from pathlib import Path

import pytest

from robot_rl.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("robot_rl", "controllers", "envs", "learners", "actors", "demos", "supervisor")
MAX_MODULE_LINES = 600
MAX_COMMAND_LINES = 150


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _product_modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported_modules(tree: ast.AST, modules: Iterable[str]) -> set[str]:
    """The modules of `modules` that `tree` imports anywhere (top level, functions, TYPE_CHECKING blocks)."""
    known = set(modules)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [s for s in subs if s in known]
            if len(names) < len(subs):
                names.append(node.module)
        out.update(m for m in map(resolve, names) if m is not None)
    return out


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    return {m: imported_modules(ast.parse(p.read_text(), str(p)), files) - {m} for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_no_import_circles() -> None:
    found = cycles(import_graph(_product_modules()))
    assert not found, "import circles (imports inside functions count): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("def f():\n    from pkg import sub, thing\n")
    assert imported_modules(tree, {"pkg", "pkg.sub"}) == {"pkg", "pkg.sub"}
    assert imported_modules(ast.parse("from pkg import sub\n"), {"pkg", "pkg.sub"}) == {"pkg.sub"}


COMMAND_MODULES = sorted({module for module, _ in SUBCOMMANDS.values()})


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_command_modules_are_thin(module: str) -> None:
    path = _product_modules()[module]
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_COMMAND_LINES, f"{path.relative_to(ROOT)}: {lines} lines (a command module parses, builds a " \
                                       f"config and calls one function: <= {MAX_COMMAND_LINES})"
    assert callable(getattr(importlib.import_module(module), "main", None))


def test_nothing_imports_a_command_module() -> None:
    files = [p for d in (*PACKAGES, "tests", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))]
    commands = set(COMMAND_MODULES)
    offenders = []
    for path in files:
        if path == ROOT / "robot_rl" / "cli.py":
            continue  # the front door imports the subcommand it runs, lazily
        tree = ast.parse(path.read_text(), str(path))
        bad = imported_modules(tree, set(_product_modules())) & commands
        offenders += [f"{path.relative_to(ROOT)} imports {m}" for m in sorted(bad)]
    assert not offenders, "command modules are imported only by robot_rl.cli: " + "; ".join(offenders)


def test_no_product_module_is_over_600_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _product_modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_every_package_says_what_it_is_for() -> None:
    for pkg in PACKAGES:
        for init in sorted((ROOT / pkg).rglob("__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and len(doc) > 40 and "TODO" not in doc, f"{init.relative_to(ROOT)}: no docstring naming its job"
