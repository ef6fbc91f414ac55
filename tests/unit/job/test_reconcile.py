"""The reconcile engine on a TFJob, against a small in-memory world.

The world (tests/unit/support/worlds.py) plays the I/O side. Expected values are
written by hand from the semantics, never copied from an output.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta

import pytest

from dlk8s.job import childnames
from dlk8s.job.actions import Create, Delete, DeleteJob, Event, Patch
from dlk8s.job.config import parse_config
from dlk8s.job.reconcile import reconcile
from dlk8s.job.reconcile.finished import CLEANUP_GRACE_SECONDS
from dlk8s.runtime.childindex import ChildIndex
from dlk8s.runtime.informer import ADDED

from ..support.worlds import (
    CONFIG,
    CONFIGMAP,
    NOW,
    PODS,
    STAMP,
    UID,
    World,
    condition,
    creates,
    deletes,
    events,
    running_world,
    started,
    tfjob,
)

# --- creation and phases -------------------------------------------------------


def test_first_pass_creates_every_pod_and_the_grpc_configmap() -> None:
    result = World(tfjob()).reconcile()
    assert creates(result, "Pod") == sorted(PODS)
    # A replica's Service waits for its pod's address (the next test).
    assert creates(result, "Service") == []
    assert creates(result, "ConfigMap") == [CONFIGMAP]
    assert deletes(result) == []
    # One event per create.
    assert events(result).count(("Normal", "SuccessfulCreate")) == 5
    assert result.status == {
        "runtimeId": childnames.runtime_id(UID),
        "restartCount": 0,
        "observedGeneration": 1,
        "startTime": STAMP,
        "state": "Running",
        "phase": "Creating",
        "reason": "Creating",
        # Said by the pass that creates them: its status is written only if
        # every create succeeds (the controller's tests).
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "PodsCreated",
                "message": "All 4 pods of the job have been created",
                "lastTransitionTime": STAMP,
                "lastUpdateTime": STAMP,
            }
        ],
        "replicaStatuses": [
            # Counted as soon as they are created: see the restart counting tests.
            {"replicaType": "MASTER", "state": "Unknown", "replicasStates": {"Pending": 1}},
            {"replicaType": "WORKER", "state": "Unknown", "replicasStates": {"Pending": 1}},
            {"replicaType": "PS", "state": "Unknown", "replicasStates": {"Pending": 2}},
        ],
        # summed over the roles for the printer columns
        "pendingPods": 4,
        "runningPods": 0,
        "succeededPods": 0,
        "failedPods": 0,
    }


def test_a_replicas_service_comes_once_its_pod_has_an_address() -> None:
    world = World(tfjob())
    world.step()
    master, worker, ps0, ps1 = PODS
    world.pod(master)["status"] = {"phase": "Pending", "podIP": "10.1.0.7"}
    world.run(ps0)
    world.run(ps1)
    world.pod(ps1)["metadata"]["deletionTimestamp"] = STAMP  # going: it gets none
    result = world.step()
    assert creates(result, "Service") == [master, ps0]
    assert creates(result, "Pod") == []
    assert events(result).count(("Normal", "SuccessfulCreate")) == 2
    world.run(worker)
    assert creates(world.step(), "Service") == [worker]
    assert creates(world.step(), "Service") == []


def test_every_child_is_owned_by_the_job_and_labelled() -> None:
    result = World(tfjob()).reconcile()
    for action in result.actions:
        if not isinstance(action, Create):
            continue
        meta = action.obj["metadata"]
        assert meta["namespace"] == "ns"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "dlk8s.io/v1alpha1",
                "kind": "TFJob",
                "name": "example-job",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"]["dlk8s.io/job-name"] == "example-job"
        assert meta["labels"]["dlk8s.io/job-kind"] == "tfjob"
        assert meta["labels"]["dlk8s.io/runtime-id"] == childnames.runtime_id(UID)
        assert {"dlk8s.io/replica-type", "dlk8s.io/replica-index"} <= set(meta["labels"])


def test_created_when_all_pods_exist_then_running_when_the_master_runs() -> None:
    world = World(tfjob())
    world.step()
    status = world.step().status  # all four pods now exist, Pending
    assert status["phase"] == "Creating"
    created = condition(status, "Created")
    assert created is not None
    assert created["status"] == "True"
    assert created["lastTransitionTime"] == STAMP
    assert status["replicaStatuses"][2] == {
        "replicaType": "PS",
        "state": "Unknown",
        "replicasStates": {"Pending": 2},
    }

    world.run("example-job-master-0")  # the others still Pending
    world.later(5)
    status = world.step().status
    assert (status["phase"], status["reason"], status["state"]) == ("Running", "Running", "Running")
    running = condition(status, "Running")
    assert running is not None
    assert running["status"] == "True"
    assert running["lastTransitionTime"] == "2026-03-01T12:00:05Z"
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running"]
    # Created did not move: nothing about it changed.
    assert condition(status, "Created")["lastTransitionTime"] == STAMP  # type: ignore[index]


def test_a_settled_job_needs_no_action_and_no_status_write() -> None:
    world = running_world()
    for _ in range(2):
        world.later(30)
        result = world.reconcile()
        assert result.actions == []
        assert result.status == world.job["status"]
        assert result.requeue_after is None


def test_runtime_id_survives_an_operator_restart() -> None:
    first = World(tfjob()).reconcile().status["runtimeId"]
    again = World(tfjob()).reconcile().status["runtimeId"]
    other = tfjob()
    other["metadata"]["uid"] = "another-uid"
    assert first == again != World(other).reconcile().status["runtimeId"]


# --- the MASTER decides ------------------------------------------------------


def test_master_exit_0_succeeds_and_cleanup_stops_what_still_runs() -> None:
    world = running_world()
    world.exit("example-job-master-0", 0)
    result = world.step()
    status = result.status
    assert (status["state"], status["phase"], status["reason"]) == (
        "Succeeded",
        "CleanUp",
        "Succeeded",
    )
    assert status["completionTime"] == STAMP
    assert ("Normal", "Succeeded") in events(result)
    succeeded = condition(status, "Succeeded")
    assert succeeded is not None
    assert succeeded["status"] == "True"
    assert condition(status, "Running")["status"] == "False"  # type: ignore[index]
    # The pods that still run get the grace to end by themselves first.
    assert deletes(result) == []
    assert result.requeue_after == pytest.approx(CLEANUP_GRACE_SECONDS)
    world.later(CLEANUP_GRACE_SECONDS - 1)
    assert world.step().requeue_after == pytest.approx(1)
    world.later(1)
    result = world.step()
    assert result.status["phase"] == "CleanUp"
    # cleanPodPolicy Running: the finished master stays, the rest goes, with
    # every replica's Service; the gRPC ConfigMap is left to the GC.
    assert deletes(result, "Pod") == [
        "example-job-ps-0",
        "example-job-ps-1",
        "example-job-worker-0",
    ]
    assert deletes(result, "Service") == sorted(PODS)
    assert deletes(result, "ConfigMap") == []
    assert events(result) == [("Normal", "SuccessfulDelete")] * 7

    status = world.step().status
    assert (status["state"], status["phase"]) == ("Succeeded", "Done")
    assert world.pods() == ["example-job-master-0"]
    assert status["replicaStatuses"][0] == {
        "replicaType": "MASTER",
        "state": "Succeeded",
        "replicasStates": {"Succeeded": 1},
    }
    assert world.reconcile().actions == []


@pytest.mark.parametrize("policy", ["None", "Running"])
def test_pods_removed_after_the_cleanup_leave_the_final_status_alone(policy: str) -> None:
    # kube-controller-manager's pod GC deletes terminated pods past its
    # threshold: a month of finished jobs must not get a status write each.
    world = running_world(runPolicy={"cleanPodPolicy": policy})
    for name in world.pods():
        world.exit(name, 0)
    world.settle()
    final = world.job["status"]
    assert (final["phase"], final["succeededPods"]) == ("Done", len(PODS))
    for name in world.pods():
        world.vanish(name)
    world.later(3600)
    result = world.reconcile()
    assert (result.actions, result.status) == ([], final)


def test_pods_that_end_after_a_done_job_s_verdict_are_still_counted() -> None:
    # cleanPodPolicy None: Done once the MASTER has succeeded, while the
    # others still run; the counts follow them until they have all ended.
    world = running_world(runPolicy={"cleanPodPolicy": "None"})
    world.exit("example-job-master-0", 0)
    status = world.step().status
    assert (status["phase"], status["runningPods"], status["succeededPods"]) == ("Done", 3, 1)
    for name in world.pods():
        world.exit(name, 0)
    status = world.step().status
    assert (status["runningPods"], status["succeededPods"]) == (0, len(PODS))
    world.vanish("example-job-master-0")
    assert world.reconcile().status == status


def test_pods_that_end_during_the_cleanup_are_still_counted() -> None:
    world = running_world()
    world.exit("example-job-master-0", 0)
    world.step()
    assert world.job["status"]["phase"] == "CleanUp"
    world.exit("example-job-worker-0", 0)
    status = world.step().status
    assert (status["phase"], status["succeededPods"], status["runningPods"]) == ("CleanUp", 2, 2)


@pytest.mark.parametrize("code", [0, 1])
def test_cleanup_keeps_an_ended_master_whose_phase_still_says_running(code: int) -> None:
    # The kubelet (1.27+) reports the container terminated a moment before
    # the phase; deleting the pod then lost the master's log after Done.
    world = running_world()
    world.exit("example-job-master-0", code, phase="Running")
    result = world.step()
    assert result.status["state"] == ("Succeeded" if code == 0 else "Failed")
    deleted = deletes(result, "Pod")
    world.past_cleanup_grace()
    deleted += deletes(world.step(), "Pod")
    assert "example-job-master-0" not in deleted
    assert len(deleted) == 3


def test_a_worker_that_ends_within_the_grace_is_kept_for_its_log() -> None:
    # MXNet's and Caffe2's replicas end with the deciding pod, but the
    # kubelet reports each end a moment later: deleting them at the verdict
    # lost their logs.
    world = running_world()
    world.exit("example-job-master-0", 0)
    assert deletes(world.step()) == []
    world.later(2)
    world.exit("example-job-worker-0", 0, phase="Running")
    assert deletes(world.step()) == []
    world.later(CLEANUP_GRACE_SECONDS - 2)
    result = world.step()
    assert deletes(result, "Pod") == ["example-job-ps-0", "example-job-ps-1"]
    world.settle()
    assert world.job["status"]["phase"] == "Done"
    assert world.pods() == ["example-job-master-0", "example-job-worker-0"]


def test_without_a_running_pod_there_is_no_grace_to_wait() -> None:
    job = tfjob()
    job["spec"]["replicaSpecs"] = job["spec"]["replicaSpecs"][:1]  # a lone MASTER
    world = started(World(job))
    world.exit("example-job-master-0", 0)
    result = world.step()
    assert result.status["state"] == "Succeeded"
    assert (deletes(result, "Pod"), deletes(result, "Service")) == ([], ["example-job-master-0"])
    assert result.requeue_after is None
    world.settle()
    assert world.job["status"]["phase"] == "Done"


def test_a_failed_job_stops_what_still_runs_at_once() -> None:
    # Its peers would wait for the failed pod forever: no grace.
    world = running_world()
    world.exit("example-job-master-0", 1)
    result = world.step()
    assert result.status["state"] == "Failed"
    assert len(deletes(result, "Pod")) == 3
    assert result.requeue_after is None


def test_cleanup_stops_a_pod_whose_sidecar_still_runs() -> None:
    world = running_world()
    world.exit("example-job-master-0", 0, beside="redis")
    world.step()
    world.past_cleanup_grace()
    assert "example-job-master-0" in deletes(world.step(), "Pod")


def test_cleanup_waits_for_terminating_pods_without_deleting_them_again() -> None:
    world = running_world()
    world.exit("example-job-master-0", 0)
    world.step()
    world.past_cleanup_grace()
    assert len(deletes(world.step(graceful=True), "Pod")) == 3
    result = world.step()
    assert deletes(result) == []
    assert result.status["phase"] == "CleanUp"
    for name in ("example-job-worker-0", "example-job-ps-0", "example-job-ps-1"):
        world.vanish(name)
    for name in PODS:  # the replicas' Services went the same way
        del world.children[("Service", name)]
    assert world.step().status["phase"] == "Done"


@pytest.mark.parametrize("code", [1, 2, 127])
def test_master_exit_1_to_127_fails_the_job_for_good(code: int) -> None:
    world = running_world()
    world.exit("example-job-master-0", code)
    result = world.step()
    assert (result.status["state"], result.status["reason"]) == ("Failed", "ReplicaFailed")
    assert result.status["phase"] == "CleanUp"
    assert f"exited with code {code}" in condition(result.status, "Failed")["message"]  # type: ignore[index]
    assert "example-job-master-0" not in deletes(result, "Pod")
    assert ("Warning", "ReplicaFailed") in events(result)
    assert world.step().status["phase"] == "Failed"


@pytest.mark.parametrize("code", [128, 137, 255])
def test_master_exit_128_to_255_restarts_it_after_a_back_off(code: int) -> None:
    world = running_world()
    world.exit("example-job-master-0", code)

    result = world.step()  # the first back-off is 10 seconds
    assert deletes(result) == []
    assert creates(result, "Pod") == []
    assert result.requeue_after == pytest.approx(10)
    assert result.status["state"] == "Running"
    assert (result.status["phase"], result.status["reason"]) == ("Creating", "Restarting")
    assert condition(result.status, "Restarting")["status"] == "True"  # type: ignore[index]
    assert result.status["restartCount"] == 0

    world.later(10)
    old_uid = world.pod("example-job-master-0")["metadata"]["uid"]
    result = world.step()
    [delete] = [a for a in result.actions if isinstance(a, Delete)]
    assert (delete.kind, delete.name, delete.uid) == ("Pod", "example-job-master-0", old_uid)
    assert ("Warning", "Restarting") in events(result)
    assert creates(result, "Pod") == []  # never two pods of one name

    result = world.step()  # the deletion is observed: recreate, and count it
    assert creates(result, "Pod") == ["example-job-master-0"]
    assert result.status["restartCount"] == 1
    assert (
        world.pod("example-job-master-0")["metadata"]["annotations"]["dlk8s.io/restart-count"]
        == "1"
    )

    world.run()
    status = world.step().status
    assert (status["phase"], status["restartCount"]) == ("Running", 1)
    restarting = condition(status, "Restarting")
    assert restarting is not None
    assert (restarting["status"], restarting["reason"]) == (
        "False",
        "Recovered",
    )
    world.settle()
    assert world.job["status"]["restartCount"] == 1


def test_an_evicted_master_without_exit_code_is_retried_at_once() -> None:
    world = running_world()
    world.pod("example-job-master-0")["status"] = {"phase": "Failed", "reason": "Evicted"}
    result = world.step()
    assert deletes(result, "Pod") == ["example-job-master-0"]
    assert result.status["state"] == "Running"
    assert creates(world.step(), "Pod") == ["example-job-master-0"]


def test_back_off_doubles_with_each_restart() -> None:
    world = running_world()
    world.job["status"]["restartCount"] = 3
    world.exit("example-job-worker-0", 137)
    assert world.step().requeue_after == pytest.approx(80)


def test_master_container_decides_even_while_a_sidecar_runs() -> None:
    world = running_world()
    world.exit("example-job-master-0", 0, beside="sidecar")
    assert world.step().status["state"] == "Succeeded"
    world.past_cleanup_grace()
    assert "example-job-master-0" in deletes(world.step(), "Pod")  # still running: stopped


# --- other replicas ------------------------------------------------------------


@pytest.mark.parametrize("code", [1, 137])
def test_a_failed_worker_is_recreated_whatever_its_exit_code(code: int) -> None:
    world = running_world()
    world.exit("example-job-worker-0", code, at=NOW - timedelta(minutes=1))
    result = world.step()
    assert deletes(result, "Pod") == ["example-job-worker-0"]
    assert result.status["state"] == "Running"
    result = world.step()
    assert creates(result, "Pod") == ["example-job-worker-0"]
    assert result.status["restartCount"] == 1


def test_a_failed_pod_being_deleted_is_not_deleted_twice() -> None:
    world = running_world()
    world.exit("example-job-worker-0", 137, at=NOW - timedelta(minutes=1))
    assert deletes(world.step(graceful=True), "Pod") == ["example-job-worker-0"]
    result = world.step()
    assert deletes(result) == []
    assert creates(result, "Pod") == []
    assert result.status["restartCount"] == 0
    world.vanish("example-job-worker-0")
    result = world.step()
    assert creates(result, "Pod") == ["example-job-worker-0"]
    assert result.status["restartCount"] == 1


def test_a_succeeded_worker_is_left_alone() -> None:
    world = running_world()
    world.exit("example-job-worker-0", 0)
    result = world.step()
    assert result.actions == []
    assert result.status["phase"] == "Running"
    assert result.status["replicaStatuses"][1] == {
        "replicaType": "WORKER",
        "state": "Succeeded",
        "replicasStates": {"Succeeded": 1},
    }


def test_a_vanished_pod_is_recreated_and_counted() -> None:
    world = running_world()
    world.vanish("example-job-ps-1")
    result = world.step()
    assert creates(result, "Pod") == ["example-job-ps-1"]
    assert result.status["restartCount"] == 1
    assert ("Warning", "Recreating") in events(result)
    assert condition(result.status, "Restarting")["status"] == "True"  # type: ignore[index]
    world.settle()
    assert world.job["status"]["restartCount"] == 1


def test_restart_policy_never_makes_a_worker_failure_final() -> None:
    job = tfjob()
    job["spec"]["replicaSpecs"][1]["restartPolicy"] = "Never"
    world = started(World(job))
    world.exit("example-job-worker-0", 137)
    status = world.step().status
    assert (status["state"], status["reason"]) == ("Failed", "ReplicaFailed")


def test_a_pod_being_deleted_is_neither_deleted_again_nor_replaced_yet() -> None:
    world = running_world()
    world.pod("example-job-worker-0")["metadata"]["deletionTimestamp"] = STAMP
    result = world.step()
    assert deletes(result) == []
    assert creates(result, "Pod") == []
    assert result.status["phase"] == "Creating"
    world.vanish("example-job-worker-0")
    assert creates(world.step(), "Pod") == ["example-job-worker-0"]


# --- restart counting --------------------------------------------------------


def test_a_repeated_pass_does_not_count_a_restart_twice() -> None:
    world = running_world()
    world.vanish("example-job-worker-0")
    first = world.step()
    assert first.status["restartCount"] == 1
    # The same pass again once the cache shows the new pod. (A pass on a cache
    # that does not show it yet is what the controller's expectations hold
    # back: see test_expectations. A lost status write: the next test.)
    again = world.reconcile()
    assert again.status["restartCount"] == 1
    assert creates(again, "Pod") == []


def test_a_pod_lost_while_its_peer_is_replaced_is_still_counted() -> None:
    """One worker failed and the other deleted, both seen by one pass: the
    replacement created by that pass must not stand in for the failed one
    when the next pass sees it gone."""
    job = tfjob()
    job["spec"]["replicaSpecs"][1]["replicas"] = 2
    world = started(World(job))
    world.exit("example-job-worker-0", 1, at=NOW - timedelta(minutes=1))
    world.vanish("example-job-worker-1")
    first = world.step()
    assert (deletes(first), creates(first, "Pod")) == (
        ["example-job-worker-0"],
        ["example-job-worker-1"],
    )
    assert first.status["restartCount"] == 1
    second = world.step()
    assert creates(second, "Pod") == ["example-job-worker-0"]
    assert second.status["restartCount"] == 2
    world.run()
    world.settle()
    assert world.job["status"]["restartCount"] == 2


def test_a_lost_status_write_is_recovered_from_the_new_pod() -> None:
    world = running_world()
    before = copy.deepcopy(world.job["status"])
    world.vanish("example-job-worker-0")
    world.apply(world.reconcile())  # recreated, restartCount 1 written ...
    world.job["status"] = before  # ... but say that write was lost
    assert world.reconcile().status["restartCount"] == 1


def test_the_backoff_limit_fails_the_job_instead_of_restarting() -> None:
    world = running_world(runPolicy={"backoffLimit": 1})
    world.vanish("example-job-worker-0")
    assert world.step().status["restartCount"] == 1
    world.settle()
    world.run()
    world.settle()
    world.vanish("example-job-worker-0")
    result = world.step()
    assert creates(result, "Pod") == []
    assert (result.status["state"], result.status["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert result.status["restartCount"] == 1


def test_backoff_limit_0_fails_on_the_first_retryable_exit() -> None:
    world = running_world(runPolicy={"backoffLimit": 0})
    world.exit("example-job-master-0", 137)
    result = world.step()
    assert (result.status["state"], result.status["reason"]) == ("Failed", "BackoffLimitExceeded")
    # The message names the pod that would have been recreated, then the limit.
    assert condition(result.status, "Failed")["message"] == (  # type: ignore[index]
        "MASTER 0 (pod example-job-master-0) failed: container tensorflow exited with code 137;"
        " 1 more pod restart(s) needed after 0, but backoffLimit is 0"
    )
    assert deletes(result, "Pod") == [
        "example-job-ps-0",
        "example-job-ps-1",
        "example-job-worker-0",
    ]


# --- cleanPodPolicy, TTL, deadline ---------------------------------------------


def test_clean_pod_policy_all_removes_every_child() -> None:
    world = running_world(runPolicy={"cleanPodPolicy": "All"}, tensorboard={"logDir": "/logs"})
    world.exit("example-job-master-0", 0)
    result = world.step()
    assert deletes(result, "Pod") == sorted(PODS)
    assert deletes(result, "Service") == sorted([*PODS, "example-job-tensorboard"])
    assert deletes(result, "ConfigMap") == [CONFIGMAP]
    assert deletes(result, "Deployment") == ["example-job-tensorboard"]
    assert world.step().status["phase"] == "Done"
    assert world.children == {}


def test_clean_pod_policy_none_leaves_everything() -> None:
    world = running_world(runPolicy={"cleanPodPolicy": "None"})
    world.exit("example-job-master-0", 3)
    result = world.step()
    assert deletes(result) == []
    assert (result.status["state"], result.status["phase"]) == ("Failed", "Failed")


def test_tensorboard_outlives_the_training_under_clean_pod_policy_running() -> None:
    world = running_world(tensorboard={"logDir": "/logs"})
    assert world.names("Deployment") == ["example-job-tensorboard"]
    world.exit("example-job-master-0", 0)
    world.settle()
    world.past_cleanup_grace()
    world.settle()
    assert world.job["status"]["phase"] == "Done"
    assert world.names("Deployment") == ["example-job-tensorboard"]
    assert world.names("Service") == ["example-job-tensorboard"]


def test_ttl_deletes_the_job_once_it_has_expired() -> None:
    world = running_world(runPolicy={"ttlSecondsAfterFinished": 60})
    world.exit("example-job-master-0", 0)
    world.settle()
    result = world.reconcile()
    assert result.requeue_after == pytest.approx(CLEANUP_GRACE_SECONDS)  # the sooner timer
    world.past_cleanup_grace()
    world.settle()
    assert world.reconcile().requeue_after == pytest.approx(60 - CLEANUP_GRACE_SECONDS)
    assert not world.job_deleted
    world.later(59 - CLEANUP_GRACE_SECONDS)
    assert world.reconcile().requeue_after == pytest.approx(1)
    world.later(1)
    result = world.step()
    assert DeleteJob() in result.actions
    assert ("Normal", "TTLExpired") in events(result)


def test_active_deadline_fails_the_job_and_cleans_up() -> None:
    world = World(tfjob(runPolicy={"activeDeadlineSeconds": 100}))
    assert world.step().requeue_after == pytest.approx(100)
    world.run()
    world.later(40)
    world.settle()
    assert world.reconcile().requeue_after == pytest.approx(60)
    world.later(60)
    result = world.step()
    assert (result.status["state"], result.status["reason"]) == ("Failed", "DeadlineExceeded")
    assert deletes(result, "Pod") == sorted(PODS)


def test_a_finished_job_never_creates_a_pod_again() -> None:
    world = running_world(runPolicy={"cleanPodPolicy": "All"})
    world.exit("example-job-master-0", 0)
    world.settle()
    assert world.children == {}
    for _ in range(2):
        world.later(600)
        result = world.step()
        assert [a for a in result.actions if isinstance(a, Create)] == []
    assert world.job["status"]["state"] == "Succeeded"


# --- suspend -------------------------------------------------------------------


def test_suspend_deletes_pods_keeps_services_and_resume_starts_afresh() -> None:
    world = running_world(runPolicy={"activeDeadlineSeconds": 3600})
    world.job["spec"]["runPolicy"]["suspend"] = True
    world.job["metadata"]["generation"] = 2
    world.later(60)
    result = world.step(graceful=True)
    assert deletes(result, "Pod") == sorted(PODS)
    assert deletes(result, "Service") == []
    assert ("Normal", "Suspended") in events(result)
    status = result.status
    assert (status["state"], status["phase"], status["reason"]) == (
        "Running",
        "Creating",
        "Suspended",
    )
    assert condition(status, "Suspended")["status"] == "True"  # type: ignore[index]
    assert "startTime" not in status
    assert result.requeue_after is None  # no deadline while suspended

    # Resumed while the pods are still terminating: wait for them first.
    world.job["spec"]["runPolicy"]["suspend"] = False
    world.job["metadata"]["generation"] = 3
    result = world.step()
    assert result.actions == []
    assert result.status["reason"] == "Suspended"
    for name in PODS:
        world.vanish(name)
    world.later(60)
    result = world.step()
    assert creates(result, "Pod") == sorted(PODS)
    assert ("Normal", "Resumed") in events(result)
    assert result.status["startTime"] == "2026-03-01T12:02:00Z"
    assert condition(result.status, "Suspended")["reason"] == "Resumed"  # type: ignore[index]
    world.settle()
    assert world.job["status"]["restartCount"] == 0


# --- the spec changes ------------------------------------------------------------


def test_scaling_down_deletes_the_extra_pods_without_counting_restarts() -> None:
    job = tfjob()
    job["spec"]["replicaSpecs"][1]["replicas"] = 3
    world = started(World(job))
    world.job["spec"]["replicaSpecs"][1]["replicas"] = 1
    world.job["metadata"]["generation"] = 2
    result = world.step()
    assert deletes(result, "Pod") == ["example-job-worker-1", "example-job-worker-2"]
    assert deletes(result, "Service") == ["example-job-worker-1", "example-job-worker-2"]
    world.settle()
    assert world.job["status"]["restartCount"] == 0
    assert world.job["status"]["observedGeneration"] == 2


def test_a_stray_holding_a_slot_name_is_deleted_before_the_slot_is_filled() -> None:
    world = running_world()
    world.pod("example-job-worker-0")["metadata"]["labels"]["dlk8s.io/replica-index"] = "9"
    result = world.step()
    assert deletes(result, "Pod") == ["example-job-worker-0"]
    assert creates(result, "Pod") == []
    assert creates(world.step(), "Pod") == ["example-job-worker-0"]


def test_children_of_another_job_never_reach_its_pass() -> None:
    """reconcile trusts Observed to hold only the job's own children
    (jobmodel.Observed): the runtime's index files each child under the uid of
    the job that controls it, whatever its labels say."""
    world = running_world()
    foreign = copy.deepcopy(world.pod("example-job-worker-0"))
    foreign["metadata"]["name"] = "example-job-worker-7"
    foreign["metadata"]["ownerReferences"][0]["uid"] = "some-other-job"
    index = ChildIndex()
    groups = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps"}
    for child in [*world.children.values(), foreign]:
        index.apply(groups[child["kind"]], ADDED, child)
    assert index.observed("some-other-job").pods == [foreign]
    observed = index.observed(UID)
    assert len(observed.pods) == len(PODS)
    assert reconcile(world.job, observed, CONFIG, world.now).actions == []


# --- what the engine refuses -----------------------------------------------------


def test_a_master_without_a_tensorflow_container_is_an_invalid_spec() -> None:
    job = tfjob()
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["name"] = "main"
    result = World(job).reconcile()
    assert [a for a in result.actions if isinstance(a, Create)] == []
    assert (result.status["state"], result.status["phase"], result.status["reason"]) == (
        "Failed",
        "Failed",
        "InvalidSpec",
    )
    [event] = [a for a in result.actions if isinstance(a, Event)]
    assert (event.type, event.reason) == ("Warning", "InvalidSpec")
    assert (
        event.message
        == 'spec.replicaSpecs[0].template.spec.containers: no container named "tensorflow"'
    )


def test_an_invalid_spec_on_a_running_job_stops_its_pods() -> None:
    world = running_world()
    world.job["spec"]["replicaSpecs"][2]["tfReplicaType"] = "CHIEF"
    world.job["metadata"]["generation"] = 2
    result = world.step()
    assert result.status["reason"] == "InvalidSpec"
    assert deletes(result, "Pod") == sorted(PODS)
    world.settle()
    assert world.job["status"]["phase"] == "Failed"
    assert world.reconcile().actions == []


def test_a_tensorboard_outside_the_cluster_waits_until_allowed_or_changed() -> None:
    board = {"logDir": "/logs", "serviceType": "LoadBalancer"}
    world = World(tfjob(tensorboard=board))
    result = world.step()
    assert [a for a in result.actions if not isinstance(a, Event)] == []
    assert events(result) == [("Warning", "ConfigError")]
    assert result.status["reason"] == "ConfigError"
    [said] = [a.message for a in result.actions if isinstance(a, Event)]
    assert said.startswith("spec.tensorboard.serviceType LoadBalancer is not allowed"), said
    world.job["spec"]["tensorboard"]["serviceType"] = "ClusterIP"
    assert creates(world.step(), "Pod") == sorted(PODS)
    allowed = replace(CONFIG, tensorboard_service_types=("ClusterIP", "LoadBalancer"))
    public = World(tfjob(tensorboard=board), config=allowed)
    assert creates(public.step(), "Service") == ["example-job-tensorboard"]


def test_a_missing_grpc_server_script_blocks_the_job_without_failing_it() -> None:
    world = World(tfjob(), config=parse_config({}))
    result = world.step()
    assert [a for a in result.actions if not isinstance(a, Event)] == []
    assert events(result) == [("Warning", "ConfigError")]
    assert (result.status["state"], result.status["reason"]) == ("Running", "ConfigError")
    assert world.reconcile().actions == []  # said once
    world.config = CONFIG
    assert creates(world.step(), "Pod") == sorted(PODS)


def test_a_job_being_deleted_is_left_to_the_garbage_collector() -> None:
    world = running_world()
    world.job["metadata"]["deletionTimestamp"] = STAMP
    world.exit("example-job-master-0", 0)
    result = world.reconcile()
    # Nothing but its pods let go (reconcile.tracking): nothing keeps their ends now.
    released = {a.name: a.patch for a in result.actions if isinstance(a, Patch)}
    assert len(released) == len(result.actions)
    assert released == {pod: {"metadata": {"finalizers": None}} for pod in PODS}
    assert result.status == world.job["status"]


def test_pod_totals_follow_the_pods_of_every_role() -> None:
    world = running_world()  # 1 MASTER, 1 WORKER, 2 PS, all Running
    status = world.job["status"]
    assert (status["pendingPods"], status["runningPods"]) == (0, 4)
    world.exit("example-job-worker-0", 0)
    world.settle()
    status = world.job["status"]
    assert (status["runningPods"], status["succeededPods"], status["failedPods"]) == (3, 1, 0)
