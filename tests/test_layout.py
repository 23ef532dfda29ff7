"""The package's layering, checked on its source (every import statement, at module level or
inside a function): API modules never import CLI modules, engines never import the papers'
reproductions, and no two modules import each other at import time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "pathtwin"


def _module_name(path: Path) -> str:
    parts = ["pathtwin", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, at_import_time: bool = False) -> set[str]:
    """The modules ``name`` imports: every ``import`` and ``from ... import`` (relative ones
    resolved; ``from package import x`` counts as importing ``package.x`` when that is a
    module of ours), and ``importlib.import_module``/``__import__`` of a literal name. With
    ``at_import_time``, only those that run when the module is imported (not inside a
    function, nor under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    ours = _modules()
    found: set[str] = set()

    def resolve(module: str | None, level: int) -> str:
        if not level:
            return module or ""
        base = package.split(".")
        base = base[:len(base) - (level - 1)]
        return ".".join([*base, *([module] if module else [])])

    def visit(node: ast.AST) -> None:
        if at_import_time and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if at_import_time and isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(node.module, node.level)
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in ours)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if called in ("import_module", "__import__"):
                found.add(node.args[0].value)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_checker_sees_imports_in_functions_and_relative_ones():
    mods = _modules()
    assert "pathtwin.reproduce" in _imports("pathtwin.cli.reproduce", mods["pathtwin.cli.reproduce"])
    assert "pathtwin.emulation" in _imports("pathtwin.reproduce.nsdi09", mods["pathtwin.reproduce.nsdi09"])
    assert "pathtwin.trace_files" in _imports("pathtwin.trace", mods["pathtwin.trace"])
    assert "pathtwin.emulation" not in _imports("pathtwin.reproduce.nsdi09", mods["pathtwin.reproduce.nsdi09"],
                                                at_import_time=True)


@pytest.mark.parametrize("name", [n for n in _modules() if not _within(n, "pathtwin.cli")])
def test_api_modules_never_import_the_command_line(name):
    bad = sorted(m for m in _imports(name, _modules()[name]) if _within(m, "pathtwin.cli"))
    assert not bad, f"{name} imports {bad}: the command line sits on the API, never under it"


@pytest.mark.parametrize("name", [n for n in _modules()
                                  if not _within(n, "pathtwin.reproduce") and not _within(n, "pathtwin.cli")])
def test_engines_never_import_reproductions(name):
    bad = sorted(m for m in _imports(name, _modules()[name]) if _within(m, "pathtwin.reproduce"))
    assert not bad, f"{name} imports {bad}: a reproduction runs the engines, never the other way"


def test_no_import_cycles_at_import_time():
    mods = _modules()
    graph = {n: {m for m in _imports(n, p, at_import_time=True) if m in mods and m != n} for n, p in mods.items()}
    # A module's import also imports its parent packages.
    for n in mods:
        parent = n.rpartition(".")[0]
        if parent in mods:
            graph[n].add(parent)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1 and not _within(n, m):  # a package's own modules may import it
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(m):], m]))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
