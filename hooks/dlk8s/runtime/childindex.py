"""The children of each job, as the child watches show them.

A job's pass reads its children from here (job.jobmodel.Observed), not by
filtering the caches of every pod, service, configmap and deployment: the
informers' handlers file each child under the uid of the job that controls
it (its controller ownerReference), so a pass costs the job's children,
not the cluster's.

It also keeps a tombstone of each pod of a job deleted lately whose last
state may still decide something (failurepolicy.worth_remembering: it
failed, or was disrupted), for TOMBSTONE_SECONDS or until a pod of that
name is seen again (Observed.gone): a pod evicted on a node with nothing
to wait for is gone within a second, before its job's next pass, and only
its last state says it was disrupted and not lost. An operator restart
loses them (docs/kinds.md).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any, Final

from dlk8s.job.failurepolicy import worth_remembering
from dlk8s.job.jobmodel import Observed
from dlk8s.job.objects import Obj, replica_key
from dlk8s.job.vocabulary import API_VERSION
from dlk8s.runtime.apiresources import JOB_RESOURCES, OWNED_RESOURCES
from dlk8s.runtime.informer import DELETED

# How long the last state of a deleted pod is kept for its job's passes:
# the next pass comes within seconds; a job waiting out a back-off or its
# expectations is passed again well within this.
TOMBSTONE_SECONDS: Final = 600.0
PODS: Final = "pods"  # the group (Observed's field) whose deletions leave tombstones


class ChildIndex:
    """Children grouped by the uid of the job that controls them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        # Written by the child informers' threads, read by the workers.
        self._lock = threading.Lock()
        # job uid -> group (Observed's field) -> child name -> the child as kept.
        self._by_owner: dict[str, dict[str, dict[str, Obj]]] = defaultdict(
            lambda: {group: {} for group in OWNED_RESOURCES}
        )
        self._clock = clock  # when a tombstone was laid, and when it expires
        # job uid -> pod name -> (when it was deleted, its last state).
        self._gone: dict[str, dict[str, tuple[float, Obj]]] = {}
        # (when, job uid, pod name) in the order laid, to expire them in O(1).
        self._laid: deque[tuple[float, str, str]] = deque()

    def apply(self, group: str, event: str, obj: Obj) -> tuple[Obj | None, Obj | None]:
        """Record one watch event: the controlling job reference if the child
        is one of ours, and the child as it was before (None if new)."""
        owner = controller_ref(obj)
        if owner is None:
            return None, None
        name = obj["metadata"]["name"]
        uid = owner["uid"]
        before = None
        with self._lock:
            if group == PODS:
                self._tombstone(uid, obj, event == DELETED)
            if event != DELETED:
                before = self._by_owner[uid][group].get(name)
                self._by_owner[uid][group][name] = obj
            elif uid in self._by_owner:
                before = self._by_owner[uid][group].pop(name, None)
                if not any(self._by_owner[uid].values()):
                    del self._by_owner[uid]
        return owner, before

    def _tombstone(self, uid: str, pod: Obj, deleted: bool) -> None:
        """Lay the tombstone of a deleted pod (its last state), or lift
        those of its name and of its slot: a pod fills it again (under
        another name, while one stuck terminating holds the slot's: job.
        reconcile.stuck). Expired ones go first."""
        now, name = self._clock(), pod["metadata"]["name"]
        while self._laid and self._laid[0][0] <= now - TOMBSTONE_SECONDS:
            _, owner, grave = self._laid.popleft()
            self._lift(owner, grave, before=now - TOMBSTONE_SECONDS)
        key = replica_key(pod)
        if not deleted and key is not None:
            graves = self._gone.get(uid, {})
            for other in [n for n, (_, last) in graves.items() if replica_key(last) == key]:
                self._lift(uid, other)
        if not deleted or not worth_remembering(pod):
            self._lift(uid, name)
            return
        self._gone.setdefault(uid, {})[name] = (now, pod)
        self._laid.append((now, uid, name))

    def _lift(self, uid: str, name: str, before: float | None = None) -> None:
        graves = self._gone.get(uid)
        if graves is None or name not in graves:
            return
        if before is None or graves[name][0] <= before:  # not one laid again since
            del graves[name]
        if not graves:
            del self._gone[uid]

    def observed(self, uid: str) -> Observed:
        with self._lock:
            groups = self._by_owner.get(uid)
            limit = self._clock() - TOMBSTONE_SECONDS
            gone = [last for when, last in self._gone.get(uid, {}).values() if when > limit]
            found = {group: list(items.values()) for group, items in (groups or {}).items()}
            return Observed(
                pods=found.get("pods", []),
                services=found.get("services", []),
                configmaps=found.get("configmaps", []),
                deployments=found.get("deployments", []),
                gone=gone,
                workloads=found.get("workloads", []),
                networkpolicies=found.get("networkpolicies", []),
            )

    def owners(self) -> list[str]:
        """The uids of the jobs with children here."""
        with self._lock:
            return list(self._by_owner)

    def forget(self, uid: str) -> None:
        """The job is gone: so are its tombstones (its children go by their events)."""
        with self._lock:
            self._gone.pop(uid, None)


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference of the job that controls `obj`, if one of ours does."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("apiVersion") == API_VERSION
            and ref.get("kind") in JOB_RESOURCES
        ):
            return dict(ref)
    return None
