"""When a child's watch event runs its job's next pass: at once when it may
change the job's phase or state (job.urgency), after the batch when it only
moves counts, and not at all while the first lists fill the caches (every
job's own event queues it then)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dlk8s.runtime.apiresources import CHILD_RESOURCES
from dlk8s.runtime.controller import Controller, JobKey
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Cache, Informer

from ..support.controller import submitted
from ..support.fakes import RecordingKube, ScriptedListWatch
from ..support.worlds import CONFIG, NOW, PODS

KEY = JobKey("TFJob", "ns", "example-job")
MASTER, WORKER = PODS[0], PODS[1]


def batching(
    kube: RecordingKube, caches: dict[str, Cache], pool: ThreadPoolExecutor, **kw: Any
) -> Controller:
    return Controller(
        kube, CONFIG, caches, workers=0, clock=lambda: NOW, child_event_batch=60, pool=pool, **kw
    )


@pytest.fixture
def controller(
    kube: RecordingKube, job_caches: dict[str, Cache], api_pool: ThreadPoolExecutor
) -> Iterator[Controller]:
    made = batching(kube, job_caches, api_pool)
    yield made
    made.queue.shut_down()


def children(kube: RecordingKube) -> list[tuple[str, dict[str, Any]]]:
    """What the first pass created, as the watches deliver it (pods Pending)."""
    out = []
    for (plural, _, _), obj in sorted(kube.objects.items()):
        if plural in ("pods", "services", "configmaps"):
            if plural == "pods":
                obj = obj | {"status": {"phase": "Pending"}}
            out.append((plural, obj))
    return out


def pod(kube: RecordingKube, name: str, phase: str) -> dict[str, Any]:
    obj = copy.deepcopy(kube.objects[("pods", "ns", name)])
    obj["status"] = {"phase": phase}
    return obj


def created(controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]) -> None:
    """The job's first pass has run and the watches have shown all it created."""
    submitted(job_caches)
    controller.sync(KEY)
    for plural, obj in children(kube):
        controller.on_child(plural, ADDED)(obj)
    assert len(controller.queue) == 0  # counts only: batched


def ready(controller: Controller) -> int:
    """Keys queued for a pass now (not scheduled for later)."""
    return len(controller.queue)


def test_a_worker_starting_waits_for_the_batch(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    created(controller, kube, job_caches)
    controller.on_child("pods", MODIFIED)(pod(kube, WORKER, "Running"))
    assert ready(controller) == 0
    assert controller.queue.waiting == 1


def test_a_change_of_the_job_s_state_runs_the_pass_at_once(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    created(controller, kube, job_caches)
    controller.on_child("pods", DELETED)(pod(kube, WORKER, "Running"))
    assert ready(controller) == 1


def test_the_master_up_waits_a_little_for_the_other_pods_and_the_last_of_them_ends_the_wait(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    created(controller, kube, job_caches)
    controller.on_child("pods", MODIFIED)(pod(kube, MASTER, "Running"))
    assert (ready(controller), controller.queue.waiting) == (0, 1)
    others = [name for name in PODS if name != MASTER]
    for name in others[:-1]:
        controller.on_child("pods", MODIFIED)(pod(kube, name, "Running"))
        assert ready(controller) == 0
    controller.on_child("pods", MODIFIED)(pod(kube, others[-1], "Running"))
    assert ready(controller) == 1


def test_the_wait_for_the_other_pods_is_short_not_the_batch(
    kube: RecordingKube, job_caches: dict[str, Cache], api_pool: ThreadPoolExecutor
) -> None:
    waiting = batching(kube, job_caches, api_pool, siblings_wait=0.05)  # the batch: 60 s
    try:
        created(waiting, kube, job_caches)
        waiting.on_child("pods", MODIFIED)(pod(kube, MASTER, "Running"))
        assert ready(waiting) == 0
        assert waiting.queue.get(timeout=5) == KEY
    finally:
        waiting.queue.shut_down()


def test_an_urgent_change_waits_for_the_last_awaited_create_then_runs_at_once(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    controller.sync(KEY)
    delivered = children(kube)
    master = next(i for i, (_, obj) in enumerate(delivered) if obj["metadata"]["name"] == MASTER)
    controller.on_child("pods", ADDED)(delivered.pop(master)[1])
    controller.on_child("pods", MODIFIED)(pod(kube, MASTER, "Running"))
    assert ready(controller) == 0  # its pass would only wait for the other creates
    *first, (plural, last) = delivered
    for group, obj in first:
        controller.on_child(group, ADDED)(obj)
    assert ready(controller) == 0
    controller.on_child(plural, ADDED)(last)
    assert ready(controller) == 1


def test_the_echo_of_the_job_s_own_creates_runs_no_pass(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """The pass that created them decided on them as they show: the last
    echo scheduled one a batch later that found nothing to do."""
    created(controller, kube, job_caches)
    assert (ready(controller), controller.queue.waiting) == (0, 0)
    bound = pod(kube, WORKER, "Pending")
    bound["metadata"]["resourceVersion"] = "77"  # and spec.nodeName: not kept
    controller.on_child("pods", MODIFIED)(bound)
    assert (ready(controller), controller.queue.waiting) == (0, 0)


def test_our_creates_first_seen_running_in_a_list_run_the_job_s_pass(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """The pods' watch expired while the pass's pods came up (make chaos
    sigstop_compact): the list that follows shows them first Running,
    which the pass that created them never saw; the batch's pass writes it."""
    submitted(job_caches)
    controller.sync(KEY)
    for plural, obj in children(kube):
        if plural == "pods":
            obj = pod(kube, obj["metadata"]["name"], "Running")
        controller.on_child(plural, ADDED)(obj)
    assert (ready(controller), controller.queue.waiting) == (0, 1)


def test_a_pass_that_found_the_job_awaiting_its_creates_runs_when_the_last_shows(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    controller.sync(KEY)
    *first, (plural, last) = children(kube)
    for group, obj in first:
        controller.on_child(group, ADDED)(obj)
    assert controller.sync(KEY) > 1  # a change of the job: it waits, on a long timer
    assert ready(controller) == 0
    controller.on_child(plural, ADDED)(last)
    assert ready(controller) == 1


def test_child_events_of_the_first_lists_queue_nothing(
    kube: RecordingKube, job_caches: dict[str, Cache], api_pool: ThreadPoolExecutor
) -> None:
    informer = Informer(ScriptedListWatch([]), CHILD_RESOURCES["pods"])
    listing = batching(kube, job_caches, api_pool, informers=[informer])
    try:
        submitted(job_caches)
        listing.sync(KEY)
        for plural, obj in children(kube):
            listing.on_child(plural, ADDED)(obj)
        listing.on_child("pods", MODIFIED)(pod(kube, MASTER, "Running"))
        assert (ready(listing), listing.queue.waiting) == (0, 0)
        uid = job_caches["TFJob"].get_by_key("ns/example-job")["metadata"]["uid"]
        assert len(listing.children.observed(uid).pods) == 4  # the index is filled all the same
    finally:
        listing.queue.shut_down()


def test_the_event_of_our_own_status_write_queues_nothing_a_change_of_the_job_does(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    controller.sync(KEY)  # creates, and writes the status
    written = copy.deepcopy(kube.objects[("tfjobs", "ns", "example-job")])
    controller.on_job("TFJob")(written)
    assert (ready(controller), controller.queue.waiting) == (0, 0)
    changed = copy.deepcopy(written)
    changed["metadata"] |= {"resourceVersion": "9999", "generation": 2}
    controller.on_job("TFJob")(changed)
    assert ready(controller) == 1


def test_kueue_s_admission_runs_the_pass_before_the_jobs_queued_already(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """An admission lets the job create its pods: it goes ahead of a burst
    of other jobs' first passes."""
    created(controller, kube, job_caches)
    others = [JobKey("TFJob", "ns", f"other-{i}") for i in range(3)]
    for key in others:
        controller.queue.add(key)
    owner = copy.deepcopy(kube.objects[("pods", "ns", MASTER)]["metadata"]["ownerReferences"])
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "uid": "wl-uid", "ownerReferences": owner},
    }
    controller.on_child("workloads", ADDED)(workload)
    assert ready(controller) == 3, "a new Workload: its job's own pass follows"
    admitted = workload | {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    controller.on_child("workloads", MODIFIED)(admitted)
    served = [controller.queue.get(timeout=1) for _ in range(4)]
    assert served == [KEY, *others]


def test_a_deciding_pod_s_change_keeps_its_place_behind_the_jobs_queued_already(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """At once, but in turn: served first, such passes delayed the first
    passes of a burst's later jobs (make bench-kueue, all at once)."""
    created(controller, kube, job_caches)
    others = [JobKey("TFJob", "ns", f"other-{i}") for i in range(3)]
    for key in others:
        controller.queue.add(key)
    controller.on_child("pods", MODIFIED)(pod(kube, MASTER, "Running"))
    served = [controller.queue.get(timeout=1) for _ in range(4)]
    assert served == [*others, KEY]


def test_a_pod_being_deleted_meets_the_delete_s_expectation_and_its_pass_lets_it_go(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """A pod keeps the tracking finalizer (job.reconcile.tracking), so the
    delete shows as the pod terminating, not gone: waiting for it to go
    would hold the very pass that lets it go."""
    created(controller, kube, job_caches)
    failed = pod(kube, WORKER, "Failed")
    ended = {"exitCode": 1, "finishedAt": "2026-03-01T11:00:00Z"}  # its back-off is over
    failed["status"]["containerStatuses"] = [{"name": "tensorflow", "state": {"terminated": ended}}]
    failed["metadata"]["uid"] = kube.objects[("pods", "ns", WORKER)]["metadata"]["uid"]
    controller.on_child("pods", MODIFIED)(failed)
    controller.sync(KEY)
    assert ("delete", "pods", "ns", WORKER) in kube.writes()
    going = copy.deepcopy(failed)
    going["metadata"]["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    controller.on_child("pods", MODIFIED)(going)
    assert controller.child_events.hold(going["metadata"]["ownerReferences"][0]["uid"]) == 0
    controller.sync(KEY)
    assert ("patch", "pods", "ns", WORKER) in kube.writes()
