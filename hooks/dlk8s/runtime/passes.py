"""The passes running now, so that /healthz can tell a wedged one.

A pass takes milliseconds, seconds for a job of thousands of pods; one that
has run far longer is wedged (a call that never returns), and the liveness
probe should restart the operator rather than leave the job unattended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# How long a pass may run before it counts as wedged (--stuck-pass-seconds).
STUCK_PASS_SECONDS = 300.0


class RunningPasses:
    """Each worker's pass in progress: which key, since when."""

    def __init__(
        self, stuck_after: float = STUCK_PASS_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stuck_after = stuck_after  # a pass running longer than this is wedged
        self._clock = clock  # monotonic: a pass's age must not jump with the wall clock
        self._since: dict[int, tuple[object, float]] = {}  # by worker thread: its key, since when
        self._lock = threading.Lock()  # workers start and end passes while /healthz reads

    @contextmanager
    def running(self, key: object) -> Iterator[None]:
        """The pass of `key` on this thread, for the length of the block."""
        worker = threading.get_ident()
        with self._lock:
            self._since[worker] = (key, self._clock())
        try:
            yield
        finally:
            with self._lock:
                del self._since[worker]

    def stuck(self) -> list[str]:
        """A line for each pass that has run longer than `stuck_after`."""
        now = self._clock()
        with self._lock:
            passes = list(self._since.values())
        return [
            f"a pass of {key} has run for {now - since:.0f}s"
            for key, since in passes
            if now - since > self.stuck_after
        ]
