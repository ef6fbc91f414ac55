"""What ends a job (issue 30, docs/kinds.md "What ends a job"): success that
tells the truth, podFailurePolicy's rules, and disruptions that are not
failures, on the seed's TFJob (MASTER, WORKER, two PSs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dlk8s.job.reconcile.verdicts import SETTLE_SECONDS

from ..support.endings import TAINTED, Graveyard, failure_rule, rules
from ..support.worlds import (
    PODS,
    condition,
    condition_message,
    creates,
    deletes,
    events,
    started,
    tfjob,
)

MASTER, WORKER, PS0, PS1 = PODS


def world(**run_policy: Any) -> Graveyard:
    return started(Graveyard(tfjob(runPolicy=run_policy)))


def recreate(w: Graveyard, pod: str) -> None:
    """The failed pod's back-off passes, it is deleted and recreated, and runs."""
    w.later(60)
    w.settle()
    w.run(pod)
    w.settle()


# --- success that tells the truth ------------------------------------------------------------


def test_a_worker_that_failed_for_good_fails_the_job_its_master_finishes() -> None:
    w = world()
    w.exit(WORKER, 1)
    recreate(w, WORKER)  # the replacement runs, and has not succeeded
    assert w.job["status"]["failedReplicas"] == [
        {
            "replicaType": "WORKER",
            "index": 0,
            "pod": WORKER,
            "exitCode": 1,
            "time": "2026-03-01T12:00:00Z",
        }
    ]
    w.exit(MASTER, 0)
    result = w.step()
    status = result.status
    assert (status["state"], status["reason"]) == ("Failed", "OtherReplicasFailed")
    failed = condition(status, "Failed")
    assert failed is not None
    assert failed["reason"] == "OtherReplicasFailed"
    assert "MASTER 0 succeeded, but 1 other replica(s) failed for good" in failed["message"]
    assert f"WORKER 0 (pod {WORKER}, exit code 1)" in failed["message"]
    assert ("Warning", "OtherReplicasFailed") in events(result)


def test_the_failure_is_remembered_after_the_failed_pod_is_gone() -> None:
    """Its pod deleted and replaced, only the status says it failed: an
    operator that restarts (no tombstone) still fails the job."""
    w = world()
    w.exit(WORKER, 1)
    recreate(w, WORKER)
    w.amnesia()
    w.exit(MASTER, 0)
    assert w.step().status["reason"] == "OtherReplicasFailed"


def test_the_seeds_rule_succeeds_and_still_names_the_failure() -> None:
    w = world(successPolicy="DecidingReplica")
    w.exit(WORKER, 1)
    recreate(w, WORKER)
    w.exit(MASTER, 0)
    status = w.step().status
    assert (status["state"], status["reason"]) == ("Succeeded", "Succeeded")
    message = condition(status, "Succeeded")["message"]  # type: ignore[index]
    assert "DecidingReplica" in message
    assert f"pod {WORKER}, exit code 1" in message


def test_a_replica_whose_new_pod_succeeded_is_forgiven() -> None:
    w = world()
    w.exit(WORKER, 1)
    recreate(w, WORKER)
    w.exit(WORKER, 0)
    w.step()
    assert "failedReplicas" not in w.job["status"]
    w.exit(MASTER, 0)
    assert w.step().status["state"] == "Succeeded"


def test_a_retryable_exit_is_not_a_failure_for_good() -> None:
    w = world()
    w.exit(WORKER, 137)  # SIGKILL, e.g. the OOM killer: retried
    recreate(w, WORKER)
    assert "failedReplicas" not in w.job["status"]
    w.exit(MASTER, 0)
    assert w.step().status["state"] == "Succeeded"


def test_all_workers_waits_for_the_workers_and_then_asks_after_the_others() -> None:
    w = world(successPolicy="AllWorkers")
    w.exit(MASTER, 0)
    result = w.step()
    assert (result.status["state"], result.status["phase"]) == ("Running", "Running")
    assert deletes(result) == []  # nothing is cleaned up while the job waits
    w.exit(PS0, 2)  # a PS fails for good meanwhile, and is recreated
    recreate(w, PS0)
    w.exit(WORKER, 0)
    status = w.step().status
    assert (status["state"], status["reason"]) == ("Failed", "OtherReplicasFailed")
    assert "MASTER 0 and all 1 WORKER pods succeeded, but" in condition(status, "Failed")["message"]  # type: ignore[index]


def test_all_workers_succeeds_once_every_worker_has() -> None:
    w = world(successPolicy="AllWorkers")
    w.exit(WORKER, 0)
    w.step()
    w.exit(MASTER, 0)
    status = w.step().status
    assert (status["state"], status["reason"]) == ("Succeeded", "Succeeded")


# --- podFailurePolicy --------------------------------------------------------------------------


def test_a_fail_job_rule_fails_the_job_at_once_recreating_nothing() -> None:
    w = world(**rules(failure_rule("FailJob", codes=[42])))
    w.exit(WORKER, 42)
    result = w.step()
    status = result.status
    assert (status["state"], status["reason"]) == ("Failed", "PodFailurePolicy")
    message = condition(status, "Failed")["message"]  # type: ignore[index]
    assert message == (
        f"WORKER 0 (pod {WORKER}) failed: container tensorflow exited with code 42,"
        " matching spec.runPolicy.podFailurePolicy.rules[0] (FailJob)"
    )
    assert creates(result, "Pod") == []
    assert WORKER not in deletes(result, "Pod")
    assert status.get("restartCount", 0) == 0


def test_an_ignore_rule_recreates_without_counting() -> None:
    w = world(backoffLimit=0, **rules(failure_rule("Ignore", codes=[3])))
    w.exit(WORKER, 3)
    result = w.step()
    assert ("Warning", "PodFailureIgnored") in events(result)
    assert result.status["replicaStatuses"][1]["replicasStates"] == {}  # not counted as Failed
    [entry] = result.status["uncountedRestarts"]
    assert (entry["replicaType"], entry["index"], entry["reason"]) == (
        "WORKER",
        0,
        "PodFailurePolicy",
    )
    assert "rules[0] (Ignore)" in entry["message"]
    old_uid = w.pod(WORKER)["metadata"]["uid"]
    recreate(w, WORKER)
    assert w.pod(WORKER)["metadata"]["uid"] != old_uid
    status = w.job["status"]
    assert (status["state"], status.get("restartCount", 0)) == ("Running", 0)
    assert [e["uid"] for e in status["uncountedRestarts"]] == [old_uid]
    assert "failedReplicas" not in status


def test_a_rule_for_other_roles_leaves_a_pod_to_the_defaults() -> None:
    w = world(**rules(failure_rule("FailJob", codes=[1], roles=["PS"])))
    w.exit(WORKER, 1)
    w.later(60)
    result = w.step()
    assert result.status["state"] == "Running"
    assert deletes(result, "Pod") == [WORKER]  # Count: restarted


def test_not_in_matches_every_other_code_and_count_counts() -> None:
    w = world(**rules(failure_rule("Count", not_in=[1, 2]), failure_rule("FailJob", codes=[1])))
    w.exit(MASTER, 7)  # 7 is not in [1, 2]: Count wins over the default FailJob
    recreate(w, MASTER)
    assert (w.job["status"]["state"], w.job["status"]["restartCount"]) == ("Running", 1)
    w.exit(MASTER, 1)  # the first rule does not match; the second does
    assert w.step().status["reason"] == "PodFailurePolicy"


def test_a_rule_on_another_container_reads_that_container() -> None:
    w = world(**rules(failure_rule("FailJob", codes=[9], container="sidecar")))
    w.exit(WORKER, 9)  # the tensorflow container's 9, not the sidecar's
    w.later(60)
    assert w.step().status["state"] == "Running"


# --- disruptions are not failures ---------------------------------------------------------------


def test_a_pod_evicted_between_two_passes_is_recreated_without_counting() -> None:
    w = world(backoffLimit=0)
    uid = w.pod(WORKER)["metadata"]["uid"]
    w.disrupt(WORKER)
    result = w.step()
    assert creates(result, "Pod") == [WORKER]
    assert ("Warning", "PodDisrupted") in events(result)
    status = result.status
    assert (status["state"], status.get("restartCount", 0)) == ("Running", 0)
    [entry] = status["uncountedRestarts"]
    assert entry == {
        "replicaType": "WORKER",
        "index": 0,
        "pod": WORKER,
        "uid": uid,
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
        "time": "2026-03-01T12:00:00Z",
    }
    w.run()
    w.settle()
    assert w.job["status"].get("restartCount", 0) == 0
    assert w.job["status"]["uncountedRestarts"] == [entry]  # kept, for `kubectl describe`


def test_without_its_tombstone_a_vanished_pod_counts() -> None:
    """What an operator restart at the wrong moment costs: one restart."""
    w = world()
    w.disrupt(WORKER)
    w.amnesia()
    assert w.step().status["restartCount"] == 1


def test_a_pod_that_terminates_slowly_after_a_disruption_is_not_counted() -> None:
    w = world(backoffLimit=0)
    w.disrupt(PS0, why=TAINTED, then="terminate")
    result = w.step()
    assert ("Warning", "PodDisrupted") in events(result)
    assert result.status["replicaStatuses"][2]["replicasStates"] == {"Running": 1}
    w.step()
    w.gone.clear()  # gone without a tombstone: its status had already left it out
    w.vanish(PS0)
    w.gone.clear()
    w.settle()
    w.run()
    w.settle()
    status = w.job["status"]
    assert (status["state"], status.get("restartCount", 0)) == ("Running", 0)
    assert status["uncountedRestarts"][0]["reason"] == "DeletionByTaintManager"


def test_a_pod_its_disruptor_deletes_is_left_to_it_for_a_while() -> None:
    """The taint manager marks a pod and then deletes it by name: the
    operator, deleting first and creating the replacement under that name,
    would have the replacement deleted and counted."""
    w = world()
    pod = w.pod(WORKER)
    marked = w.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    pod.setdefault("status", {})["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": TAINTED[0],
         "message": TAINTED[1], "lastTransitionTime": marked}
    ]  # fmt: skip
    result = w.step()
    assert WORKER not in deletes(result, "Pod")
    assert creates(result, "Pod") == []
    w.later(16)  # the taint manager never came: the operator does it itself
    result = w.step()
    assert deletes(result, "Pod") == [WORKER]


def test_a_pod_the_kubelet_evicted_and_left_failed_is_replaced_without_counting() -> None:
    w = world(backoffLimit=0)
    w.disrupt(MASTER, why=("TerminationByKubelet", "low on memory"), then="fail")
    w.exit(MASTER, 1)  # its program died of the SIGTERM with exit 1: still a disruption
    w.pod(MASTER)["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    ]
    recreate(w, MASTER)
    status = w.job["status"]
    assert (status["state"], status.get("restartCount", 0)) == ("Running", 0)
    assert "failedReplicas" not in status


def test_a_tombstone_excuses_its_pod_once_and_a_real_loss_still_counts() -> None:
    w = world()
    w.disrupt(PS0, then="terminate")
    w.step()  # PS 0 seen disrupted: left out of the counts
    w.vanish(PS0)  # its tombstone shows the disruption again
    w.vanish(PS1)  # and PS 1 is lost for real, in the same moment
    assert w.step().status["restartCount"] == 1


def test_a_disruption_under_restart_policy_never_is_not_a_failure() -> None:
    job = tfjob()
    job["spec"]["replicaSpecs"][1]["restartPolicy"] = "Never"
    w = started(Graveyard(job))
    w.disrupt(WORKER)
    status = w.step().status
    assert (status["state"], status.get("restartCount", 0)) == ("Running", 0)


def test_rules_can_count_disruptions_or_fail_on_them() -> None:
    w = world(**rules(failure_rule("Count", conditions=["DisruptionTarget"])))
    w.disrupt(WORKER)
    assert w.step().status["restartCount"] == 1
    w = world(**rules(failure_rule("FailJob", conditions=["DisruptionTarget"], roles=["MASTER"])))
    w.disrupt(MASTER, then="terminate")
    status = w.step().status
    assert (status["state"], status["reason"]) == ("Failed", "PodFailurePolicy")


def test_the_memory_of_replaced_pods_is_bounded() -> None:
    w = world()
    uids = []
    for _ in range(14):
        uids.append(w.pod(PS1)["metadata"]["uid"])
        w.disrupt(PS1)
        w.settle()
        w.run()
        w.settle()
    status = w.job["status"]
    assert [e["uid"] for e in status["uncountedRestarts"]] == uids[-10:]
    assert status.get("restartCount", 0) == 0


def test_a_pass_repeated_on_the_same_world_writes_the_same_memory() -> None:
    w = world(**rules(failure_rule("Ignore", codes=[3])))
    w.exit(WORKER, 3)
    w.exit(PS0, 1)
    first = w.step()
    again = w.reconcile()
    assert again.status == first.status
    assert events(again) == []  # nothing new to tell


def test_the_others_ends_get_a_moment_to_be_reported_after_the_masters() -> None:
    """A WORKER that died a moment before the MASTER succeeded may be
    reported a moment after it: the job gives the reports SETTLE_SECONDS."""
    w = world()
    w.exit(MASTER, 0, at=w.now)  # reported at once
    result = w.step()
    assert (result.status["state"], result.requeue_after) == ("Running", SETTLE_SECONDS)
    w.later(1)
    w.exit(WORKER, 1, at=w.now - timedelta(seconds=2))  # it had ended before the MASTER
    result = w.step()
    # The PSs still run: the verdict waits out the moment, to name every failure.
    assert (result.status["state"], result.requeue_after) == ("Running", SETTLE_SECONDS - 1)
    w.later(SETTLE_SECONDS - 1)
    assert w.step().status["reason"] == "OtherReplicasFailed"


def test_each_end_reported_gives_the_others_the_moment_again() -> None:
    """The crashes that end a job come together and are reported late
    together (run 31 of issue 43: an MXJob's SCHEDULER reported 2.4 s after
    its end, one WORKER 2 s later, the other later still): the moment runs
    from the last end reported, so the verdict names every one of them."""
    w = world()
    w.exit(MASTER, 0, at=w.now - timedelta(seconds=3))
    assert w.step().requeue_after == SETTLE_SECONDS - 3
    w.later(1)
    w.exit(WORKER, 1, at=w.now)
    result = w.step()
    assert (result.status["state"], result.requeue_after) == ("Running", SETTLE_SECONDS)
    w.later(SETTLE_SECONDS - 1)  # past the MASTER's moment, within the WORKER's
    w.exit(PS0, 1, at=w.now - timedelta(seconds=1))
    result = w.step()
    assert (result.status["state"], result.requeue_after) == ("Running", SETTLE_SECONDS - 1)
    w.later(SETTLE_SECONDS - 1)
    message = condition_message(w.step().status, "Failed")
    assert "but 2 other replica(s) failed for good" in message, message
    assert f"WORKER 0 (pod {WORKER}, exit code 1)" in message, message
    assert f"PS 0 (pod {PS0}, exit code 1)" in message, message


def test_the_master_s_success_stands_once_the_moment_has_passed() -> None:
    w = world()
    w.exit(MASTER, 0, at=w.now)
    w.later(SETTLE_SECONDS - 1)
    assert w.step().requeue_after == 1
    w.later(1)
    assert w.step().status["state"] == "Succeeded"


def test_the_seeds_rule_waits_to_name_what_failed_and_a_master_alone_does_not_wait() -> None:
    w = world(successPolicy="DecidingReplica")
    w.exit(MASTER, 0, at=w.now)
    assert w.step().requeue_after == SETTLE_SECONDS
    w.exit(WORKER, 1)  # reported late, as a kubelet may
    w.later(SETTLE_SECONDS)
    status = w.step().status
    assert status["state"] == "Succeeded"
    message = condition_message(status, "Succeeded")
    assert "successPolicy DecidingReplica; failed: WORKER 0" in message
    alone = started(Graveyard(tfjob(replicaSpecs=tfjob()["spec"]["replicaSpecs"][:1])))
    alone.exit(MASTER, 0, at=alone.now)
    assert alone.step().status["state"] == "Succeeded"
