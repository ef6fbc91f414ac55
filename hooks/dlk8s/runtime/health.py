"""What /healthz and /readyz answer, from the threads that do the work.

- alive (/healthz): no informer thread has died, no worker has exited, and
  no pass has run far longer than any pass should (a wedged call). Failing
  it lets the liveness probe restart an operator that can no longer act,
  which answering 200 until SIGTERM never did. A standby (leader election)
  runs no informers yet and is alive while its election runs.
- ready (/readyz): the caches are synced and the workers run, or this
  instance is a standby waiting for the lease; never while stopping.

Each check has a name (informers, workers, passes, leader-election): the
probe's answer names the checks that failed and nothing more, since the
details name jobs and namespaces of every tenant; they go to the log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol


class Worker(Protocol):
    @property
    def synced(self) -> bool: ...

    def checks(self) -> dict[str, list[str]]: ...


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
        extra: Callable[[], dict[str, list[str]]] = dict,
    ) -> None:
        self._stop = stop  # set once the process is stopping
        self._controller = controller
        self._election = election
        self._extra = extra  # checks of other parts (e.g. the autoscaler)

    def checks(self) -> dict[str, list[str]]:
        """Each check by name, with why it fails ([] when it passes)."""
        found = {} if self._election is None else {"leader-election": self._election.problems()}
        if self._election is not None and self._election.standing_by:
            return found
        return found | self._controller.checks() | self._extra()

    def ready(self) -> bool:
        if self._stop.is_set():
            return False
        standby = self._election is not None and self._election.standing_by
        return standby or self._controller.synced
