"""The shape rules every package of the repository keeps (no module over
500 lines, no function over 60, no import circle), as functions of a
folder, so that each rule's test can also plant a violation and see it
caught. Used by tests/unit/project's tests of hooks/, dev/, bench/ and
examples/."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package in `root`, by its dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def long_modules(root: Path) -> list[str]:
    return [
        f"{name}: {lines} lines"
        for name, path in modules(root).items()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]


def long_functions(root: Path) -> list[str]:
    found = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name}: {length} lines")
    return found


def imports(path: Path) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import of a module, those inside functions too."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imported_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    """What an import names: `from a.b import c` names a.b.c (a module, or a
    name in a.b), `import a.b` names a.b."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [f"{node.module}.{alias.name}" for alias in node.names]


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the package it imports."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in imports(path):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # relative: the packages that allow them have a graph of their own
            for target in imported_names(node):
                # `from a.b import c`: the module a.b.c, or else a.b itself.
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: the strongly connected components of more than
    one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
