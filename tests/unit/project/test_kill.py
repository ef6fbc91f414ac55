"""leftovers.kill: what a forced stop kills is gone when the stop says so."""

from __future__ import annotations

import os
import signal
import subprocess

from dlk8s_dev import leftovers


def test_kill_returns_once_each_process_it_killed_has_exited() -> None:
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    os.kill(procs[1].pid, signal.SIGSTOP)  # stopped, as the forced stop's kubelet is
    try:
        assert leftovers.kill([p.pid for p in procs]) == [p.pid for p in procs]
        for proc in procs:
            # Exited already: not waited for here, only read.
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            assert (pid, os.WTERMSIG(status)) == (proc.pid, signal.SIGKILL)
            proc.returncode = -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                proc.wait()


def test_kill_leaves_out_what_is_already_gone() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        assert leftovers.kill([gone.pid, alive.pid]) == [alive.pid]
    finally:
        alive.wait()
