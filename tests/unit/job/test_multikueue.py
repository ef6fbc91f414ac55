"""Jobs across clusters with Kueue's MultiKueue (docs/multicluster.md).

On the manager, a job whose spec.managedBy is kueue.x-k8s.io/multikueue gets
its Workload and nothing else: no pod, no Service, and no status of ours
while Kueue holds quota for it (the worker's copy's status is copied onto
it then). On a worker, MultiKueue's copy of a job runs under the Workload
MultiKueue made there, named by its label: adopted, never made or changed.
A job another controller manages is left alone. The world
(support/queueworld.py) plays the API server; a test plays Kueue and
MultiKueue by editing the Workload and the job's status as they do.
Expected values come from Kueue's MultiKueue adapter as docs/multicluster.md
describes it, written by hand.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from dlk8s.job.actions import Create, DeleteJob, Patch
from dlk8s.job.reconcile.dispatched import FINISHED_WAIT
from dlk8s.job.reconcile.queued import PREBUILT_WAIT

from ..support.queueworld import (
    WORKLOAD,
    QueueWorld,
    queued_tfjob,
    queued_world,
    status_writes,
    workload_creates,
)
from ..support.worlds import STAMP, UID, condition, condition_message, creates, deletes

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
# What MultiKueue copies back from the worker: the worker's run, Running.
WORKERS_STATUS: dict[str, Any] = {
    "runtimeId": "w0rk3",
    "state": "Running",
    "phase": "Running",
    "reason": "Running",
    "startTime": STAMP,
    "conditions": [
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "by worker-cq"},
        {"type": "Running", "status": "True", "reason": "Running", "message": "MASTER-0 is"},
    ],
    "replicaStatuses": [
        {"type": "MASTER", "state": "Running", "replicasStates": {"Running": 1}},
        {"type": "WORKER", "state": "Running", "replicasStates": {"Running": 1}},
        {"type": "PS", "state": "Running", "replicasStates": {"Running": 2}},
    ],
    "runningPods": 4,
}


def dispatched_world() -> QueueWorld:
    """A job on the manager after its first pass: its Workload pending."""
    return queued_world(queued_tfjob(managedBy=MULTIKUEUE))


def checked(world: QueueWorld, state: str = "Pending") -> None:
    """The manager's ClusterQueue has MultiKueue's admission check: Kueue
    lists it in the Workload's status."""
    check = {"name": "multikueue", "state": state, "message": "", "lastTransitionTime": STAMP}
    world.workload()["status"]["admissionChecks"] = [check]


def reserved(world: QueueWorld) -> None:
    """Kueue reserves quota on the manager; its MultiKueue check is pending."""
    world.set_conditions(("QuotaReserved", "True", "QuotaReserved"))
    checked(world)


def admitted(world: QueueWorld) -> None:
    """MultiKueue's check is Ready: the Workload is admitted on the manager."""
    world.admit()
    checked(world, "Ready")


def copied(world: QueueWorld, status: dict[str, Any]) -> None:
    """MultiKueue copies the worker's status onto the manager's job."""
    world.job["status"] = copy.deepcopy(status)


def unavailable(status: dict[str, Any]) -> str:
    """The message of a job that waits with condition Queued False, reason
    QueueUnavailable (which the status must have)."""
    queued = condition(status, "Queued")
    assert queued is not None, status
    assert (queued["status"], queued["reason"]) == ("False", "QueueUnavailable")
    message: str = queued["message"]
    return message


# --- the manager -----------------------------------------------------------------


def test_on_the_manager_the_job_gets_its_workload_and_no_child() -> None:
    world = QueueWorld(queued_tfjob(managedBy=MULTIKUEUE))
    result = world.step()
    [workload] = workload_creates(result)
    assert workload["metadata"]["name"] == WORKLOAD
    assert workload["spec"]["queueName"] == "q"
    [owner] = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TFJob", UID, True)
    assert [a.obj["kind"] for a in result.actions if isinstance(a, Create)] == ["Workload"]
    assert (result.status["state"], result.status["phase"]) == ("Running", "Queued")
    assert condition_message(result.status, "Queued").startswith("Waiting in LocalQueue q")


def test_while_kueue_holds_quota_the_status_is_the_workers_and_nothing_is_written() -> None:
    world = dispatched_world()
    reserved(world)
    copied(world, WORKERS_STATUS)
    result = world.reconcile()
    assert (result.actions, result.status) == ([], WORKERS_STATUS)
    admitted(world)
    result = world.reconcile()
    assert (result.actions, result.status) == ([], WORKERS_STATUS)
    assert creates(result, "Pod") == creates(result, "Service") == []


def test_admitted_without_an_admission_check_nothing_runs_it_and_the_status_says_so() -> None:
    world = dispatched_world()
    world.admit()  # a ClusterQueue without MultiKueue's check
    result = world.step()
    assert creates(result, "Pod") == []
    assert "no MultiKueue admission check" in unavailable(result.status)


def test_a_dispatched_job_evicted_on_the_manager_gives_the_quota_back_and_says_so() -> None:
    world = dispatched_world()
    admitted(world)
    copied(world, WORKERS_STATUS)
    world.set_conditions(("Evicted", "True", "Preempted"))
    result = world.step()
    [released] = status_writes(result)
    quota = next(c for c in released["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert quota["status"] == "False"
    assert (result.status["phase"], result.status["reason"]) == ("Queued", "Evicted")
    evicted = condition(result.status, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "Preempted"
    assert condition_message(result.status, "Running") == "The job waits for Kueue"


def test_a_finished_workload_before_the_final_status_is_left_for_multikueue() -> None:
    world = dispatched_world()
    admitted(world)
    copied(world, WORKERS_STATUS)
    world.set_conditions(("Finished", "True", "Succeeded"))
    result = world.reconcile()
    assert (result.actions, result.status) == ([], WORKERS_STATUS)
    assert result.requeue_after == FINISHED_WAIT


def test_the_copied_end_leaves_the_workload_to_multikueue_and_the_ttl_to_the_manager() -> None:
    world = QueueWorld(
        queued_tfjob(managedBy=MULTIKUEUE, runPolicy={"ttlSecondsAfterFinished": 60})
    )
    world.step()
    world.workload()["status"] = {}
    admitted(world)
    ended = WORKERS_STATUS | {"state": "Succeeded", "phase": "Done", "completionTime": STAMP}
    copied(world, ended)
    result = world.reconcile()
    assert (result.actions, result.status, result.requeue_after) == ([], ended, 60.0)
    world.now += timedelta(seconds=61)
    result = world.reconcile()
    assert [type(a) for a in result.actions if not hasattr(a, "reason")] == [DeleteJob]
    assert result.status == ended


def test_suspending_a_dispatched_job_deletes_its_workload() -> None:
    world = dispatched_world()
    admitted(world)
    copied(world, WORKERS_STATUS)
    world.job["spec"]["runPolicy"] = {"suspend": True}
    result = world.step()
    assert deletes(result) == [WORKLOAD]
    assert (result.status["phase"], result.status["reason"]) == ("Creating", "Suspended")


def test_a_dispatched_job_that_names_no_queue_waits_and_says_why() -> None:
    result = QueueWorld(queued_tfjob(queue=None, managedBy=MULTIKUEUE)).step()
    assert workload_creates(result) == []
    assert "names no LocalQueue" in unavailable(result.status)


def test_a_dispatched_job_with_an_unusable_spec_fails_on_the_manager() -> None:
    job = queued_tfjob(managedBy=MULTIKUEUE)
    job["spec"]["replicaSpecs"][0]["replicas"] = 2  # one MASTER only
    result = QueueWorld(job).step()
    assert workload_creates(result) == []
    assert (result.status["state"], result.status["reason"]) == ("Failed", "InvalidSpec")


def test_a_job_another_controller_manages_is_left_alone() -> None:
    world = QueueWorld(queued_tfjob(managedBy="example.com/other"))
    result = world.reconcile()
    assert (result.actions, result.status, result.requeue_after) == ([], {}, None)


def test_managed_by_the_operator_by_name_is_as_unset() -> None:
    named = QueueWorld(queued_tfjob(managedBy="dlk8s.io/operator")).reconcile()
    unset = QueueWorld(queued_tfjob()).reconcile()
    assert (named.actions, named.status) == (unset.actions, unset.status)


# --- a worker --------------------------------------------------------------------

MULTIKUEUES = "tfjob-example-job-m4n4g"  # the manager's Workload's name


def workers_copy() -> dict[str, Any]:
    """MultiKueue's copy of the manager's job: no managedBy, labelled."""
    job = queued_tfjob()
    job["metadata"]["labels"] |= {
        PREBUILT_LABEL: MULTIKUEUES,
        "kueue.x-k8s.io/multikueue-origin": "multikueue",
    }
    return job


def prebuilt(world: QueueWorld, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Workload MultiKueue makes on the worker: the manager's, cloned
    (a Workload the world makes for the same spec, renamed, no owner)."""
    maker = QueueWorld(queued_tfjob())
    [made] = workload_creates(maker.reconcile())
    made["metadata"] |= {"name": MULTIKUEUES, "ownerReferences": owners or []}
    made["metadata"]["resourceVersion"] = "42"
    made["status"] = {}
    world.children[("Workload", MULTIKUEUES)] = made
    return made


def test_a_workers_copy_waits_for_multikueues_workload_and_makes_none() -> None:
    result = QueueWorld(workers_copy()).step()
    assert workload_creates(result) == []
    assert creates(result, "Pod") == []
    assert result.requeue_after == PREBUILT_WAIT
    assert MULTIKUEUES in condition_message(result.status, "Queued")


def test_a_workers_copy_adopts_its_workload_then_runs_when_admitted() -> None:
    world = QueueWorld(workers_copy())
    prebuilt(world)
    result = world.step()
    [adopt] = [a for a in result.actions if isinstance(a, Patch)]
    assert (adopt.kind, adopt.name) == ("Workload", MULTIKUEUES)
    [owner] = adopt.patch["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TFJob",
        "example-job",
        UID,
        True,
    )
    assert adopt.patch["metadata"]["resourceVersion"] == "42"
    assert workload_creates(result) == []
    assert creates(result, "Pod") == []
    assert [a for a in world.step().actions if isinstance(a, Patch)] == []  # adopted once
    world.admit()
    assert sorted(creates(world.step(), "Pod")) == sorted(
        ["example-job-master-0", "example-job-worker-0", "example-job-ps-0", "example-job-ps-1"]
    )


def test_a_workers_copy_never_changes_a_workload_made_for_another_spec() -> None:
    world = QueueWorld(workers_copy())
    prebuilt(world)
    world.job["spec"]["replicaSpecs"][1]["replicas"] = 3
    result = world.step()
    assert [a.patch for a in result.actions if isinstance(a, Patch) and "spec" in a.patch] == []
    assert deletes(result) == []
    assert "another spec" in unavailable(result.status)


def test_a_workers_copy_leaves_a_workload_another_object_controls() -> None:
    world = QueueWorld(workers_copy())
    other = {"apiVersion": "dlk8s.io/v1alpha1", "kind": "TFJob", "name": "other"}
    prebuilt(world, [other | {"uid": "u-other", "controller": True}])
    result = world.step()
    assert [a for a in result.actions if isinstance(a, Patch | Create)] == []
    assert "TFJob other controls it" in unavailable(result.status)


def test_a_workers_copy_that_ends_finishes_multikueues_workload() -> None:
    world = QueueWorld(workers_copy())
    prebuilt(world)
    world.step()
    world.admit()
    world.step()
    world.run()
    world.step()
    world.exit("example-job-master-0", 0)
    result = world.step()
    assert result.status["state"] == "Succeeded"
    [finish] = status_writes(result)
    assert finish["metadata"]["name"] == MULTIKUEUES
    finished = [c for c in finish["status"]["conditions"] if c["type"] == "Finished"]
    assert [c["status"] for c in finished] == ["True"]
