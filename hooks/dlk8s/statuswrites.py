"""When a job's changed status is written: fewer writes while its pods appear.

A status write is the most expensive request the operator makes (the API
server validates the whole object and tracks its managed fields, and every
watcher of the jobs gets it), and a job whose pods are being created and
started changes its status many times in a second. One kind of write is
held back; everything else is written at once:

- A change of pod counts only (replicaStatuses' counts by phase, with the
  same number of pods per replica, the same phase, conditions and all other
  fields) waits up to `batch` seconds from the pass that first held it, so
  pods going Pending -> Running one by one cost one write per window, and
  none when a write of another change (the job turning Running) comes first.
  The client-go Job controller batches its pod events the same way (a 1 s
  sync batch period).

Held back never means lost: the held pass asks for a requeue, and every pass
computes the complete status afresh. Restart counting reads only the number
of pods per replica from the previous status (see reconcile), which a held
write of counts never changes; a finished or failing job (state not Running)
is written at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from dlk8s.api import State, as_dict, as_list
from dlk8s.policy import pod_total

BATCH_SECONDS: Final = 1.0


class StatusWrites:
    def __init__(self, batch: float = BATCH_SECONDS, clock: Callable[[], float] = time.monotonic):
        self._batch = batch
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}  # job uid -> since when a count change waits

    def hold(self, uid: str, old: object, new: dict[str, Any]) -> float:
        """Seconds to hold this write back (0: write now).

        The status of a pass that created pods is never held, though the next
        pass rewrites it: it carries the restarts that pass counted, and the
        pass after compares pod totals against it. Holding it back made
        recreated pods count twice (seen for 1 in 6 deleted pods).
        """
        if new.get("state") != State.RUNNING:
            return 0.0
        if not counts_only(old, new):
            return 0.0
        now = self._clock()
        with self._lock:
            since = self._held.setdefault(uid, now)
        return max(0.0, since + self._batch - now)

    def written(self, uid: str) -> None:
        self.forget(uid)

    def forget(self, uid: str) -> None:
        with self._lock:
            self._held.pop(uid, None)


def counts_only(old: object, new: dict[str, Any]) -> bool:
    """Whether `new` differs from `old` only in the phase counts of replicaStatuses,
    with as many pods per replica as before."""
    old = as_dict(old)
    if not old or {k: v for k, v in old.items() if k != "replicaStatuses"} != {
        k: v for k, v in new.items() if k != "replicaStatuses"
    }:
        return False
    before, after = as_list(old.get("replicaStatuses")), as_list(new.get("replicaStatuses"))
    roles = [str(as_dict(r).get("replicaType")) for r in after]
    if [str(as_dict(r).get("replicaType")) for r in before] != roles:
        return False
    return all(pod_total(before, role) == pod_total(after, role) for role in roles)
