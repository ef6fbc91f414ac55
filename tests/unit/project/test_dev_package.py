"""The development tooling's shape (dev/dlk8s_dev): small modules, short
functions, and no import circle, so that each part can be read, and
imported, on its own (issue 46 split the three modules that had outgrown it).

Imports inside functions and under TYPE_CHECKING count: an import that only
runs later still ties the two modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "dev" / "dlk8s_dev"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def module_names(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by its own name)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` imports, and the packages whose
    ``__init__`` that import runs (other than its own, which already runs)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *filter(None, [base])])
            # `from P import x` imports the module P.x where there is one, else P.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            parts = target.split(".")
            for n in range(1, len(parts) + 1):
                enclosing = ".".join(parts[:n])
                if enclosing in modules and not _within(name, enclosing):
                    found.add(enclosing)
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


MODULES = module_names(PACKAGE)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def test_no_import_circle() -> None:
    assert circles(import_graph(MODULES)) == []


def lines_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_and_its_functions_are_small(name: str) -> None:
    text = MODULES[name].read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    functions = [
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    long = [
        f"{f.name} ({lines_of(f)} lines)" for f in functions if lines_of(f) > MAX_FUNCTION_LINES
    ]
    assert long == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_holds(name: str) -> None:
    assert ast.get_docstring(ast.parse(MODULES[name].read_text())), name


def test_the_checker_finds_a_circle_through_an_import_in_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .part import thing\n")
    (package / "sub" / "part.py").write_text("thing = 1\n")
    (package / "a.py").write_text("def f():\n    from .sub import part\n")
    (package / "b.py").write_text("from . import a\n")
    graph = import_graph(module_names(package))
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.part"}
    assert graph["pkg.sub"] == {"pkg.sub.part"}  # its own package is no import
    assert circles(graph) == []
    (package / "sub" / "part.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b import x\n"
    )
    assert circles(import_graph(module_names(package))) == [
        ["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.part"]
    ]
