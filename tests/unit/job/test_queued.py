"""A job queued in Kueue (docs/kueue.md): its Workload, no pod before the
admission, pods placed as admitted, eviction, and the end of the job.

The world (tests/unit/support/queueworld.py) plays the API server with the
job's Workload, and a test plays Kueue by editing the Workload's status as
Kueue's controllers do. Expected values are written
by hand from the behaviour docs/kueue.md describes, never copied from an output.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dlk8s.job.actions import Create, Delete, Patch
from dlk8s.job.childnames import short_hash
from dlk8s.job.jobmodel import QueueFacts
from dlk8s.job.reconcile import Result

from ..support.paddle import CONFIG as PADDLE_CONFIG
from ..support.paddle import PaddleWorld, edl_example
from ..support.queueworld import (
    FACTS,
    GPU_FLAVOR,
    MASTER_RESOURCES,
    QUEUE_LABEL,
    WORKER_RESOURCES,
    WORKLOAD,
    QueueWorld,
    admitted_world,
    pods_of,
    queued_tfjob,
    queued_world,
    status_writes,
    workload_condition,
    workload_creates,
)
from ..support.worlds import (
    NOW,
    PODS,
    STAMP,
    UID,
    condition,
    creates,
    deletes,
    events,
    running_world,
)

# --- before the admission ------------------------------------------------------


def test_a_queued_job_creates_its_workload_and_no_pod() -> None:
    result = QueueWorld(queued_tfjob(), facts=QueueFacts()).reconcile()
    assert creates(result, "Pod") == []
    [workload] = workload_creates(result)
    assert len(result.actions) == 1 + 1  # the create, and the event that it queues
    assert workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert workload["metadata"]["name"] == WORKLOAD
    assert workload["metadata"]["namespace"] == "ns"
    assert workload["metadata"]["labels"]["dlk8s.io/job-name"] == "example-job"
    assert workload["metadata"]["labels"]["dlk8s.io/job-kind"] == "tfjob"
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == UID
    [owner] = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TFJob",
        "example-job",
        UID,
        True,
    )
    spec = workload["spec"]
    assert spec["queueName"] == "q"
    assert [(ps["name"], ps["count"]) for ps in spec["podSets"]] == [
        ("master", 1),
        ("worker", 1),
        ("ps", 2),
    ]
    assert all("minCount" not in ps for ps in spec["podSets"])
    resources = [ps["template"]["spec"]["containers"][0].get("resources") for ps in spec["podSets"]]
    assert resources[:2] == [MASTER_RESOURCES, WORKER_RESOURCES]
    assert "priorityClassRef" not in spec
    status = result.status
    assert (status["state"], status["phase"]) == ("Running", "Queued")
    queued = condition(status, "Queued")
    assert queued is not None
    assert (queued["status"], queued["reason"]) == ("True", "Pending")
    assert "q" in queued["message"]
    assert "startTime" not in status


def test_the_workload_asks_for_what_the_admitted_pods_ask_for() -> None:
    world = queued_world()
    asked = {
        ps["name"]: ps["template"]["spec"]["containers"]
        for ps in world.workload()["spec"]["podSets"]
    }
    world.admit()
    pods = pods_of(world.step())
    assert sorted(pods) == sorted(PODS)
    for name, pod in pods.items():
        role = pod["metadata"]["labels"]["kueue.x-k8s.io/podset"]
        wanted = [(c["name"], c.get("resources")) for c in asked[role]]
        assert [(c["name"], c.get("resources")) for c in pod["spec"]["containers"]] == wanted, name


def test_without_kueue_a_job_that_names_a_queue_waits_and_says_why() -> None:
    result = QueueWorld(queued_tfjob(), facts=None).reconcile()
    assert workload_creates(result) == []
    assert creates(result, "Pod") == []
    queued = condition(result.status, "Queued")
    assert queued is not None
    assert (queued["status"], queued["reason"]) == ("False", "QueueUnavailable")
    assert "--kueue" in queued["message"]
    assert result.status["phase"] == "Queued"
    assert ("Warning", "QueueUnavailable") in events(result)


def test_kueue_api_missing_waits_with_its_problem() -> None:
    facts = QueueFacts(problem="Kueue's API is not served")
    result = QueueWorld(queued_tfjob(), facts=facts).reconcile()
    assert (workload_creates(result), creates(result, "Pod")) == ([], [])
    queued = condition(result.status, "Queued")
    assert queued is not None
    assert queued["reason"] == "QueueUnavailable"
    assert "not served" in queued["message"]


def test_a_pending_workload_keeps_the_job_waiting_and_a_second_pass_does_nothing() -> None:
    world = queued_world()
    assert creates(world.step(), "Pod") == []  # Kueue has not looked at it yet
    world.set_conditions(("QuotaReserved", "False", "Pending"))
    result = world.step()
    assert creates(result, "Pod") == []
    assert [a for a in result.actions if isinstance(a, Patch | Create | Delete)] == []
    assert world.job["status"]["phase"] == "Queued"
    queued = condition(world.job["status"], "Queued")
    assert queued is not None
    assert (queued["status"], queued["reason"]) == ("True", "Pending")
    assert "q" in queued["message"]
    assert "QuotaReserved by Kueue" in queued["message"]
    again = world.reconcile()
    assert again.actions == []
    assert again.status == world.job["status"]


def test_a_pending_workload_follows_the_jobs_replicas() -> None:
    world = queued_world()
    world.job["spec"]["replicaSpecs"][1]["replicas"] = 3
    result = world.step()
    [patch] = [a for a in result.actions if isinstance(a, Patch)]
    assert (patch.kind, patch.name) == ("Workload", WORKLOAD)
    counts = [(ps["name"], ps["count"]) for ps in patch.patch["spec"]["podSets"]]
    assert counts == [("master", 1), ("worker", 3), ("ps", 2)]
    assert creates(result, "Pod") == []
    assert [a for a in world.reconcile().actions if isinstance(a, Patch)] == []


# --- admission -----------------------------------------------------------------


def test_admitted_pods_are_placed_on_the_flavor() -> None:
    world = queued_world()
    world.admit()
    result = world.step()
    pods = pods_of(result)
    assert sorted(pods) == sorted(PODS)
    for pod in pods.values():
        assert pod["spec"]["nodeSelector"]["pool"] == "a"
        assert GPU_FLAVOR["spec"]["tolerations"][0] in pod["spec"]["tolerations"]
    roles = {name: pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] for name, pod in pods.items()}
    assert roles == {
        "example-job-master-0": "master",
        "example-job-worker-0": "worker",
        "example-job-ps-0": "ps",
        "example-job-ps-1": "ps",
    }
    admitted = condition(world.job["status"], "Admitted")
    assert admitted is not None
    assert (admitted["status"], admitted["reason"]) == ("True", "Admitted")
    assert "cq" in admitted["message"]
    queued = condition(world.job["status"], "Queued")
    assert queued is not None
    assert queued["status"] == "False"
    assert ("Normal", "Admitted") in events(result)
    [written] = status_writes(result)
    ready = workload_condition(written, "PodsReady")
    assert (ready["status"], ready["reason"]) == ("False", "WaitForStart")


def test_admission_checks_add_to_the_pods() -> None:
    world = queued_world()
    world.admit()
    update = {
        "name": "worker",
        "labels": {"checked": "yes"},
        "annotations": {"note": "provisioned"},
        "nodeSelector": {"zone": "z1"},
        "tolerations": [{"key": "spot", "operator": "Exists"}],
    }
    world.workload()["status"]["admissionChecks"] = [
        {"name": "prov", "state": "Ready", "podSetUpdates": [update]}
    ]
    pods = pods_of(world.step())
    worker = pods["example-job-worker-0"]
    assert worker["metadata"]["labels"]["checked"] == "yes"
    assert worker["metadata"]["annotations"]["note"] == "provisioned"
    assert worker["spec"]["nodeSelector"] == {"pool": "a", "zone": "z1"}
    assert {"key": "spot", "operator": "Exists"} in worker["spec"]["tolerations"]
    master = pods["example-job-master-0"]
    assert "checked" not in master["metadata"]["labels"]
    assert master["spec"]["nodeSelector"] == {"pool": "a"}


def test_pods_ready_follows_the_pods() -> None:
    world = queued_world()
    world.admit()
    world.step()
    world.run()
    result = world.step()
    [written] = status_writes(result)
    ready = workload_condition(written, "PodsReady")
    assert (ready["status"], ready["reason"]) == ("True", "Started")
    assert ("Normal", "Admitted") not in events(result)
    assert status_writes(world.reconcile()) == []


def test_an_admission_on_a_flavor_not_in_the_cache_waits_for_it() -> None:
    world = queued_world()
    world.admit(flavor="gpu-b")
    result = world.step()
    assert creates(result, "Pod") == []
    assert result.requeue_after is not None
    assert result.requeue_after > 0
    assert world.job["status"]["phase"] == "Queued"


# --- eviction ------------------------------------------------------------------


def test_an_evicted_job_deletes_its_pods_then_gives_the_quota_back() -> None:
    world = admitted_world(queued_tfjob(runPolicy={"backoffLimit": 0}))
    restarts = world.job["status"]["restartCount"]
    admitted_at = NOW - timedelta(seconds=600)
    world.set_conditions(("Evicted", "True", "Preempted"))
    world.workload()["status"]["accumulatedPastExecutionTimeSeconds"] = 30
    for c in world.workload()["status"]["conditions"]:
        if c["type"] == "Admitted":
            c["lastTransitionTime"] = admitted_at.strftime("%Y-%m-%dT%H:%M:%SZ")

    result = world.step()
    assert deletes(result, "Pod") == sorted(PODS)
    assert status_writes(result) == []
    status = world.job["status"]
    assert status["phase"] == "Queued"
    assert status["restartCount"] == restarts
    evicted = condition(status, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert "Evicted by Kueue" in evicted["message"]
    admitted = condition(status, "Admitted")
    assert admitted is not None
    assert admitted["status"] == "False"
    queued = condition(status, "Queued")
    assert queued is not None
    assert queued["status"] == "True"
    assert ("Warning", "Evicted") in events(result)

    result = world.step()  # the pods are gone
    assert creates(result, "Pod") == []
    [written] = status_writes(result)
    assert "admission" not in written["status"]
    reserved = workload_condition(written, "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    admitted = workload_condition(written, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("False", "NoReservation")
    assert workload_condition(written, "Requeued")["status"] == "True"
    assert written["status"]["accumulatedPastExecutionTimeSeconds"] == 30 + 600
    assert status_writes(world.reconcile()) == []

    world.set_conditions(("Evicted", "False", "QuotaReserved"))
    world.admit()
    result = world.step()
    assert creates(result, "Pod") == sorted(PODS)
    assert world.job["status"]["restartCount"] == restarts
    assert world.job["status"]["state"] == "Running"
    assert "Failed" not in {c["type"] for c in world.job["status"]["conditions"]}
    evicted = condition(world.job["status"], "Evicted")
    assert evicted is not None
    assert evicted["status"] == "False"


def test_an_evicted_job_keeps_the_quota_while_its_pods_terminate() -> None:
    world = admitted_world()
    world.set_conditions(("Evicted", "True", "PodsReadyTimeout"))
    world.step(graceful=True)
    assert status_writes(world.step(graceful=True)) == []  # the pods are still going
    for name in PODS:
        world.vanish(name)
    [written] = status_writes(world.step())
    assert workload_condition(written, "QuotaReserved")["status"] == "False"
    # Kueue requeues the Workload itself after this reason (its back-off).
    requeued = workload_condition(written, "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("False", "PodsReadyTimeout")


# --- a job cannot leave its queue, nor outgrow its admission ---------------------


def relabelled(world: QueueWorld, queue: str | None) -> None:
    """A user sets the job's queue label to `queue`, or takes it off."""
    labels = world.job["metadata"].setdefault("labels", {})
    labels.pop(QUEUE_LABEL, None)
    if queue is not None:
        labels[QUEUE_LABEL] = queue


def label_patches(result: Result) -> list[Any]:
    return [
        a.patch["metadata"]["labels"].get(QUEUE_LABEL)
        for a in result.actions
        if isinstance(a, Patch) and a.kind == "TFJob" and "labels" in a.patch["metadata"]
    ]


def test_an_admitted_job_whose_queue_label_is_taken_off_still_leaves_when_evicted() -> None:
    world = admitted_world()
    relabelled(world, None)
    result = world.step()
    assert (creates(result, "Pod"), deletes(result)) == ([], [])
    assert label_patches(result) == ["q"]  # labelled again, as Kueue's queue holds it
    assert world.workload()["spec"]["queueName"] == "q"
    relabelled(world, None)  # and off again, before Kueue preempts it
    world.set_conditions(("Evicted", "True", "Preempted"))
    result = world.step()
    assert deletes(result, "Pod") == sorted(PODS)
    assert world.job["status"]["phase"] == "Queued"
    result = world.step()  # the pods are gone: the quota goes back, and the job waits
    assert creates(result, "Pod") == []
    assert world.names("Workload") == [WORKLOAD]
    assert world.job["status"]["phase"] == "Queued"


def test_an_admitted_job_relabelled_to_another_queue_stays_where_it_was_admitted() -> None:
    world = admitted_world()
    relabelled(world, "other")
    result = world.step()
    assert label_patches(result) == ["q"]
    assert [a for a in result.actions if isinstance(a, Patch) and a.kind == "Workload"] == []
    assert (creates(result, "Pod"), deletes(result)) == ([], [])
    assert world.job["status"]["state"] == "Running"


def test_a_waiting_job_relabelled_moves_its_workload_to_that_queue() -> None:
    world = queued_world()
    relabelled(world, "other")
    result = world.step()
    assert world.workload()["spec"]["queueName"] == "other"
    assert label_patches(result) == []
    assert creates(result, "Pod") == []
    queued = condition(world.job["status"], "Queued")
    assert queued is not None
    assert "LocalQueue other" in queued["message"]


def test_a_waiting_job_whose_label_is_taken_off_stays_queued() -> None:
    world = queued_world()
    relabelled(world, None)
    result = world.step()
    assert creates(result, "Pod") == []
    assert label_patches(result) == ["q"]
    assert world.workload()["spec"]["queueName"] == "q"
    assert world.job["status"]["phase"] == "Queued"


def more_gpus(world: QueueWorld) -> None:
    """The user edits the admitted job: its WORKER now asks for 4 GPUs."""
    worker = world.job["spec"]["replicaSpecs"][1]
    worker["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 4}}


def test_an_admitted_job_that_asks_for_more_is_requeued_and_runs_nothing_unadmitted() -> None:
    world = admitted_world()
    restarts = world.job["status"]["restartCount"]
    world.vanish("example-job-worker-0")  # a pod of the old template, gone
    more_gpus(world)
    result = world.step(graceful=True)
    assert creates(result, "Pod") == []
    assert deletes(result, "Pod") == sorted(set(PODS) - {"example-job-worker-0"})
    assert deletes(result, "Workload") == []  # its quota is held while its pods go
    status = world.job["status"]
    assert (status["phase"], status["reason"], status["restartCount"]) == (
        "Queued",
        "Requeued",
        restarts,
    )
    queued = condition(status, "Queued")
    assert queued is not None
    assert "ClusterQueue cq" in queued["message"]
    assert ("Warning", "Requeued") in events(result)
    for name in world.pods():
        world.vanish(name)
    assert deletes(world.step(), "Workload") == [WORKLOAD]
    result = world.step()
    [workload] = workload_creates(result)
    worker = next(ps for ps in workload["spec"]["podSets"] if ps["name"] == "worker")
    assert worker["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": 4}
    }
    assert creates(result, "Pod") == []
    world.workload()["status"] = {}
    assert creates(world.step(), "Pod") == []  # not before Kueue admits the new one
    world.admit()
    assert creates(world.step(), "Pod") == sorted(PODS)


def test_an_admitted_job_whose_edit_asks_for_the_same_resources_keeps_running() -> None:
    world = admitted_world()
    container = world.job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "NEW", "value": "1"}]
    result = world.step()
    assert (creates(result, "Pod"), deletes(result)) == ([], [])
    assert world.job["status"]["state"] == "Running"
    assert world.job["status"]["phase"] != "Queued"


# --- the end of the job --------------------------------------------------------


def test_a_job_that_succeeds_finishes_its_workload() -> None:
    world = admitted_world()
    world.exit("example-job-master-0", 0)
    result = world.step()
    assert world.job["status"]["state"] == "Succeeded"
    [written] = status_writes(result)
    finished = workload_condition(written, "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    assert status_writes(world.reconcile()) == []


def test_a_job_that_fails_finishes_its_workload() -> None:
    job = queued_tfjob()
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["restartPolicy"] = "Never"
    world = admitted_world(job)
    world.exit("example-job-master-0", 1)
    result = world.step()
    assert world.job["status"]["state"] == "Failed"
    [written] = status_writes(result)
    finished = workload_condition(written, "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Failed")


def test_a_finished_job_leaves_a_finished_workload_alone() -> None:
    world = admitted_world()
    world.exit("example-job-master-0", 0)
    world.set_conditions(("Finished", "True", "Succeeded"))
    assert status_writes(world.step()) == []


def test_suspending_a_queued_job_deletes_its_workload() -> None:
    world = queued_world()
    world.job["spec"]["runPolicy"] = {"suspend": True}
    result = world.step()
    assert deletes(result, "Workload") == [WORKLOAD]
    assert creates(result, "Pod") == []
    suspended = condition(world.job["status"], "Suspended")
    assert suspended is not None
    assert suspended["status"] == "True"


def test_suspending_an_admitted_job_deletes_its_pods_and_its_workload() -> None:
    world = admitted_world()
    world.job["spec"]["runPolicy"] = {"suspend": True}
    result = world.step()
    assert deletes(result, "Pod") == sorted(PODS)
    assert deletes(result, "Workload") == [WORKLOAD]


def test_a_resumed_job_queues_a_new_workload_and_is_no_longer_suspended() -> None:
    world = admitted_world()
    world.job["spec"]["runPolicy"] = {"suspend": True}
    world.step()
    assert (world.pods(), world.names("Workload")) == ([], [])
    world.job["spec"]["runPolicy"] = {"suspend": False}
    result = world.step()
    assert world.names("Workload") == [WORKLOAD]
    assert creates(result, "Pod") == []
    status = world.job["status"]
    assert status["phase"] == "Queued"
    suspended = condition(status, "Suspended")
    assert suspended is not None
    assert suspended["status"] == "False"
    admitted = condition(status, "Admitted")
    assert admitted is not None
    assert admitted["status"] == "False"


# --- elastic jobs, priorities, default queues ----------------------------------


@dataclass
class PaddleQueueWorld(QueueWorld, PaddleWorld):
    pass


def test_an_elastic_paddlejob_is_admitted_in_part() -> None:
    job = edl_example()
    job["metadata"]["labels"] = {QUEUE_LABEL: "q"}
    job["metadata"]["annotations"] = {"dlk8s.io/trainers": "6"}  # minInstance 2, maxInstance 6
    world = PaddleQueueWorld(job, config=PADDLE_CONFIG)
    world.step()
    [name] = world.names("Workload")
    assert name == f"paddlejob-example-{short_hash(job['metadata']['uid'], 5)}"
    sets = {ps["name"]: ps for ps in world.workload()["spec"]["podSets"]}
    assert (sets["trainer"]["count"], sets["trainer"]["minCount"]) == (6, 2)
    assert "minCount" not in sets["pserver"]
    world.workload()["status"] = {}
    world.admit({"trainer": 3})
    # The job's count follows the admission first, so its pods' environment agrees.
    result = world.step()
    assert creates(result, "Pod") == []
    [patch] = [a for a in result.actions if isinstance(a, Patch) and a.kind == "PaddleJob"]
    assert patch.patch["metadata"]["annotations"]["dlk8s.io/trainers"] == "3"
    assert "admitted by Kueue" in patch.patch["metadata"]["annotations"]["dlk8s.io/trainers-reason"]
    result = world.step()
    pods = {
        a.obj["metadata"]["name"]: a.obj
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == "Pod"
    }
    trainers = sorted(n for n in pods if "-trainer-" in n)
    assert trainers == ["example-trainer-0", "example-trainer-1", "example-trainer-2"]
    assert len([n for n in pods if "-pserver-" in n]) == 2
    env = {e["name"]: e.get("value") for e in pods[trainers[0]]["spec"]["containers"][0]["env"]}
    assert env["TRAINERS"] == "3"
    assert world.step().actions == [], "a job at rest sends nothing"


def test_a_workload_priority_class_gives_the_workload_its_priority() -> None:
    job = queued_tfjob()
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    facts = QueueFacts(workload_priorities={"high": 1000})
    [workload] = workload_creates(QueueWorld(job, facts=facts).reconcile())
    ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    assert workload["spec"]["priorityClassRef"] == ref
    assert workload["spec"]["priority"] == 1000


def test_a_missing_workload_priority_class_keeps_the_job_waiting() -> None:
    job = queued_tfjob()
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    result = QueueWorld(job, facts=QueueFacts(workload_priorities={"low": 10})).reconcile()
    assert (workload_creates(result), creates(result, "Pod")) == ([], [])
    queued = condition(result.status, "Queued")
    assert queued is not None
    assert queued["status"] == "False"
    assert "high" in queued["message"]
    assert "does not exist" in queued["message"]


def test_the_pods_priority_class_gives_the_workload_its_priority() -> None:
    job = queued_tfjob()
    for replica in job["spec"]["replicaSpecs"][:2]:
        replica["template"]["spec"]["priorityClassName"] = "batch"
    facts = QueueFacts(pod_priorities={"batch": 500, "other": 7})
    [workload] = workload_creates(QueueWorld(job, facts=facts).reconcile())
    ref = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch"}
    assert (workload["spec"]["priorityClassRef"], workload["spec"]["priority"]) == (ref, 500)


def test_the_default_priority_class_gives_the_workload_its_priority() -> None:
    facts = QueueFacts(pod_priorities={"usual": 3}, default_pod_priority="usual")
    [workload] = workload_creates(QueueWorld(queued_tfjob(), facts=facts).reconcile())
    ref = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "usual"}
    assert (workload["spec"]["priorityClassRef"], workload["spec"]["priority"]) == (ref, 3)


def test_a_namespace_with_a_default_local_queue_queues_its_jobs() -> None:
    world = QueueWorld(queued_tfjob(queue=None), facts=QueueFacts(default_queues=frozenset({"ns"})))
    result = world.step()
    [workload] = workload_creates(result)
    assert workload["spec"]["queueName"] == "default"
    assert creates(result, "Pod") == []
    [patch] = [a for a in result.actions if isinstance(a, Patch)]
    assert (patch.api_version, patch.kind, patch.name) == (
        "dlk8s.io/v1alpha1",
        "TFJob",
        "example-job",
    )
    assert patch.patch == {"metadata": {"labels": {QUEUE_LABEL: "default"}}}
    assert [a for a in world.reconcile().actions if isinstance(a, Patch)] == []


def test_a_namespace_without_a_default_local_queue_runs_its_jobs() -> None:
    world = QueueWorld(queued_tfjob(queue=None), facts=QueueFacts(default_queues=frozenset({"x"})))
    result = world.reconcile()
    assert workload_creates(result) == []
    assert creates(result, "Pod") == sorted(PODS)


def test_a_job_that_started_outside_a_queue_is_left_running() -> None:
    running = running_world()
    world = QueueWorld(running.job, facts=FACTS, children=running.children)
    world.job["metadata"]["labels"] = {QUEUE_LABEL: "q"}
    assert world.job["status"]["startTime"] == STAMP
    assert {c["type"] for c in world.job["status"]["conditions"]} & {"Queued", "Admitted"} == set()
    result = world.reconcile()
    assert workload_creates(result) == []
    assert deletes(result) == []
    assert result.status["phase"] == "Running"
