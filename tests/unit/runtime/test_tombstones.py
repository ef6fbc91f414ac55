"""The ChildIndex's tombstones: the last state of a job's pods deleted lately
(jobmodel.Observed.gone), from the child watches' events, and the pass that
tells a pod evicted between two passes from a lost one."""

from __future__ import annotations

import copy
from typing import Any

from dlk8s.job.reconcile import reconcile
from dlk8s.runtime.childindex import TOMBSTONE_SECONDS, ChildIndex
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED

from ..support.endings import Graveyard
from ..support.worlds import CONFIG, PODS, UID, started, tfjob

WORKER = PODS[1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, uid: str = UID, **status: Any) -> dict[str, Any]:
    meta = {
        "name": name,
        "uid": f"{name}-uid",
        "ownerReferences": [
            {"apiVersion": "dlk8s.io/v1alpha1", "kind": "TFJob", "uid": uid, "controller": True}
        ],
    }
    return {"kind": "Pod", "metadata": meta, "status": status}


DISRUPTED = {"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True"}]}


def test_a_deleted_pod_that_failed_or_was_disrupted_leaves_its_last_state() -> None:
    index = ChildIndex(Clock())
    index.apply("pods", ADDED, pod("a", phase="Running"))
    index.apply("pods", DELETED, pod("a", **DISRUPTED))
    index.apply("pods", DELETED, pod("b", phase="Failed"))
    index.apply("pods", DELETED, pod("c", phase="Running"))  # nothing to tell: no tombstone
    index.apply("services", DELETED, pod("d", phase="Failed"))  # only pods leave them
    observed = index.observed(UID)
    assert observed.pods == []
    assert sorted(p["metadata"]["name"] for p in observed.gone) == ["a", "b"]
    assert index.observed("another-job").gone == []


def test_a_pod_of_that_slot_under_another_name_lifts_the_tombstone() -> None:
    """A replacement named beside a pod stuck terminating (job.reconcile.
    stuck) fills the slot: the last pod gone from it says nothing more."""
    index = ChildIndex(Clock())
    slot = {"dlk8s.io/replica-type": "worker", "dlk8s.io/replica-index": "0"}
    gone = pod("j-worker-0-r1", **DISRUPTED)
    gone["metadata"]["labels"] = slot
    index.apply("pods", DELETED, gone)
    other = pod("j-worker-1", phase="Pending")
    other["metadata"]["labels"] = slot | {"dlk8s.io/replica-index": "1"}
    index.apply("pods", ADDED, other)
    assert [p["metadata"]["name"] for p in index.observed(UID).gone] == ["j-worker-0-r1"]
    again = pod("j-worker-0", phase="Pending")
    again["metadata"]["labels"] = slot
    index.apply("pods", ADDED, again)
    assert index.observed(UID).gone == []


def test_a_pod_of_that_name_again_lifts_the_tombstone() -> None:
    index = ChildIndex(Clock())
    index.apply("pods", DELETED, pod("a", **DISRUPTED))
    index.apply("pods", ADDED, pod("a", phase="Pending"))
    assert index.observed(UID).gone == []
    index.apply("pods", DELETED, pod("b", **DISRUPTED))
    index.apply("pods", MODIFIED, pod("b", phase="Running"))  # a relist shows it again
    assert index.observed(UID).gone == []


def test_tombstones_expire_and_go_with_their_job() -> None:
    clock = Clock()
    index = ChildIndex(clock)
    index.apply("pods", DELETED, pod("old", phase="Failed"))
    clock.now += TOMBSTONE_SECONDS - 1
    index.apply("pods", DELETED, pod("new", phase="Failed"))
    assert len(index.observed(UID).gone) == 2
    clock.now += 2
    assert [p["metadata"]["name"] for p in index.observed(UID).gone] == ["new"]
    index.apply("pods", DELETED, pod("other", uid="job-2", phase="Failed"))  # expires "old"
    assert index._gone[UID].keys() == {"new"}
    index.forget(UID)
    assert index.observed(UID).gone == []
    assert len(index.observed("job-2").gone) == 1


def indexed(world: Graveyard) -> ChildIndex:
    """An index filled from the world's children, as the first lists fill it."""
    index = ChildIndex(Clock())
    groups = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps"}
    for child in world.children.values():
        index.apply(groups[child["kind"]], ADDED, copy.deepcopy(child))
    return index


def test_a_pass_on_the_index_does_not_count_a_pod_evicted_since_the_last() -> None:
    world = started(Graveyard(tfjob()))
    index = indexed(world)
    world.disrupt(WORKER)  # marked DisruptionTarget, then deleted at once
    index.apply("pods", DELETED, world.gone[WORKER])
    result = reconcile(world.job, index.observed(UID), CONFIG, world.now)
    assert result.status.get("restartCount", 0) == 0
    assert result.status["uncountedRestarts"][0]["reason"] == "EvictionByEvictionAPI"
    # An operator started after the eviction lists the pods left: no tombstone.
    restarted = reconcile(world.job, indexed(world).observed(UID), CONFIG, world.now)
    assert restarted.status["restartCount"] == 1
