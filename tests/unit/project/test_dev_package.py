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

from ..support.codeshape import circles, long_functions, long_modules, modules

PACKAGE = Path(__file__).resolve().parents[3] / "dev" / "dlk8s_dev"


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


MODULES = modules(PACKAGE)


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports_of(name, path, set(known)) for name, path in known.items()}


def test_no_import_circle() -> None:
    assert circles(import_graph(MODULES)) == []


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    assert long_modules(PACKAGE) == []
    assert long_functions(PACKAGE) == []


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
    graph = import_graph(modules(package))
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.part"}
    assert graph["pkg.sub"] == {"pkg.sub.part"}  # its own package is no import
    assert circles(graph) == []
    (package / "sub" / "part.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b import x\n"
    )
    assert circles(import_graph(modules(package))) == [
        ["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.part"]
    ]
