"""bench/'s shape, kept by CI rather than by habit (bench/README.md).

- no module over 500 lines, no function over 60;
- no import circle among its modules (imports inside functions count);
- one door into the operator: only bench/common/operator.py imports
  ``dlk8s``, only bench/common/devtools.py imports ``dlk8s_dev``;
- absolute imports only: no relative import, no module of bench imported by
  its bare name, no sys.path tricks;
- its parts layered: bench.common imports no other part of bench,
  bench.reports only bench.common, and no suite imports another;
- every make target of bench runs a module of bench (``-m bench.<suite>``).

Each check is a function of a folder, so that the last tests can plant a
violation in a package of their own and see the check catch it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from ..support.codeshape import (
    circles,
    import_graph,
    imported_names,
    imports,
    long_functions,
    long_modules,
    modules,
)

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "bench"
STDLIB = frozenset(sys.stdlib_module_names)
# The top-level package outside bench -> the one module of bench that may import it.
DOORS = {"dlk8s": "common.operator", "dlk8s_dev": "common.devtools"}
# Parts of bench that are not suites, and the parts each may import.
SHARED = {"common": {"common"}, "reports": {"common", "reports"}}


def through_other_doors(root: Path) -> list[str]:
    """Imports of dlk8s or dlk8s_dev by any module but its door."""
    found = []
    for name, path in modules(root).items():
        for node in imports(path):
            for target in imported_names(node):
                top = target.split(".")[0]
                door = f"{root.name}.{DOORS[top]}" if top in DOORS else None
                if door is not None and name != door:
                    found.append(f"{name} imports {target}")
    return sorted(found)


def bad_imports(root: Path) -> list[str]:
    """Relative imports, bench's modules by their bare names, sys.path edits."""
    stems = {path.stem for path in root.rglob("*.py")} - STDLIB - {"__init__", "__main__"}
    found = []
    for name, path in modules(root).items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                found.append(f"{name}: relative import from {node.module or '.'}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                bare = [t for t in imported_names(node) if t.split(".")[0] in stems]
                found += [f"{name}: bare import of {t}" for t in bare]
            elif (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                found.append(f"{name}: sys.path at line {node.lineno}")
    return sorted(found)


def layering(root: Path) -> list[str]:
    """Imports across bench's parts that their layering forbids."""
    found = []
    for name, targets in import_graph(root).items():
        part = name.split(".")[1] if "." in name else ""
        for target in sorted(targets):
            other = target.split(".")[1] if "." in target else ""
            allowed = SHARED.get(part, {"common", "reports", part})
            if not part or other not in allowed:
                found.append(f"{name} imports {target}")
    return sorted(found)


def make_targets(root: Path) -> list[str]:
    """The commands of bench's make files that run Python: each must be
    `$(PYTHON) -m <a module of bench>`."""
    found = []
    known = modules(root)
    for mk in sorted(root.glob("*.mk")):
        for line in mk.read_text().splitlines():
            if not line.startswith("\t") or "$(PYTHON)" not in line:
                continue
            run = re.search(r"\$\(PYTHON\) -m (\S+)", line)
            module = run.group(1) if run else ""
            if module not in known and f"{module}.__main__" not in known:
                found.append(f"{mk.name}: {line.strip()}")
    return found


# --- bench as it is ----------------------------------------------------------------------


def test_no_module_is_over_500_lines() -> None:
    assert long_modules(BENCH) == []


def test_no_function_is_over_60_lines() -> None:
    assert long_functions(BENCH) == []


def test_no_import_circle() -> None:
    graph = import_graph(BENCH)
    assert circles(graph) == []
    # The graph sees bench: the suites import the shared harness.
    assert "bench.common.runs" in graph["bench.burst.__main__"]


def test_dlk8s_and_dlk8s_dev_each_have_one_door() -> None:
    assert through_other_doors(BENCH) == []
    doors = [f"bench.{door}" for door in DOORS.values()]
    assert all(door in modules(BENCH) for door in doors)


def test_imports_are_absolute_and_sys_path_is_left_alone() -> None:
    assert bad_imports(BENCH) == []


def test_the_parts_are_layered() -> None:
    assert layering(BENCH) == []


def test_every_make_target_runs_a_module_of_bench() -> None:
    assert make_targets(BENCH) == []
    assert sorted(BENCH.glob("*.mk"))


# --- the checks catch what they look for -------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> Path:
    """A package named bench in `root`, of `files` (path -> source)."""
    bench = root / "bench"
    for name, text in {"__init__.py": "", "common/__init__.py": "", **files}.items():
        path = bench / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return bench


def _function(lines: int) -> str:
    """A function of `lines` lines, its def included."""
    return "def f():\n" + "    x = 1\n" * (lines - 1)


def test_a_module_over_500_lines_is_caught(tmp_path: Path) -> None:
    bench = _plant(tmp_path, {"big.py": "x = 1\n" * 501, "fits.py": "x = 1\n" * 500})
    assert long_modules(bench) == ["bench.big: 501 lines"]


def test_a_function_over_60_lines_is_caught(tmp_path: Path) -> None:
    nested = "class C:\n" + "".join("    " + line + "\n" for line in _function(61).splitlines())
    bench = _plant(tmp_path, {"long.py": _function(61), "fits.py": _function(60), "m.py": nested})
    assert long_functions(bench) == ["bench.long.f: 61 lines", "bench.m.f: 61 lines"]


def test_an_import_circle_is_caught_also_through_a_function(tmp_path: Path) -> None:
    bench = _plant(
        tmp_path,
        {
            "chaos/__init__.py": "",
            "chaos/a.py": "from bench.chaos.b import x\n",
            "chaos/b.py": "def x():\n    from bench.chaos import c\n",
            "chaos/c.py": "import bench.chaos.a\n",
            "chaos/d.py": "from bench.chaos.a import x\n",
        },
    )
    assert circles(import_graph(bench)) == [["bench.chaos.a", "bench.chaos.b", "bench.chaos.c"]]


def test_dlk8s_imported_past_its_door_is_caught(tmp_path: Path) -> None:
    bench = _plant(
        tmp_path,
        {
            "common/operator.py": "from dlk8s.job.config import ControllerConfig\n",
            "common/devtools.py": "from dlk8s_dev.localcluster import LocalCluster\n",
            "chaos/__init__.py": "",
            "chaos/sneaky.py": "def f():\n    from dlk8s.runtime import client\n",
            "chaos/sly.py": "import dlk8s_dev.kueue\n",
        },
    )
    assert through_other_doors(bench) == [
        "bench.chaos.sly imports dlk8s_dev.kueue",
        "bench.chaos.sneaky imports dlk8s.runtime.client",
    ]


def test_relative_and_bare_imports_and_sys_path_are_caught(tmp_path: Path) -> None:
    bench = _plant(
        tmp_path,
        {
            "common/harness.py": "import queue\n",
            "common/runs.py": "from .harness import x\n",
            "burst/__init__.py": "",
            "burst/main.py": "import sys\nsys.path.insert(0, 'bench')\nfrom harness import x\n",
        },
    )
    assert bad_imports(bench) == [
        "bench.burst.main: bare import of harness.x",
        "bench.burst.main: sys.path at line 2",
        "bench.common.runs: relative import from harness",
    ]


def test_a_part_importing_against_the_layers_is_caught(tmp_path: Path) -> None:
    bench = _plant(
        tmp_path,
        {
            "common/harness.py": "from bench.reports import cells\n",
            "reports/__init__.py": "",
            "reports/cells.py": "from bench.common import harness\n",
            "burst/__init__.py": "",
            "burst/main.py": "from bench.reports import cells\nfrom bench.scale import history\n",
            "scale/__init__.py": "",
            "scale/history.py": "from bench.common import harness\n",
        },
    )
    assert layering(bench) == [
        "bench.burst.main imports bench.scale.history",
        "bench.common.harness imports bench.reports.cells",
    ]


@pytest.mark.parametrize(
    ("command", "caught"),
    [
        ("\t$(PYTHON) -m bench.burst $(BENCH_ARGS)", False),
        ("\t$(PYTHON) -m bench.elastic.model", False),
        ("\t$(PYTHON) bench/bench.py $(BENCH_ARGS)", True),
        ("\t$(PYTHON) -m bench.nothing", True),
    ],
)
def test_a_make_target_that_runs_no_module_of_bench_is_caught(
    tmp_path: Path, command: str, caught: bool
) -> None:
    bench = _plant(
        tmp_path,
        {
            "burst/__init__.py": "",
            "burst/__main__.py": "",
            "elastic/__init__.py": "",
            "elastic/model.py": "",
        },
    )
    (bench / "x.mk").write_text(f"# a comment: $(PYTHON) bench/old.py\nx:\n{command}\n")
    assert make_targets(bench) == ([f"x.mk: {command.strip()}"] if caught else [])
