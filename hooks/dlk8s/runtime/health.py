"""What /healthz and /readyz answer, from the threads that do the work.

- alive (/healthz): no informer thread has died, no worker has exited, and
  no pass has run far longer than any pass should (a wedged call). Failing
  it lets the liveness probe restart an operator that can no longer act,
  which answering 200 until SIGTERM never did. A standby (leader election)
  runs no informers yet and is alive while its election runs.
- ready (/readyz): the caches are synced and the workers run, or this
  instance is a standby waiting for the lease; never while stopping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol


class Worker(Protocol):
    @property
    def synced(self) -> bool: ...

    def problems(self) -> list[str]: ...


class Candidate(Protocol):
    @property
    def standing_by(self) -> bool: ...

    def problems(self) -> list[str]: ...


class Health:
    def __init__(
        self,
        stop: threading.Event,
        controller: Worker,
        election: Candidate | None = None,
        extra: Callable[[], list[str]] = lambda: [],
    ) -> None:
        self._stop = stop  # set once the process is stopping
        self._controller = controller
        self._election = election
        self._extra = extra  # problems of other parts (e.g. the autoscaler)

    def problems(self) -> list[str]:
        """Why the operator should be restarted; [] when it is healthy."""
        found = [] if self._election is None else self._election.problems()
        if self._election is not None and self._election.standing_by:
            return found
        return found + self._controller.problems() + self._extra()

    def ready(self) -> bool:
        if self._stop.is_set():
            return False
        standby = self._election is not None and self._election.standing_by
        return standby or self._controller.synced
