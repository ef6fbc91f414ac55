"""The session rules of tests/conftest.py, run on a throwaway suite: under
CI=true a skip (in a test, or in its fixture: an error) fails the run; elsewhere it
stays a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).parents[2] / "conftest.py"

SUITE = """
import pytest

@pytest.fixture
def tool():
    pytest.skip("tool missing")

def test_skips_in_its_body():
    pytest.skip("not here")

def test_skips_in_a_fixture(tool):
    pass

def test_passes():
    assert True
"""


def run_suite(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_a_skip_fails_the_run_under_ci(tmp_path: Path) -> None:
    result = run_suite(tmp_path, "true")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    # A skip in a fixture fails the setup: pytest calls that an error.
    assert "1 failed, 1 passed, 1 error" in result.stdout
    why = "skipped under CI=true, which counts as a failure"
    assert f"FAILED test_suite.py::test_skips_in_its_body - {why}" in result.stdout
    assert f"ERROR test_suite.py::test_skips_in_a_fixture - {why}" in result.stdout


def test_a_skip_stays_a_skip_outside_ci(tmp_path: Path) -> None:
    result = run_suite(tmp_path, None)
    assert result.returncode == pytest.ExitCode.OK, result.stdout
    assert "1 passed, 2 skipped" in result.stdout
