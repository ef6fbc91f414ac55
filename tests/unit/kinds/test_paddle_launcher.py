"""The command every PaddleJob pod runs, run here by a real `sh`.

EDL's images carried paddle_k8s; no image since does. The launcher runs it
where it is, and otherwise ENTRY in TRAINER_PACKAGE (see
dlk8s.job.kinds.paddlejob.launch.LAUNCHER).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from dlk8s.job.kinds.paddlejob.launch import LAUNCHER


def launch(
    tmp_path: Path, *arguments: str, timeout: float = 30, **env: str
) -> subprocess.CompletedProcess[str]:
    # The host's PATH has no paddle_k8s; a test that wants one puts it in bin.
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    return subprocess.run(
        ["sh", "-c", LAUNCHER, "paddle_k8s", *arguments],
        env={"PATH": path, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_an_image_with_edls_launcher_runs_it_with_edls_arguments(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "paddle_k8s"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\necho "edl: $*"\n')
    script.chmod(0o755)
    done = launch(tmp_path, "start_trainer", "v2", ENTRY="echo entry", TRAINER_PACKAGE="/")
    assert (done.returncode, done.stdout) == (0, "edl: start_trainer v2\n")


def test_without_it_entry_runs_in_the_trainer_package(tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    entry = 'echo "$PADDLE_TRAINING_ROLE in $(pwd)"; exit 3'
    done = launch(
        tmp_path,
        "start_new_pserver",
        ENTRY=entry,
        TRAINER_PACKAGE=str(package),
        PADDLE_TRAINING_ROLE="PSERVER",
    )
    # ENTRY's exit code is the container's: it decides the pod's outcome.
    assert (done.returncode, done.stdout) == (3, f"PSERVER in {package}\n")


@pytest.mark.parametrize("package", ["", None])
def test_without_a_workspace_entry_runs_where_the_image_starts(
    tmp_path: Path, package: str | None
) -> None:
    env = {"ENTRY": "pwd"} | ({} if package is None else {"TRAINER_PACKAGE": package})
    done = launch(tmp_path, "start_master", **env)
    assert (done.returncode, done.stdout) == (0, f"{tmp_path}\n")


def test_in_ps_mode_entry_runs_once_the_pservers_names_resolve(tmp_path: Path) -> None:
    pservers = {"PADDLE_PSERVERS_IP_PORT_LIST": "localhost:7164,127.0.0.1:7165"}
    done = launch(tmp_path, "start_trainer", "v2", ENTRY="echo trains", **pservers)
    assert (done.returncode, done.stdout) == (0, "trains\n")
    # A name the DNS does not know (yet): ENTRY waits, saying so once.
    unknown = {"PADDLE_PSERVERS_IP_PORT_LIST": "localhost:7164,no-such-pserver.invalid:7165"}
    with pytest.raises(subprocess.TimeoutExpired) as waited:
        launch(tmp_path, "start_pserver", ENTRY="echo serves", timeout=3, **unknown)
    said = waited.value.stdout or b""
    assert said.decode() == (
        "paddle: waiting for the pservers' names to resolve:"
        " localhost:7164,no-such-pserver.invalid:7165\n"
    )


def test_a_missing_trainer_package_fails_the_pod_saying_so(tmp_path: Path) -> None:
    done = launch(tmp_path, "start_new_trainer", ENTRY="echo ran", TRAINER_PACKAGE="/nowhere")
    assert done.returncode != 0
    assert done.stdout == ""
    assert "/nowhere" in done.stderr


# Paddle's elastic launcher, as far as the shell sees it: it runs its
# arguments as the program, except for the first STUB_IDLE_RUNS starts, where
# it gives up waiting for peers and exits 0 having run nothing (as Paddle
# 3.0's does when fewer than the minimum trainers meet within its timeout),
# and the next STUB_FAILED_RUNS, where it fails by itself (as it does when
# the etcd it registered in goes away). On SIGTERM it ends its program and
# exits 15, as Paddle's does, noting the signal in PADDLE_LOG_DIR/terminated
# (its program runs in a session of its own, whose id it notes in
# PADDLE_LOG_DIR/program).
STUB_LAUNCHER = """
import os, signal, subprocess, sys
logs = os.environ["PADDLE_LOG_DIR"]
program = None

def stop(signum, frame):
    open(os.path.join(logs, "terminated"), "w").write("SIGTERM")
    if program is not None:
        os.killpg(program.pid, signal.SIGTERM)
        os.waitpid(program.pid, 0)  # not program.wait(): the main thread holds its lock
    sys.exit(signum)

signal.signal(signal.SIGTERM, stop)
counter = os.path.join(logs, "starts")
starts = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(starts + 1))
idle = int(os.environ.get("STUB_IDLE_RUNS", "0"))
if starts < idle:
    sys.exit(0)
if starts < idle + int(os.environ.get("STUB_FAILED_RUNS", "0")):
    sys.exit(1)
program = subprocess.Popen(sys.argv[1:], start_new_session=True)
open(os.path.join(logs, "program"), "w").write(str(program.pid))
sys.exit(program.wait())
"""


@pytest.fixture
def etcd() -> Iterator[str]:
    """Something listening where the job's etcd would: the shell waits for it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"etcd://127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def with_paddle(tmp_path: Path, etcd: str) -> dict[str, str]:
    """The variables of a fault-tolerant job's pod on an image with Paddle."""
    launch_dir = tmp_path / "py" / "paddle" / "distributed" / "launch"
    launch_dir.mkdir(parents=True)
    for package in (launch_dir, launch_dir.parent, launch_dir.parent.parent):
        (package / "__init__.py").write_text("")
    (launch_dir / "__main__.py").write_text(STUB_LAUNCHER)
    logs = tmp_path / "logs"
    logs.mkdir()
    return {
        "PYTHONPATH": str(tmp_path / "py"),
        "PADDLE_MASTER": etcd,
        "PADDLE_LOG_DIR": str(logs),
        "PADDLE_TRAINING_ROLE": "TRAINER",
    }


def starts(tmp_path: Path) -> int:
    return int((tmp_path / "logs" / "starts").read_text())


def test_a_trainer_on_a_paddle_image_runs_entry_under_paddles_launcher(
    tmp_path: Path, with_paddle: dict[str, str]
) -> None:
    entry = 'echo "$PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"; exit 0'
    done = launch(tmp_path, "start_new_trainer", ENTRY=entry, **with_paddle)
    assert (done.returncode, done.stdout, starts(tmp_path)) == (0, "python\n", 1)


def test_a_launcher_that_gave_up_on_its_peers_or_failed_is_started_again(
    tmp_path: Path, with_paddle: dict[str, str]
) -> None:
    env = with_paddle | {"STUB_IDLE_RUNS": "2", "STUB_FAILED_RUNS": "1"}
    done = launch(tmp_path, "start_new_trainer", ENTRY="echo trained", **env)
    assert (done.returncode, starts(tmp_path)) == (0, 4)
    assert done.stdout.count("gave up waiting for minInstance trainers") == 2
    assert done.stdout.count("the launcher failed (exit 1) before ENTRY ended") == 1
    assert done.stdout.endswith("trained\n")


def test_a_failed_program_ends_the_trainer_with_its_exit_code(
    tmp_path: Path, with_paddle: dict[str, str]
) -> None:
    done = launch(tmp_path, "start_new_trainer", ENTRY="exit 7", **with_paddle)
    assert (done.returncode, starts(tmp_path)) == (7, 1)


def test_a_program_killed_by_a_signal_rejoins_five_times_then_fails(
    tmp_path: Path, with_paddle: dict[str, str]
) -> None:
    done = launch(tmp_path, "start_new_trainer", ENTRY="kill -9 $$", **with_paddle)
    assert (done.returncode, starts(tmp_path)) == (137, 6)
    assert done.stdout.count("ENTRY died by a signal (exit 137; a peer left?)") == 6
    assert "(exit 137; a peer left?), 6 times in 600 s: failing" in done.stdout


def test_a_trainer_waits_for_its_etcd(tmp_path: Path, with_paddle: dict[str, str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    env = with_paddle | {"PADDLE_MASTER": f"etcd://127.0.0.1:{port}"}
    with pytest.raises(subprocess.TimeoutExpired):
        launch(tmp_path, "start_new_trainer", ENTRY="echo ran", timeout=3, **env)
    assert not (tmp_path / "logs" / "starts").exists()


def gone(session: int, seconds: float) -> bool:
    """Whether every process of ``session`` has ended, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(session, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def terminated_at(
    tmp_path: Path, env: dict[str, str], seconds: float, ready: Callable[[IO[str]], str]
) -> tuple[int, str]:
    """SIGTERM to the shell ``seconds`` after ``ready`` (given its output)
    returned (the kubelet's signal at a pod's deletion): its exit code, and
    what ``ready`` returned. In a session of its own, so that nothing it
    started outlives the test."""
    # python3 is Python itself, as in an image (a host's may be a shell
    # script, pyenv's, that a signal ends in its own way).
    python = Path(sys.executable).parent
    with subprocess.Popen(
        ["sh", "-c", LAUNCHER, "paddle_k8s", "start"],
        env={"PATH": f"{tmp_path / 'bin'}:{python}:{os.environ['PATH']}", **env},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as shell:
        try:
            assert shell.stdout is not None
            said = ready(shell.stdout)
            time.sleep(seconds)
            shell.terminate()
            code = shell.wait(timeout=10)
            # The shell and every process it started have ended (an orphan
            # the shell left dead is gone once init has reaped it).
            assert gone(shell.pid, seconds=5)
            return code, said
        finally:
            program = tmp_path / "logs" / "program"
            sessions = [shell.pid] + ([int(program.read_text())] if program.exists() else [])
            for session in sessions:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(session, signal.SIGKILL)


# A signal at any moment, the instant after a fork among them (the first
# delays): a signal that reaches the fork's copy of the shell is lost there.
DELAYS = [0, 0.01, 0.05, 0.2, 0.5]


@pytest.mark.parametrize("role", ["MASTER", "PSERVER"])
def test_the_other_roles_of_an_elastic_paddle_job_wait_and_end_on_sigterm(
    tmp_path: Path, with_paddle: dict[str, str], role: str
) -> None:
    env = with_paddle | {"PADDLE_TRAINING_ROLE": role}
    # The workspace is the trainers' (a volume only they mount).
    env |= {"ENTRY": "echo ran; exit 5", "TRAINER_PACKAGE": "/nowhere"}
    for seconds in DELAYS:
        code, line = terminated_at(tmp_path, env, seconds, lambda out: out.readline())
        assert code == 0
        assert line.startswith(f"paddle: the {role} of an elastic Paddle job runs no program")
    assert not (tmp_path / "logs" / "starts").exists()


def test_a_trainer_passes_sigterm_on_to_paddles_launcher(
    tmp_path: Path, with_paddle: dict[str, str]
) -> None:
    logs = tmp_path / "logs"
    with socket.create_server(("127.0.0.1", 0)) as etcd:
        etcd.settimeout(10)

        def reached(out: IO[str]) -> str:
            # The shell asks for its etcd once it is set to pass signals on.
            etcd.accept()[0].close()
            return ""

        env = with_paddle | {
            "ENTRY": "exec sleep 60",
            "PADDLE_MASTER": f"etcd://127.0.0.1:{etcd.getsockname()[1]}",
        }
        for seconds in DELAYS:
            for mark in ("terminated", "program", "starts"):
                (logs / mark).unlink(missing_ok=True)
            code, _ = terminated_at(tmp_path, env, seconds, reached)
            # A launcher that had started ended its program and exited 15, as
            # Paddle's does on SIGTERM; before that (the shell waiting for the
            # etcd, Python starting), the signal ends the trainer: 128 + 15.
            started = (logs / "starts").exists()
            assert (code, (logs / "terminated").exists()) == (
                (15, True) if started else (143, False)
            )
    # The last delay is long enough for the launcher to have started.
    assert started


def test_without_paddle_master_a_paddle_image_runs_entry_itself(
    tmp_path: Path, with_paddle: dict[str, str]
) -> None:
    env = dict(with_paddle)
    del env["PADDLE_MASTER"]
    done = launch(tmp_path, "start_trainer", "v2", ENTRY="echo ps mode; exit 4", **env)
    assert (done.returncode, done.stdout) == (4, "ps mode\n")
    assert not (tmp_path / "logs" / "starts").exists()
