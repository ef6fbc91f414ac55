"""The package's layers, as each folder's docstring states them.

Parses every module of hooks/dlk8s and fails on an import its layer may not
make, so the layering is kept by CI rather than by habit.
"""

from __future__ import annotations

import ast
import sys
import tomllib
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
    # Every autoscaler module but loop is pure: the model, the simulation, the plan.
    "dlk8s.autoscaler": {"dlk8s.job", "dlk8s.autoscaler"},
    "dlk8s.autoscaler.loop": {"dlk8s.job", "dlk8s.runtime", "dlk8s.autoscaler"},
    "dlk8s.runtime": {"dlk8s.job", "dlk8s.runtime"},
    "dlk8s.cli": {"dlk8s.job", "dlk8s.runtime", "dlk8s.autoscaler", "dlk8s.cli"},
}
THIRD_PARTY = {
    "dlk8s.job": JOB_THIRD_PARTY,
    "dlk8s.autoscaler": JOB_THIRD_PARTY,
    "dlk8s.autoscaler.loop": RUNTIME_THIRD_PARTY,
    "dlk8s.runtime": RUNTIME_THIRD_PARTY,
    "dlk8s.cli": RUNTIME_THIRD_PARTY,
}
# What a layer may not import although its own layer is allowed: the pure
# autoscaler never reaches its I/O loop.
FORBIDDEN = {"dlk8s.autoscaler": {"dlk8s.autoscaler.loop"}}


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
            # `from dlk8s.job import childnames` imports dlk8s.job.childnames
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
            allowed = any(_within(name, ok) for ok in ALLOWED_LAYERS[layer])
            if not allowed or any(_within(name, no) for no in FORBIDDEN.get(layer, ())):
                bad.append(f"{module} imports {name}")
        elif top not in THIRD_PARTY[layer]:
            bad.append(f"{module} imports {name}")
    return bad


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_each_module_imports_only_what_its_layer_may(path: Path) -> None:
    assert violations(module_name(path), imports_of(path)) == []


def test_a_module_outside_every_layer_holds_only_its_docstring() -> None:
    loose = [p for p in MODULES if layer_of(module_name(p)) is None]
    assert sorted(module_name(p) for p in loose) == ["dlk8s"]
    # The autoscaler's package, in its pure layer, only says how it is layered.
    for path in [*loose, PACKAGE / "autoscaler" / "__init__.py"]:
        body = ast.parse(path.read_text()).body
        assert [type(node) for node in body] == [ast.Expr], path


def test_the_checker_catches_a_pure_module_that_reaches_the_runtime() -> None:
    assert violations("dlk8s.job.reconcile", ["dlk8s.runtime.client"]) == [
        "dlk8s.job.reconcile imports dlk8s.runtime.client"
    ]
    assert violations("dlk8s.job.childnames", ["kubernetes.client"]) != []
    assert violations("dlk8s.job.childnames", ["threading"]) == []  # stdlib is judged by review
    assert violations("dlk8s.autoscaler.plan", ["dlk8s.autoscaler.loop"]) != []
    assert violations("dlk8s.autoscaler.simulation", ["dlk8s.runtime.client"]) != []
    assert violations("dlk8s.autoscaler.cluster", ["prometheus_client"]) != []
    assert violations("dlk8s.autoscaler.plan", ["dlk8s.autoscaler.simulation"]) == []
    assert violations("dlk8s.autoscaler.loop", ["dlk8s.runtime.metrics"]) == []
    assert violations("dlk8s.runtime.controller", ["dlk8s.cli.main"]) != []


def test_the_image_package_never_imports_the_dev_tooling() -> None:
    users = [
        module_name(p)
        for p in MODULES
        if any(name.split(".")[0] == "dlk8s_dev" for name in imports_of(p))
    ]
    assert users == []
    assert violations("dlk8s.runtime.client", ["dlk8s_dev.localcluster"]) != []


PURE = ("dlk8s.job", "dlk8s.autoscaler")


def test_the_pure_layer_starts_no_threads_and_reads_no_clock() -> None:
    """The job layer gets `now` from its caller and never blocks."""
    banned = {"threading", "time", "concurrent", "socket", "subprocess", "urllib"}
    offenders = []
    for path in MODULES:
        module = module_name(path)
        if layer_of(module) in PURE:
            offenders += [f"{module}: {n}" for n in imports_of(path) if n.split(".")[0] in banned]
    assert offenders == []


def test_mypy_checks_every_pure_module_strictly() -> None:
    """A pure module left out of pyproject's strict override is checked
    loosely without anyone noticing."""
    config = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    strict = next(
        o["module"] for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_generics")
    )
    missing = [
        module
        for module in map(module_name, MODULES)
        if layer_of(module) in PURE
        and not any(module == m or (m.endswith(".*") and _within(module, m[:-2])) for m in strict)
    ]
    assert missing == []


# -- the order inside a layer ----------------------------------------------------

# Tiers, lowest first: a module imports only modules of its layer that stand
# in a lower tier (a subpackage, such as job.kinds, is one unit; its modules
# import each other freely). In the runtime `client` is the lowest that sends
# requests: beside the errors, the resources it knows, the metrics it counts
# and the API server's clock its answers tell, it imports nothing of the
# runtime (the informers build on it, not it on them). Nothing in the runtime
# imports `controller`: the command line builds it.
RUNTIME_TIERS = (
    # leaves: data, clocks, locks and counters, no other runtime module
    {"apiresources", "clock", "errors", "expectations", "health", "logs", "metrics"}
    | {"ownwrites", "passes", "serverclock", "workqueue"}
    # what the caches keep of an object, and which changes need a pass now:
    # pure rules over the job layer that only the runtime uses
    | {"kept", "urgency"},
    {"client", "events", "leader", "serving"},  # the API calls, and the listeners
    {"access", "executor", "informer"},  # built on the calls
    {"childindex", "lifecycle", "queueing"},  # what the controller keeps, over the informers
    {"childevents", "orphans"},  # over the index: when a pass runs; the pods of jobs gone
    {"controller"},
)
# In the job layer the vocabulary is at the bottom and reconcile at the top:
# the kinds fill the slots that reconcile walks, never the other way round.
JOB_TIERS = (
    {"vocabulary", "childnames", "config"},  # words, name rules and the controller config
    {"objects"},  # raw API objects read leniently
    {"actions", "conditions", "outcomes", "computeresources"},
    {"failurepolicy"},  # podFailurePolicy's rules, over outcomes' exit-code classes
    {"jobmodel", "validation"},  # what a kind is and a job's view, and what any spec must hold
    {"children"},  # the manifests of pods and services
    {"network"},  # a job's NetworkPolicies
    {"env"},
    {"accelerators"},
    {"kinds", "kueue"},  # the five kinds, and Kueue's rules for a queued job's Workload
    {"reconcile"},  # what a pass does
)
ORDERS = {"dlk8s.runtime": RUNTIME_TIERS, "dlk8s.job": JOB_TIERS}


def layer_imports(path: Path, layer: str) -> list[str]:
    """The units of `layer` that `path` imports, by their short names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module == layer:
            names = [f"{layer}.{a.name}" for a in node.names]  # from dlk8s.runtime import logs
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        found += [n.split(".")[2] for n in names if n.startswith(layer + ".")]
    return found


def tier(layer: str, name: str) -> int:
    return next(i for i, units in enumerate(ORDERS[layer]) if name in units)


def order_violations(module: str, imported: list[str], layer: str = "dlk8s.runtime") -> list[str]:
    own = tier(layer, module)
    return [
        f"{module} imports {name}"
        for name in imported
        if name != module and tier(layer, name) >= own
    ]


def units(layer: str) -> list[str]:
    folder = PACKAGE / layer.split(".")[1]
    return sorted(p.stem for p in folder.iterdir() if p.stem not in ("__init__", "__pycache__"))


def sources(layer: str, name: str) -> list[Path]:
    folder = PACKAGE / layer.split(".")[1] / name
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]


UNITS = [(layer, name) for layer in ORDERS for name in units(layer)]


@pytest.mark.parametrize("layer", sorted(ORDERS))
def test_every_unit_of_a_layer_has_its_place_in_the_order(layer: str) -> None:
    assert sorted(set().union(*ORDERS[layer])) == units(layer)


@pytest.mark.parametrize(("layer", "name"), UNITS)
def test_a_unit_imports_only_the_tiers_below_its_own(layer: str, name: str) -> None:
    for path in sources(layer, name):
        assert order_violations(name, layer_imports(path, layer), layer) == [], path


def test_the_order_checker_catches_an_inversion_inside_a_layer() -> None:
    assert order_violations("client", ["informer"]) == ["client imports informer"]
    assert order_violations("executor", ["controller"]) != []
    assert order_violations("executor", ["informer"]) != []  # nor within a tier
    assert order_violations("controller", ["client", "logs"]) == []
    source = PACKAGE / "runtime" / "controller.py"
    assert {"logs", "metrics", "client"} <= set(layer_imports(source, "dlk8s.runtime"))
    assert order_violations("objects", ["jobmodel"], "dlk8s.job") == ["objects imports jobmodel"]
    assert order_violations("kinds", ["reconcile"], "dlk8s.job") != []
    assert order_violations("kinds", ["kinds", "jobmodel"], "dlk8s.job") == []
    tfjob = PACKAGE / "job" / "kinds" / "tfjob.py"
    assert {"jobmodel", "vocabulary"} <= set(layer_imports(tfjob, "dlk8s.job"))
