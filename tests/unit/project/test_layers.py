"""The package's layers, as each folder's docstring states them.

Parses every module of hooks/dlk8s and fails on an import its layer may not
make, so the layering is kept by CI rather than by habit.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "hooks" / "dlk8s"
STDLIB = frozenset(sys.stdlib_module_names)

# Third-party modules a layer may use besides the standard library.
JOB_THIRD_PARTY = frozenset({"yaml"})
RUNTIME_THIRD_PARTY = frozenset({"kubernetes", "orjson", "urllib3", "prometheus_client", "yaml"})

# layer -> the dlk8s layers it may import (its own always allowed)
ALLOWED_LAYERS = {
    "dlk8s.job": {"dlk8s.job"},
    "dlk8s.autoscaler.plan": {"dlk8s.job", "dlk8s.autoscaler.plan"},
    "dlk8s.autoscaler.loop": {"dlk8s.job", "dlk8s.runtime", "dlk8s.autoscaler.plan"},
    "dlk8s.runtime": {"dlk8s.job", "dlk8s.runtime"},
    "dlk8s.cli": {"dlk8s.job", "dlk8s.runtime", "dlk8s.autoscaler", "dlk8s.cli"},
}
THIRD_PARTY = {
    "dlk8s.job": JOB_THIRD_PARTY,
    "dlk8s.autoscaler.plan": JOB_THIRD_PARTY,
    "dlk8s.autoscaler.loop": RUNTIME_THIRD_PARTY,
    "dlk8s.runtime": RUNTIME_THIRD_PARTY,
    "dlk8s.cli": RUNTIME_THIRD_PARTY,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str | None:
    for layer in sorted(ALLOWED_LAYERS, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import; name the layer explicitly")
            base = node.module or ""
            # `from dlk8s.job import naming` imports dlk8s.job.naming
            found += [f"{base}.{alias.name}" for alias in node.names] if base == "dlk8s" else [base]
    return found


def violations(module: str, imported: list[str]) -> list[str]:
    layer = layer_of(module)
    if layer is None:
        return []  # dlk8s itself: only a docstring
    bad = []
    for name in imported:
        top = name.split(".")[0]
        if top == "__future__" or top in STDLIB:
            continue
        if top == "dlk8s":
            if not any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_LAYERS[layer]):
                bad.append(f"{module} imports {name}")
        elif top not in THIRD_PARTY[layer]:
            bad.append(f"{module} imports {name}")
    return bad


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_each_module_imports_only_what_its_layer_may(path: Path) -> None:
    assert violations(module_name(path), imports_of(path)) == []


def test_a_module_outside_every_layer_holds_only_its_docstring() -> None:
    loose = [p for p in MODULES if layer_of(module_name(p)) is None]
    assert sorted(module_name(p) for p in loose) == ["dlk8s", "dlk8s.autoscaler"]
    for path in loose:
        body = ast.parse(path.read_text()).body
        assert [type(node) for node in body] == [ast.Expr], path


def test_the_checker_catches_a_pure_module_that_reaches_the_runtime() -> None:
    assert violations("dlk8s.job.reconcile", ["dlk8s.runtime.client"]) == [
        "dlk8s.job.reconcile imports dlk8s.runtime.client"
    ]
    assert violations("dlk8s.job.naming", ["kubernetes.client"]) != []
    assert violations("dlk8s.job.naming", ["threading"]) == []  # stdlib is judged by review
    assert violations("dlk8s.autoscaler.plan", ["dlk8s.autoscaler.loop"]) != []
    assert violations("dlk8s.runtime.controller", ["dlk8s.cli.main"]) != []


def test_the_image_package_never_imports_the_dev_tooling() -> None:
    users = [
        module_name(p)
        for p in MODULES
        if any(name.split(".")[0] == "dlk8s_dev" for name in imports_of(p))
    ]
    assert users == []
    assert violations("dlk8s.runtime.client", ["dlk8s_dev.localcluster"]) != []


def test_the_pure_layer_starts_no_threads_and_reads_no_clock() -> None:
    """The job layer gets `now` from its caller and never blocks."""
    banned = {"threading", "time", "concurrent", "socket", "subprocess", "urllib"}
    offenders = []
    for path in MODULES:
        module = module_name(path)
        if layer_of(module) in ("dlk8s.job", "dlk8s.autoscaler.plan"):
            offenders += [f"{module}: {n}" for n in imports_of(path) if n.split(".")[0] in banned]
    assert offenders == []
