"""tools/aptlocks.sh: `make tools` waits for another apt-get or dpkg instead
of failing at once on the lock it holds (issue 46: `make test` on a fresh
machine stopped on /var/lib/apt/lists/lock, which apt's own
DPkg::Lock::Timeout does not cover).

Runs the script's apt_get in bash against lock files of the test's own,
held the way apt holds them (fcntl), with a stand-in apt-get on PATH.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "aptlocks.sh"


@pytest.fixture
def locks(tmp_path: Path) -> list[Path]:
    paths = [tmp_path / "lock-frontend", tmp_path / "lists-lock"]
    for path in paths:
        path.touch()
    return paths


@pytest.fixture
def apt_get(tmp_path: Path) -> Path:
    """A stand-in apt-get that notes its arguments and exits with $FAKE_APT_STATUS."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    script = bin_ / "apt-get"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >>{tmp_path / "calls"}\n'
        'if [ -n "$FAKE_APT_TAKES" ] && [ ! -e "$FAKE_APT_TAKES.taken" ]; then\n'
        '  touch "$FAKE_APT_TAKES.taken"\n'
        # Another apt-get takes the lock just as this one looks at it.
        '  python3 -c "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR);'
        ' fcntl.lockf(fd, fcntl.LOCK_EX); os.close(1); time.sleep(1.5)" "$FAKE_APT_TAKES" &\n'
        "  sleep 0.5\n"
        "  exit 100\n"
        "fi\n"
        'exit "${FAKE_APT_STATUS:-0}"\n'
    )
    script.chmod(0o755)
    return bin_


def run(
    locks: list[Path], bin_: Path, wait: int = 30, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    shell = (
        "log() { printf '[tools] %s\\n' \"$*\" >&2; }\n"
        f"source {SCRIPT}\n"
        f"APT_LOCKS=({' '.join(str(p) for p in locks)})\n"
        f"APT_LOCK_WAIT={wait}\n"
        "apt_get update -qq\n"
    )
    environment = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", **env}
    began = time.monotonic()
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", shell],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - began


def calls(bin_: Path) -> list[str]:
    path = bin_.parent / "calls"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def held(locks: list[Path]) -> Iterator[threading.Event]:
    """The second lock held by this process until the event is set."""
    fd = os.open(locks[1], os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    release = threading.Event()

    def let_go() -> None:
        release.wait()
        os.close(fd)  # closing any descriptor of the file drops its fcntl locks

    thread = threading.Thread(target=let_go)
    thread.start()
    yield release
    release.set()
    thread.join()


def test_free_locks_run_apt_get_at_once(locks: list[Path], apt_get: Path) -> None:
    done, took = run(locks, apt_get)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    [call] = calls(apt_get)
    assert call.startswith("-o DPkg::Lock::Timeout=")
    assert call.endswith(" update -qq")
    assert took < 5


def test_a_held_lock_is_waited_for_and_named_once(
    locks: list[Path], apt_get: Path, held: threading.Event
) -> None:
    threading.Timer(2.5, held.set).start()
    done, took = run(locks, apt_get)
    assert done.returncode == 0, done.stderr
    assert took >= 2
    [line] = done.stderr.splitlines()
    assert "waiting up to 30s for another apt-get or dpkg" in line
    assert f"{locks[1]} (held by " in line
    assert f"pid {os.getpid()})" in line
    assert len(calls(apt_get)) == 1


def test_a_lock_held_too_long_fails_without_running_apt_get(
    locks: list[Path], apt_get: Path, held: threading.Event
) -> None:
    done, took = run(locks, apt_get, wait=1)
    assert done.returncode != 0
    assert "giving up" in done.stderr.splitlines()[-1]
    assert calls(apt_get) == []
    assert took < 10


def test_a_lock_taken_as_apt_get_starts_is_waited_for_and_apt_get_run_again(
    locks: list[Path], apt_get: Path
) -> None:
    done, _ = run(locks, apt_get, FAKE_APT_TAKES=str(locks[1]))
    assert done.returncode == 0, done.stderr
    assert len(calls(apt_get)) == 2
    assert len([line for line in done.stderr.splitlines() if "waiting" in line]) == 1


def test_apt_get_failing_otherwise_fails_at_once_with_its_status(
    locks: list[Path], apt_get: Path
) -> None:
    done, took = run(locks, apt_get, FAKE_APT_STATUS="42")
    assert done.returncode == 42
    assert len(calls(apt_get)) == 1
    assert took < 5
