"""What happened to every pod of the chaos suite: its ``Ledger``, from a
watch of the suite's own, every creation counted by uid; ``duplicates``
and ``overlaps`` count what must not happen to a replica's pods."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from bench.common.operator import (
    ADDED,
    DELETED,
    LABEL_JOB_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    MODIFIED,
    Informer,
    Kube,
    Selectors,
    resource_for,
)


@dataclass
class Life:
    uid: str
    namespace: str
    job: str
    slot: tuple[str, str]  # (replica type, index)
    owner: str  # the controlling job's uid
    phase: str = ""
    deleted: bool = False
    # When the suite's watch first saw it, and saw it deleted: two lives of
    # one slot that overlap are a duplicate even where pods are recreated.
    born: float = field(default_factory=time.monotonic)
    died: float | None = None
    # Its resourceVersion when first seen: its creation's (unless a relist
    # came first), to place it among other objects' changes (chaos_kueue).
    version: int = 0


def owner_uid(meta: dict[str, Any]) -> str:
    """The uid of an object's controlling owner (its job), or ""."""
    return next((r["uid"] for r in meta.get("ownerReferences") or [] if r.get("controller")), "")


class Ledger:
    """Every pod carrying dlk8s.io/job-name, by uid, from a watch of the suite's own."""

    def __init__(self, kube: Kube) -> None:
        self.pods: dict[str, Life] = {}
        self._lock = threading.Lock()
        self._informer = Informer(kube, resource_for("v1", "Pod"), None, Selectors(LABEL_JOB_NAME))
        for kind in (ADDED, MODIFIED):
            self._informer.add_event_handler(kind, self._seen)
        self._informer.add_event_handler(DELETED, self._gone)

    def start(self) -> Ledger:
        self._informer.start()
        self._informer.wait_synced(60)
        return self

    def stop(self) -> None:
        self._informer.stop()

    def _seen(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        slot = (labels.get(LABEL_REPLICA_TYPE, ""), labels.get(LABEL_REPLICA_INDEX, ""))
        job, version = labels.get(LABEL_JOB_NAME, ""), int(meta.get("resourceVersion") or 0)
        with self._lock:
            life = self.pods.setdefault(
                meta["uid"],
                Life(meta["uid"], meta["namespace"], job, slot, owner_uid(meta), version=version),
            )
            life.phase = (pod.get("status") or {}).get("phase", "")

    def _gone(self, pod: dict[str, Any]) -> None:
        with self._lock:
            life = self.pods.get(pod["metadata"].get("uid", ""))
            if life is not None:
                life.deleted, life.died = True, time.monotonic()

    def of(self, namespace: str) -> list[Life]:
        with self._lock:
            return [life for life in self.pods.values() if life.namespace == namespace]


def duplicates(ledger: Ledger, namespace: str) -> int:
    """Creations beyond one per replica slot of a job (no scenario kills pods)."""
    per_slot = Counter((life.owner, life.slot) for life in ledger.of(namespace))
    return sum(n - 1 for n in per_slot.values() if n > 1)


def overlaps(ledger: Ledger, namespace: str, lost_with_node: Collection[str] = ()) -> int:
    """Pods created while another pod of their slot still existed: the
    duplicates of a scenario in which pods are disrupted and recreated.
    `lost_with_node`: the uids of pods on a node that is gone (its kubelet
    dead): still there, but running nowhere, so their replacements overlap
    nothing."""
    lives: dict[tuple[str, tuple[str, str]], list[Life]] = {}
    for life in ledger.of(namespace):
        if life.uid in lost_with_node:
            continue
        lives.setdefault((life.owner, life.slot), []).append(life)
    count = 0
    for group in lives.values():
        group.sort(key=lambda life: life.born)
        pairs = itertools.pairwise(group)
        count += sum(1 for old, new in pairs if old.died is None or new.born < old.died)
    return count
