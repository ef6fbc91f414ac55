"""The control plane's processes: each started by pid in the cluster's
folder with its log beside it, dying with this process, watched while the
cluster starts, started again on request, stopped in reverse order."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..clusterapi import ClusterError
from ..goruntime import server_env
from ..pdeath import die_with_parent


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    argv: list[str] = field(default_factory=list)  # to start it again (restart)


def spawn(workdir: Path, name: str, argv: Sequence[str]) -> Process:
    log = workdir / "logs" / f"{name}.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("wb") as out:
        popen = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            # Its own process group, so Ctrl-C in a terminal reaches only
            # us and we stop the children in order.
            start_new_session=True,
            env=server_env(),
            # And it dies with us, even when we are killed (SIGKILL, a
            # timeout) and cannot stop it.
            preexec_fn=die_with_parent(),
        )
    return Process(name, popen, log, list(argv))


def restart(proc: Process, workdir: Path, down: float, sig: int) -> None:
    """Kill ``proc`` (by pid), leave it down ``down`` seconds, and start it
    again with the same flags (its port, its data), its log going on."""
    end(proc, sig)
    time.sleep(down)
    start_again(proc, workdir)


def end(proc: Process, sig: int = signal.SIGKILL) -> None:
    """Kill ``proc`` by pid and wait for it: start_again brings it back."""
    with contextlib.suppress(ProcessLookupError):
        proc.popen.send_signal(sig)
    proc.popen.wait(timeout=30)


def start_again(proc: Process, workdir: Path) -> None:
    """Start an ended ``proc`` with the same flags, its log going on."""
    with proc.log.open("ab") as out:
        proc.popen = subprocess.Popen(
            proc.argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            start_new_session=True,
            env=server_env(),
            preexec_fn=die_with_parent(),
        )


def stop_all(procs: Sequence[Process], grace: float) -> None:
    """SIGTERM to each, newest first; SIGKILL to what has not ended in ``grace`` seconds."""
    for proc in reversed(procs):
        with contextlib.suppress(ProcessLookupError):
            proc.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in reversed(procs):
        try:
            proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    procs: Sequence[Process],
    interrupt: threading.Event | None,
) -> None:
    """Until ``predicate()``; fails at once when a process ends or the run is asked to stop."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if interrupt is not None and interrupt.is_set():
            raise ClusterError(f"asked to stop while waiting for {what}")
        for proc in procs:
            if proc.popen.poll() is not None:
                tail = proc.log.read_text(errors="replace")[-3000:]
                raise ClusterError(f"{proc.name} exited {proc.popen.returncode}:\n{tail}")
        if predicate():
            return
        time.sleep(0.2)
    raise ClusterError(f"timed out after {timeout}s waiting for {what}")
