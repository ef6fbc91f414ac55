"""The tracking finalizer (issue 49): every pod is created with it, and a
pod being deleted keeps it until a pass that saw it so has written its
job's status, so that a pod that ends and is deleted while no operator runs
is judged by how it ended when one returns."""

from __future__ import annotations

from typing import Any

from dlk8s.job.actions import Delete, Patch, release_of
from dlk8s.job.vocabulary import TRACKING_FINALIZER

from ..support.endings import failure_rule, rules
from ..support.worlds import PODS, STAMP, World, creates, running_world, started, tfjob

WORKER = "example-job-worker-0"


def deleted(world: World, name: str, **condition: str) -> None:
    """Deleted while no operator ran: only the finalizer keeps it."""
    pod = world.pod(name)
    pod["metadata"]["deletionTimestamp"] = STAMP
    if condition:
        pod["status"].setdefault("conditions", []).append({"status": "True", **condition})


def released(actions: list[Any]) -> list[str]:
    return sorted(a.name for a in actions if isinstance(a, Patch) and a.kind == "Pod")


def test_every_pod_is_created_with_the_finalizer() -> None:
    world = running_world()
    assert all(world.pod(p)["metadata"]["finalizers"] == [TRACKING_FINALIZER] for p in PODS)


def test_a_failure_deleted_while_no_operator_ran_fails_the_job_by_its_rule() -> None:
    world = started(World(tfjob(runPolicy=rules(failure_rule("FailJob", codes=[42])))))
    world.exit(WORKER, 42)
    deleted(world, WORKER)
    result = world.reconcile()
    assert result.status["state"] == "Failed", result.status
    assert result.status["reason"] == "PodFailurePolicy", result.status
    # Only once that status is written does the pod go; with it every pod
    # the failed job keeps, and those it deletes just before.
    assert released(result.actions) == []
    deletes = [a.name for a in result.actions if isinstance(a, Delete) and a.first]
    assert sorted([*released(result.after_status), *deletes]) == sorted(PODS)
    assert WORKER in released(result.after_status)


def test_a_disruption_deleted_while_no_operator_ran_counts_no_restart() -> None:
    world = running_world()
    deleted(world, WORKER, type="DisruptionTarget", reason="EvictionByEvictionAPI")
    result = world.step()
    assert released(result.after_status) == [WORKER]
    world.vanish(WORKER)  # the finalizer off, the pod goes
    result = world.step()
    assert creates(result, "Pod") == [WORKER]
    assert result.status.get("restartCount", 0) == 0, result.status
    [uncounted] = result.status["uncountedRestarts"]
    assert (uncounted["pod"], uncounted["reason"]) == (WORKER, "EvictionByEvictionAPI")


def test_pods_not_being_deleted_keep_it() -> None:
    world = running_world()
    world.exit(WORKER, 1)  # failed, not deleted yet: its restart deletes it
    assert world.reconcile().after_status == []


def test_a_pod_the_pass_deletes_loses_the_finalizer_just_before() -> None:
    """The pass that deletes it has acted on its end (its restart is counted,
    and kept on the replacement's restart-count annotation should the status
    write be lost): its delete does not wait for another pass."""
    world = running_world()
    world.exit(WORKER, 1)
    world.later(60)  # past the wait for its siblings' ends (reconcile.verdicts)
    result = world.reconcile()
    [delete] = [a for a in result.actions if isinstance(a, Delete) and a.name == WORKER]
    assert delete.first is not None
    assert delete.first.patch["metadata"]["finalizers"] is None
    assert delete.first.name == WORKER


def test_a_finished_job_lets_all_its_pods_go_once_its_status_is_written() -> None:
    """Nothing is counted for a job that ended: a pod it keeps (cleanPodPolicy
    None) is not held, and its namespace can go with no operator running."""
    world = started(World(tfjob(runPolicy={"cleanPodPolicy": "None"})))
    for name in PODS:
        world.exit(name, 0)
    result = world.reconcile()
    assert result.status["state"] == "Succeeded", result.status
    assert released(result.actions) == []
    assert released(result.after_status) == sorted(PODS)


def test_the_patch_keeps_other_finalizers_and_guards_on_the_version() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "resourceVersion": "7",
            "finalizers": ["example.com/keep", TRACKING_FINALIZER],
        }
    }
    patch = release_of(pod)
    assert (patch.namespace, patch.name) == ("ns", "p")
    assert patch.patch == {"metadata": {"finalizers": ["example.com/keep"], "resourceVersion": "7"}}
    pod["metadata"]["finalizers"] = [TRACKING_FINALIZER]
    assert release_of(pod).patch["metadata"]["finalizers"] is None
