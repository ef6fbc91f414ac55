"""The chart's tests import the chart tooling of tools/ (chartdoc.py and the
modules it runs: chart_values, chart_schema, chart_usage), which is a folder
of scripts rather than a package: it goes on the import path here, once,
before any test module of this folder is imported."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TOOLS = str(ROOT / "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import chartdoc  # noqa: E402  (tools/ is on the path only from the line above)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files chartdoc reads and writes, in a checkout of their own."""
    shutil.copytree(ROOT / "crds", tmp_path / "crds")
    shutil.copytree(ROOT / "charts", tmp_path / "charts", symlinks=True)
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / chartdoc.DOCS, tmp_path / chartdoc.DOCS)
    shutil.copy(ROOT / chartdoc.VERSION, tmp_path / chartdoc.VERSION)
    assert chartdoc.check(tmp_path) == []
    return tmp_path
