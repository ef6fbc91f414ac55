"""One version, in VERSION: the chart, the package, the image and the notes follow it."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
VERSION = (ROOT / "VERSION").read_text().strip()


def test_the_version_is_semantic() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", VERSION)


def test_the_chart_follows_it() -> None:
    chart = yaml.safe_load((ROOT / "charts/dlk8s/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)


def test_the_python_package_and_the_command_follow_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project  # read from VERSION, never written twice
    assert importlib.metadata.version("dlk8s") == VERSION  # `make tools` reinstalls on a bump
    shown = subprocess.run(
        [sys.executable, "-m", "dlk8s.cli.main", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == VERSION


def test_the_image_build_carries_the_version_file() -> None:
    dockerfile = (ROOT / "hooks/Dockerfile").read_text()
    copied = [line.split()[1:-1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert any("VERSION" in files and "pyproject.toml" in files for files in copied)


def test_the_changelog_has_an_entry_for_it() -> None:
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[0] == VERSION


def test_the_license_file_is_the_declared_license() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    text = (ROOT / "LICENSE").read_text()
    assert declared == "Apache-2.0"
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
