"""Pods stuck terminating on a node that no longer answers (issue 49).

A pod still there STUCK_AFTER seconds past its deletion deadline when the
taint manager deleted it (its node found lost), STUCK_ANY_AFTER otherwise,
is taken out of its slot (its index label removed, so its Service no
longer selects it), and the next pass creates its replacement beside it, under the next
free name, with the slot's name as its hostname. Whether its going counts a
restart is decided as for any pod that goes.
"""

from __future__ import annotations

import pytest

from dlk8s.job.actions import Event, Patch
from dlk8s.job.childnames import free_pod_name
from dlk8s.job.reconcile.stuck import STUCK_AFTER, STUCK_ANY_AFTER
from dlk8s.job.vocabulary import LABEL_REPLICA_INDEX, Reason

from ..support.worlds import World, creates, deletes, running_world

STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
WORKER = "example-job-worker-0"
REPLACEMENT = "example-job-worker-0-r1"


def deleted_on_a_lost_node(world: World, name: str, disrupted: bool = True) -> None:
    """Deleted with a grace period that ends now (its deletionTimestamp), on
    a node whose kubelet never confirms: the taint manager's eviction (a
    DisruptionTarget) or, `disrupted` False, a person's delete."""
    pod = world.pod(name)
    pod["metadata"]["deletionTimestamp"] = world.now.strftime(STAMP_FORMAT)
    pod["spec"] = {"nodeName": "node-7"}
    if disrupted:
        target = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
        }
        pod["status"]["conditions"] = [target]


def patches(actions: list[object]) -> list[Patch]:
    return [a for a in actions if isinstance(a, Patch) and a.kind == "Pod"]


def stuck(world: World, seconds: float = STUCK_AFTER) -> list[object]:
    """The pass once the pod is stuck: what it did."""
    world.later(seconds)
    return list(world.step().actions)


def replaced_beside() -> World:
    """A running job whose WORKER got stuck on a lost node and was replaced
    beside it; the replacement runs, the stuck pod is still there."""
    world = running_world()
    deleted_on_a_lost_node(world, WORKER)
    stuck(world)
    world.step()
    world.run(REPLACEMENT)
    world.settle()
    return world


def test_a_terminating_pod_is_waited_for_until_its_deadline_is_well_past() -> None:
    world = running_world()
    deleted_on_a_lost_node(world, WORKER)
    result = world.step()
    assert creates(result, "Pod") == []
    assert not patches(list(result.actions))
    assert result.requeue_after == pytest.approx(STUCK_AFTER)
    world.later(STUCK_AFTER - 1)
    result = world.step()
    assert not patches(list(result.actions))
    assert result.requeue_after == pytest.approx(1)


def test_a_stuck_pod_leaves_its_slot_and_its_service_and_is_replaced_beside_it() -> None:
    world = running_world()
    deleted_on_a_lost_node(world, WORKER)
    world.step()
    actions = stuck(world)
    [patch] = patches(actions)
    assert patch.name == WORKER
    uid = world.pod(WORKER)["metadata"]["uid"]
    assert patch.patch == {"metadata": {"uid": uid, "labels": {LABEL_REPLICA_INDEX: None}}}
    [said] = [a.message for a in actions if isinstance(a, Event) and a.reason == Reason.POD_STUCK]
    assert said.startswith(f"WORKER 0: pod {WORKER} on node node-7 is still terminating 30 s")
    assert LABEL_REPLICA_INDEX not in world.pod(WORKER)["metadata"]["labels"]
    result = world.step()
    assert creates(result, "Pod") == [REPLACEMENT]
    assert deletes(result) == []  # the stuck pod is left to its node
    new = world.pod(REPLACEMENT)
    assert new["spec"]["hostname"] == WORKER
    assert new["metadata"]["labels"][LABEL_REPLICA_INDEX] == "0"
    # The slot's Service stays, and selects the replacement, not the stuck pod.
    selector = world.children[("Service", WORKER)]["spec"]["selector"]
    assert selector.items() <= new["metadata"]["labels"].items()
    assert not selector.items() <= world.pod(WORKER)["metadata"]["labels"].items()
    world.run(REPLACEMENT)
    world.settle()
    status = world.job["status"]
    assert status["phase"] == "Running", status
    assert status["restartCount"] == 0, status
    [uncounted] = status["uncountedRestarts"]
    assert (uncounted["pod"], uncounted["reason"]) == (WORKER, "DeletionByTaintManager")


def test_the_stuck_pod_going_at_last_changes_nothing() -> None:
    world = replaced_beside()
    before = world.job["status"]
    world.vanish(WORKER)  # its node came back, or pod GC removed it
    result = world.step()
    assert result.actions == []
    assert result.status == before


def test_a_pod_deleted_by_hand_on_a_lost_node_counts_a_restart() -> None:
    world = running_world()
    deleted_on_a_lost_node(world, WORKER, disrupted=False)
    assert creates(world.step(), "Pod") == []  # a slow kubelet, for all the operator knows
    stuck(world, STUCK_ANY_AFTER)
    result = world.step()
    assert creates(result, "Pod") == [REPLACEMENT]
    assert result.status["restartCount"] == 1


def test_the_next_pod_of_the_slot_takes_the_slot_s_name_again_once_it_is_free() -> None:
    world = replaced_beside()
    world.vanish(WORKER)
    world.exit(REPLACEMENT, 1)
    world.later(60)  # past the restart's back-off
    world.step()
    assert REPLACEMENT not in world.pods()
    assert creates(world.step(), "Pod") == [WORKER]


def test_a_pod_still_within_its_grace_that_holds_a_slot_s_name_is_waited_for() -> None:
    """A pod of the slot's name that no longer fills it (its labels were
    changed) goes first; only once it is stuck is the name passed over."""
    world = running_world()
    world.pod(WORKER)["metadata"]["labels"][LABEL_REPLICA_INDEX] = "9"
    deleted_on_a_lost_node(world, WORKER)
    result = world.step()
    assert creates(result, "Pod") == []
    assert result.requeue_after == pytest.approx(STUCK_AFTER)
    world.later(STUCK_AFTER)
    assert creates(world.step(), "Pod") == [REPLACEMENT]


def test_free_names_are_the_slot_s_then_numbered_in_order() -> None:
    assert free_pod_name("j", "WORKER", 0, set()) == "j-worker-0"
    assert free_pod_name("j", "WORKER", 0, {"j-worker-0"}) == "j-worker-0-r1"
    assert free_pod_name("j", "WORKER", 0, {"j-worker-0", "j-worker-0-r1"}) == "j-worker-0-r2"
    long = "a" * 60
    name = free_pod_name(long, "WORKER", 3, {free_pod_name(long, "WORKER", 3, set())})
    assert len(name) <= 63, name
    assert name.endswith("-worker-3-r1"), name


def test_the_replacement_keeps_a_hostname_its_template_gives() -> None:
    world = running_world()
    [worker] = [s for s in world.job["spec"]["replicaSpecs"] if s["tfReplicaType"] == "WORKER"]
    worker["template"]["spec"]["hostname"] = "mine"
    deleted_on_a_lost_node(world, WORKER)
    stuck(world)
    world.step()
    assert world.pod(REPLACEMENT)["spec"]["hostname"] == "mine"


def test_headless_service_is_unchanged_by_a_replacement() -> None:
    """The Service is the slot's, named and selecting by the slot, whatever
    its pod is called: nothing about it is recreated."""
    world = running_world()
    service = dict(world.children[("Service", WORKER)])
    deleted_on_a_lost_node(world, WORKER)
    stuck(world)
    world.step()
    assert world.children[("Service", WORKER)] == service


def test_the_cleanup_of_a_finished_job_does_not_wait_for_a_stuck_pod() -> None:
    world = replaced_beside()
    world.exit(REPLACEMENT, 0)
    world.exit("example-job-master-0", 0)
    world.settle()
    world.past_cleanup_grace()
    world.settle()
    status = world.job["status"]
    assert (status["state"], status["phase"]) == ("Succeeded", "Done"), status
    assert WORKER in world.pods()  # still there: only its node ends it


def test_the_cleanup_waits_for_a_terminating_pod_until_it_is_stuck() -> None:
    world = running_world(runPolicy={"cleanPodPolicy": "All"})
    world.exit("example-job-master-0", 0)
    world.past_cleanup_grace()
    for _ in range(3):  # the verdict, then the cleanup: no pod confirmed yet
        world.step(graceful=True)
    assert world.pods()
    for kind, name in [k for k in world.children if k[0] != "Pod"]:
        del world.children[(kind, name)]  # only pods wait for a kubelet
    for name in world.pods():
        world.pod(name)["metadata"]["deletionTimestamp"] = world.now.strftime(STAMP_FORMAT)
    result = world.step()
    assert result.status["phase"] == "CleanUp"
    assert result.requeue_after == pytest.approx(STUCK_ANY_AFTER)
    world.later(STUCK_ANY_AFTER)
    assert world.step().status["phase"] == "Done"


def test_a_pod_that_ended_and_waits_only_for_our_finalizer_is_not_stuck() -> None:
    """Its kubelet answered: the pass that lets it go is due, not a replacement beside it."""
    world = running_world()
    world.exit(WORKER, 137)
    deleted_on_a_lost_node(world, WORKER, disrupted=False)
    world.later(STUCK_AFTER * 2)
    result = world.step()
    assert not patches([a for a in result.actions if isinstance(a, Patch)])
    assert creates(result, "Pod") == []
    assert [a.name for a in result.after_status] == [WORKER]  # the finalizer off


def test_a_pod_that_ended_but_is_held_by_another_finalizer_is_passed_over() -> None:
    world = running_world()
    world.exit(WORKER, 137)
    deleted_on_a_lost_node(world, WORKER, disrupted=False)
    world.pod(WORKER)["metadata"]["finalizers"] = ["example.com/backup"]
    actions = stuck(world, STUCK_ANY_AFTER)
    [said] = [a.message for a in actions if isinstance(a, Event) and a.reason == Reason.POD_STUCK]
    assert "has ended but is held by example.com/backup" in said


def test_an_eviction_on_a_node_not_found_lost_waits_the_long_wait() -> None:
    """A drain's eviction says nothing of the node: its kubelet may only be slow."""
    world = running_world()
    deleted_on_a_lost_node(world, WORKER, disrupted=False)
    world.pod(WORKER)["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    ]
    result = world.step()
    assert result.requeue_after == pytest.approx(STUCK_ANY_AFTER)
    world.later(STUCK_AFTER * 2)
    assert not patches(list(world.step().actions))
    world.later(STUCK_ANY_AFTER)
    assert [p.name for p in patches(list(world.step().actions))] == [WORKER]
