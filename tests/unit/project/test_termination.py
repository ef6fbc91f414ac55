"""The session rule of tests/conftest.py that SIGTERM and SIGHUP stop a run
as Ctrl-C does, on a throwaway suite: the session fixture's teardown (where
the real suite stops its clusters) runs, and a burst of signals does not
interrupt that teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONFTEST = Path(__file__).parents[2] / "conftest.py"

SUITE = """
import os, time
from pathlib import Path

import pytest

@pytest.fixture(scope="session")
def cluster():
    yield
    time.sleep(1)  # a teardown that takes a while, as stopping a cluster does
    Path(os.environ["TEARDOWN_MARK"]).write_text("torn down")

def test_waits(cluster):
    Path(os.environ["STARTED_MARK"]).write_text("started")
    time.sleep(60)
"""


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGHUP], [signal.SIGTERM] * 5])
def test_a_termination_signal_runs_the_session_teardown(
    tmp_path: Path, signals: list[signal.Signals]
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_suite.py").write_text(SUITE)
    started, torn_down = tmp_path / "started", tmp_path / "torn-down"
    env = os.environ | {"STARTED_MARK": str(started), "TEARDOWN_MARK": str(torn_down)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert wait_for(started, 60), "the test never started"
        for signum in signals:
            proc.send_signal(signum)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert torn_down.exists(), out
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
