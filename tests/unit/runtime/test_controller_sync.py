"""One pass of the controller against recorded API actions, in the manner of
sample-controller's tests: the caches hold a world, a pass runs, and the
calls our client wrapper received are checked one by one."""

from __future__ import annotations

import copy
import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from dlk8s.job.vocabulary import EventType, Reason
from dlk8s.runtime import controller as controller_module
from dlk8s.runtime.controller import Controller, JobKey
from dlk8s.runtime.errors import ApiError, NamespaceTerminatingError, TransportError
from dlk8s.runtime.informer import ADDED, MODIFIED, Cache

from ..support.controller import (
    FIRST_PASS,
    KEY,
    count,
    drain,
    pod_starts,
    retried,
    run_one,
    watch_catches_up,
)
from ..support.fakes import RecordingKube
from ..support.worlds import CONFIGMAP, PODS, address

# Every pass here is of the seed's TFJob, in its cache before the test starts.
pytestmark = pytest.mark.usefixtures("submitted_job")


def test_a_job_key_prints_as_kind_namespace_name() -> None:
    assert str(JobKey("TFJob", "ns", "j")) == "TFJob/ns/j"


def test_the_first_pass_creates_every_child_and_writes_the_status_once(
    controller: Controller, kube: RecordingKube
) -> None:
    assert controller.sync(KEY) is None
    assert sorted(kube.writes()) == FIRST_PASS


def test_events_of_one_pass_are_merged_into_one_per_reason(
    controller: Controller, kube: RecordingKube, api_pool: ThreadPoolExecutor
) -> None:
    controller.sync(KEY)
    drain(api_pool)
    assert [(e["type"], e["reason"]) for e in kube.events] == [(EventType.NORMAL, Reason.CREATE)]
    message = kube.events[0]["message"]
    assert all(f"pod {p}" in message for p in PODS), message


def test_a_job_waits_for_the_caches_to_show_its_last_changes(
    controller: Controller, kube: RecordingKube, api_pool: ThreadPoolExecutor
) -> None:
    controller.sync(KEY)
    drain(api_pool)  # the first pass's event is posted from the pool, later
    before = list(kube.calls)
    wait = controller.sync(KEY)  # nothing delivered by the watches yet
    assert wait is not None
    assert 0 < wait <= 30
    assert kube.calls == before


def test_pods_given_addresses_get_their_services_and_no_status_write(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    controller.sync(KEY)
    watch_catches_up(controller, kube, job_caches)
    for name in PODS[:3]:  # still Pending: the counts do not move
        pod = kube.objects[("pods", "ns", name)]
        pod["status"] = {"phase": "Pending", "podIP": address()}
        controller.on_child("pods", MODIFIED)(pod)
    before = len(kube.calls)
    assert controller.sync(KEY) is None
    after = [c for c in kube.calls[before:] if c[1] != "events"]
    assert sorted(after) == sorted(("create", "services", "ns", p) for p in PODS[:3])


def test_a_settled_job_costs_no_api_call(
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
    api_pool: ThreadPoolExecutor,
) -> None:
    for _ in range(2):  # creates, then the status that counts them
        controller.sync(KEY)
        watch_catches_up(controller, kube, job_caches)
    drain(api_pool)  # the first pass's event is posted from the pool, later
    before = len(kube.calls)
    controller.sync(KEY)
    assert kube.calls[before:] == []


def test_a_failing_create_retries_with_back_off_and_writes_no_status(
    controller: Controller, kube: RecordingKube
) -> None:
    kube.failures[("create", "example-job-worker-0")] = ApiError(500, "Internal Server Error")
    assert run_one(controller) == ["error"]
    # The other creates went out; the status, which would count the missing
    # pod as created, did not.
    assert sorted(kube.writes()) == [c for c in FIRST_PASS if c[0] != "update"]
    assert controller.queue.failures(KEY) == 1
    assert retried(controller)


def test_a_name_taken_by_a_stranger_is_reported_and_retried(
    controller: Controller, kube: RecordingKube, api_pool: ThreadPoolExecutor
) -> None:
    stray = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "example-job-ps-0"}}
    kube.objects[("pods", "ns", "example-job-ps-0")] = stray
    run_one(controller)
    drain(api_pool)
    assert ("update", "tfjobs/status", "ns", "example-job") not in kube.calls
    assert ("get", "pods", "ns", "example-job-ps-0") in kube.calls
    taken = [e for e in kube.events if e["reason"] == Reason.NAME_TAKEN]
    assert [e["type"] for e in taken] == [EventType.WARNING]
    assert "Pod example-job-ps-0 already exists" in taken[0]["message"]
    assert controller.queue.failures(KEY) == 1


def test_a_bug_in_reconcile_is_reported_counted_and_retried(
    controller: Controller,
    kube: RecordingKube,
    api_pool: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object) -> None:
        raise KeyError("replicaSpecs")

    monkeypatch.setattr(controller_module, "reconcile", broken)
    errors = count("dlk8s_reconcile_errors_total", kind="TFJob")
    assert run_one(controller) == ["bug"]
    drain(api_pool)
    assert kube.writes() == []
    assert [(e["type"], e["reason"]) for e in kube.events] == [
        (EventType.WARNING, Reason.INTERNAL_ERROR)
    ]
    assert "KeyError" in kube.events[0]["message"]
    assert count("dlk8s_reconcile_errors_total", kind="TFJob") == errors + 1
    assert controller.queue.failures(KEY) == 1
    assert retried(controller)
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


def test_a_namespace_being_deleted_is_terminal_not_retried(
    controller: Controller, kube: RecordingKube
) -> None:
    refusal = NamespaceTerminatingError(403, "Forbidden", {})
    for name in PODS:
        kube.failures[("create", name)] = refusal
    assert run_one(controller) == ["terminal"]
    assert ("update", "tfjobs/status", "ns", "example-job") not in kube.calls
    assert controller.queue.failures(KEY) == 0
    assert not retried(controller)


def test_pending_expectations_requeue_the_job_for_later(
    controller: Controller, kube: RecordingKube
) -> None:
    controller.sync(KEY)
    assert run_one(controller) == ["requeue_after"]
    assert controller.queue.waiting == 1
    assert controller.queue.failures(KEY) == 0


def test_a_deleted_job_is_a_success_without_calls(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    job_caches["TFJob"].put("ns/example-job", None)  # its watch saw it deleted
    assert run_one(controller) == ["success"]
    assert kube.calls == []


def test_an_unreachable_api_server_is_logged_once_per_job_not_per_retry(
    controller: Controller,
    kube: RecordingKube,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in [*PODS, CONFIGMAP]:  # pods, their services and the configmap
        kube.failures[("create", name)] = TransportError("connection refused")
    caplog.set_level(logging.DEBUG, logger="dlk8s.runtime.controller")
    for _ in range(3):
        run_one(controller)
    failed = [r for r in caplog.records if r.getMessage() == "reconcile failed; retrying"]
    assert [r.levelno for r in failed] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert controller.queue.failures(KEY) == 3


def test_a_failing_delete_still_writes_the_status_then_retries(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """Only a failed create holds the status back (it would count a pod that
    is not there); a delete that fails, like a Workload status write while
    Kueue's webhook is away, must not keep the job's status from moving."""
    controller.sync(KEY)
    watch_catches_up(controller, kube, job_caches)
    stray = copy.deepcopy(kube.objects[("pods", "ns", "example-job-worker-0")])
    stray["metadata"]["name"] = "example-job-worker-9"
    stray["metadata"]["labels"]["dlk8s.io/replica-index"] = "9"
    stray["metadata"]["uid"] = "uid-stray"
    controller.on_child("pods", ADDED)(stray)
    pod_starts(controller, kube, "example-job-worker-0")  # the status has news to write
    kube.failures[("delete", "example-job-worker-9")] = ApiError(500, "Internal Server Error")
    before = len(kube.calls)
    assert run_one(controller) == ["error"]
    after = kube.calls[before:]
    assert ("delete", "pods", "ns", "example-job-worker-9") in after
    assert ("update", "tfjobs/status", "ns", "example-job") in after
    assert controller.queue.failures(KEY) == 1


def test_a_pod_the_pass_deletes_loses_our_finalizer_just_before_its_delete(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """Its end is acted on by that pass (job.reconcile.tracking): the delete
    must not wait on our own finalizer for another pass."""
    controller.sync(KEY)
    watch_catches_up(controller, kube, job_caches)
    stray = copy.deepcopy(kube.objects[("pods", "ns", "example-job-worker-0")])
    stray["metadata"] |= {"name": "example-job-worker-9", "uid": "uid-stray"}
    stray["metadata"]["labels"]["dlk8s.io/replica-index"] = "9"
    controller.on_child("pods", ADDED)(stray)
    before = len(kube.calls)
    run_one(controller)
    mine = [c for c in kube.calls[before:] if c[3] == "example-job-worker-9"]
    assert mine == [
        ("patch", "pods", "ns", "example-job-worker-9"),
        ("delete", "pods", "ns", "example-job-worker-9"),
    ]


def test_a_restart_whose_caches_lag_writes_no_restart_for_a_pod_that_is_there(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """A new process's first pass, its pod cache behind the API server: the
    status counts a pod the cache does not show, which the pass would take
    for lost. Its create finds the job's own pod: no status is written (it
    would say restartCount 1), and the pass comes again."""
    controller.sync(KEY)  # the pods, and a status that counts them
    watch_catches_up(controller, kube, job_caches)
    counted = copy.deepcopy(kube.objects[("tfjobs", "ns", "example-job")])
    caches = {kind: Cache() for kind in job_caches}
    with ThreadPoolExecutor(2) as pool:
        restarted = Controller(
            kube, controller.config, caches, workers=0, clock=controller.clock,
            child_event_batch=0, pool=pool,
        )  # fmt: skip
        caches["TFJob"].put("ns/example-job", counted)
        for name in PODS[1:]:  # the cache does not show the first pod yet
            restarted.on_child("pods", ADDED)(kube.objects[("pods", "ns", name)])
        before = len(kube.calls)
        assert restarted.sync(KEY) == controller_module.STALE_RETRY_SECONDS
        after = kube.calls[before:]
        restarted.queue.shut_down()
    assert ("create", "pods", "ns", PODS[0]) in after
    assert ("update", "tfjobs/status", "ns", "example-job") not in after
    job = kube.objects[("tfjobs", "ns", "example-job")]
    assert job["status"].get("restartCount", 0) == 0, job["status"]
