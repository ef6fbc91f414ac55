"""What a job's last pass changed that the watch caches have not shown yet.

A reconcile that runs before the caches show its own creates and deletes
would decide on a past world: create again (harmless but wasted calls), or
count a pod it just replaced as lost a second time. As in client-go's
controllers, a job is not reconciled again until every change of its last
pass has been observed, or the expectation timed out (a watch event lost
to a relist is not worth a stuck job).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

# What identifies a change once it shows up in a cache: (group, name) for a
# create (its uid is not known yet) and ("uid", uid) for a delete.
Change = tuple[str, str]


class Seen(Enum):
    """What a change the caches show was to the job's last pass."""

    UNAWAITED = "unawaited"  # not one of its changes (someone else's, or a list's)
    AWAITED = "awaited"  # one of them, and others are still to show
    LAST = "last"  # the last of them


@dataclass
class _Pending:
    changes: set[Change] = field(default_factory=set)
    since: float = 0.0


class Expectations:
    def __init__(self, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._by_job: dict[str, _Pending] = {}

    def expect(self, job_uid: str, changes: set[Change]) -> None:
        """Record before the calls go out: the watch may deliver before they return."""
        if not changes:
            return
        with self._lock:
            pending = self._by_job.setdefault(job_uid, _Pending())
            pending.changes |= changes
            pending.since = self._clock()

    def cancel(self, job_uid: str, change: Change) -> None:
        """A call that failed or changed nothing: nothing will show up."""
        self.observe(job_uid, change)

    def observe(self, job_uid: str, change: Change) -> Seen:
        """Whether the job awaited this change, and was it the last."""
        with self._lock:
            pending = self._by_job.get(job_uid)
            if pending is None or change not in pending.changes:
                return Seen.UNAWAITED
            pending.changes.discard(change)
            if pending.changes:
                return Seen.AWAITED
            del self._by_job[job_uid]
            return Seen.LAST

    def wait_left(self, job_uid: str) -> float:
        """Seconds until the job may be reconciled regardless; 0 when it may now."""
        with self._lock:
            pending = self._by_job.get(job_uid)
            if pending is None:
                return 0.0
            left = pending.since + self._ttl - self._clock()
            if left <= 0:
                del self._by_job[job_uid]
                return 0.0
            return left

    def forget(self, job_uid: str) -> None:
        with self._lock:
            self._by_job.pop(job_uid, None)
