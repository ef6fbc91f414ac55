"""Child processes that die with the process that started them, however it dies."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child get ``sig`` when its parent dies.

    prctl(PR_SET_PDEATHSIG) survives exec. It fires when the *thread* that
    forked the child exits, so spawn from a thread that lives as long as the
    child should: the main thread, or the work thread of stopping.py, which
    ends only after its teardown. If the parent is already gone by the time
    the child runs the prctl, the child exits at once.
    """
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec
