"""What a child's watch event does to its job, and when its next pass runs.

The event files the child under its job (runtime.childindex) and marks the
change seen (runtime.expectations). A change that may move the job's phase
or state (job.urgency) runs the job's pass at once; one that only moves
counts waits for the batch, so that a burst of pod events costs one pass;
one no pass would see (the echo of the job's own create) runs none. A pass
due while the job's last pass still awaits its own changes would only
wait: an urgent change, or a pass that found the job waiting, is deferred
until the last of those changes shows, and runs then.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from dlk8s.job.objects import Obj, is_terminating
from dlk8s.runtime.childindex import ChildIndex
from dlk8s.runtime.expectations import Expectations, Seen
from dlk8s.runtime.informer import DELETED
from dlk8s.runtime.urgency import Urgency, when


class Due(NamedTuple):
    """The pass a child's event calls for."""

    owner: Obj  # the controlling job's ownerReference (kind, name, uid)
    when: Urgency  # at once, after a short wait, or with the batch


class ChildEvents:
    """The children's watch events, and the jobs whose urgent pass is deferred."""

    def __init__(
        self, children: ChildIndex, expectations: Expectations, listed: threading.Event
    ) -> None:
        self._children = children  # where each event files its child
        self._expectations = expectations  # what each job's last pass still awaits
        self._listed = listed  # set once the first lists are in: until then no pass is due
        self._deferred: set[str] = set()  # jobs (uids) whose urgent pass waits for those
        self._lock = threading.Lock()  # the child informers' threads decide concurrently

    def apply(self, group: str, event: str, obj: Obj) -> Due | None:
        """File one event of a child of `group` (an Observed field); the pass
        it calls for, None if the child is not ours or the caches still fill
        (each job's own event queues it once then)."""
        owner, before = self._children.apply(group, event, obj)
        if owner is None:
            return None
        meta, uid = obj["metadata"], owner["uid"]
        if event != DELETED and is_terminating(obj):
            # A delete shows as the object going away: a pod keeps the
            # tracking finalizer until a pass lets it go (job.reconcile.tracking).
            self._expectations.observe(uid, ("uid", meta.get("uid", "")))
        change = ("uid", meta.get("uid", "")) if event == DELETED else (group, meta["name"])
        seen = self._expectations.observe(uid, change)
        if not self._listed.is_set():
            return None
        after = None if event == DELETED else obj
        urgency = when(
            owner["kind"],
            group,
            before,
            after,
            lambda: self._children.observed(uid).pods,
            own_create=before is None and seen is not Seen.UNAWAITED,
        )
        due = self._when(uid, urgency, seen is Seen.LAST)
        return None if due is Urgency.NONE else Due(owner, due)

    def _when(self, uid: str, urgency: Urgency, awaited_all: bool) -> Urgency:
        """An urgent change of a job that awaits nothing keeps its urgency;
        the last awaited change of a job whose pass was deferred runs it at
        once."""
        with self._lock:
            if urgency in (Urgency.SOON, Urgency.NOW) and self._expectations.wait_left(uid):
                self._deferred.add(uid)
                return Urgency.LATER
            if awaited_all and uid in self._deferred:
                self._deferred.discard(uid)
                return Urgency.NOW
            return urgency

    def hold(self, uid: str) -> float:
        """Seconds the job's pass is to wait for its last pass's changes (0:
        none); a pass that waits runs at once when the last of them shows."""
        with self._lock:
            left = self._expectations.wait_left(uid)
            if left:
                self._deferred.add(uid)
            return left

    def forget(self, uid: str) -> None:
        """The job is gone."""
        with self._lock:
            self._deferred.discard(uid)
