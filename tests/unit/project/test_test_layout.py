"""The suite's own layout: which process runs an end-to-end module is the
folder it lives in, and a test module never imports another one (what two
modules share lives in a module of its own, so that running one module never
collects another's tests)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import E2E_FOLDERS, scope_of

TESTS = Path(__file__).resolve().parents[2]
E2E = TESTS / "e2e"


def test_every_end_to_end_module_lives_in_one_of_the_folders_the_scheduler_knows() -> None:
    modules = sorted(E2E.rglob("test_*.py"))
    outside = [str(p.relative_to(E2E)) for p in modules if p.parent.name not in E2E_FOLDERS]
    assert len(modules) > 30
    assert outside == []
    for folder in E2E_FOLDERS:
        init = E2E / folder / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} says what it holds"
    assert sorted(p.parent.name for p in E2E.glob("*/__init__.py")) == sorted(E2E_FOLDERS)


def test_one_process_runs_a_folder_and_each_unit_test_goes_alone() -> None:
    assert scope_of("tests/e2e/training/test_train_tf.py::test_x[a]") == "training"
    assert scope_of("tests/e2e/kinds/test_rbac.py::test_y") == "kinds"
    unit = "tests/unit/project/test_layers.py::test_z"
    assert scope_of(unit) == unit


def test_the_import_checker_sees_a_test_module_imported() -> None:
    assert imported_test_modules("from .test_rbac import granted\n") == ["test_rbac"]
    assert imported_test_modules("from ..support.malformed import JUNK\n") == []
    assert imported_test_modules("from tests.unit.kinds import test_tfjob\n") == ["test_tfjob"]


def imported_test_modules(source: str) -> list[str]:
    """The test modules (test_*) that `source` imports, by their last name."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names += [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return [n.rsplit(".", 1)[-1] for n in names if n.rsplit(".", 1)[-1].startswith("test_")]


def test_no_test_module_imports_another() -> None:
    found = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text()))
    }
    assert found == {}
