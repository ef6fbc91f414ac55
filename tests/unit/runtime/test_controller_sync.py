"""One pass of the controller against recorded API actions, in the manner of
sample-controller's tests: the caches hold a world, a pass runs, and the
calls our client wrapper received are checked one by one."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from prometheus_client import REGISTRY

from dlk8s.job.api import EventType, Reason
from dlk8s.runtime import controller as controller_module
from dlk8s.runtime.controller import Controller, JobKey
from dlk8s.runtime.errors import ApiError, NamespaceTerminatingError, TransportError
from dlk8s.runtime.informer import ADDED, Cache

from ..support.fakes import RecordingKube
from ..support.worlds import CONFIGMAP, PODS, tfjob

KEY = JobKey("TFJob", "ns", "example-job")
FIRST_PASS = sorted(
    [("create", "pods", "ns", p) for p in PODS]
    + [("create", "services", "ns", p) for p in PODS]
    + [("create", "configmaps", "ns", CONFIGMAP), ("update", "tfjobs/status", "ns", "example-job")]
)


def submitted(job_caches: dict[str, Cache], **spec: Any) -> dict[str, Any]:
    """The seed's TFJob, as the job watch delivers it."""
    job = tfjob(**spec)
    job["metadata"]["resourceVersion"] = "1"
    job_caches["TFJob"].put("ns/example-job", job)
    return job


def watch_catches_up(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """Deliver what the fake API holds to the caches, as the watches would."""
    for (plural, _, name), obj in list(kube.objects.items()):
        if plural in ("pods", "services", "configmaps"):
            controller.on_child(plural, ADDED)(obj)
        elif plural == "tfjobs":
            job_caches["TFJob"].put(f"ns/{name}", obj)


def drain(pool: ThreadPoolExecutor) -> None:
    """Wait for the events a pass sent in the background."""
    pool.submit(lambda: None).result()
    pool.shutdown(wait=True)


def count(metric: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric, labels) or 0.0


def run_one(controller: Controller) -> None:
    controller.queue.add(KEY)
    assert controller.process_next(timeout=1)


def retried(controller: Controller) -> bool:
    """Whether the key comes back after its (first, 50 ms) back-off."""
    try:
        key = controller.queue.get(timeout=0.5)
    except TimeoutError:
        return False
    controller.queue.done(key)
    return key == KEY


def test_a_job_key_prints_as_kind_namespace_name() -> None:
    assert str(JobKey("TFJob", "ns", "j")) == "TFJob/ns/j"


def test_the_first_pass_creates_every_child_and_writes_the_status_once(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    assert controller.sync(KEY) is None
    assert sorted(kube.writes()) == FIRST_PASS


def test_events_of_one_pass_are_merged_into_one_per_reason(
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
    api_pool: ThreadPoolExecutor,
) -> None:
    submitted(job_caches)
    controller.sync(KEY)
    drain(api_pool)
    assert [(e["type"], e["reason"]) for e in kube.events] == [(EventType.NORMAL, Reason.CREATE)]
    message = kube.events[0]["message"]
    assert all(f"pod {p}" in message for p in PODS), message


def test_a_job_waits_for_the_caches_to_show_its_last_changes(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    controller.sync(KEY)
    before = list(kube.calls)
    wait = controller.sync(KEY)  # nothing delivered by the watches yet
    assert wait is not None
    assert 0 < wait <= 30
    assert kube.calls == before


def test_a_settled_job_costs_no_api_call(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    for _ in range(2):  # creates, then the status that counts them
        controller.sync(KEY)
        watch_catches_up(controller, kube, job_caches)
    before = len(kube.calls)
    controller.sync(KEY)
    assert kube.calls[before:] == []


def test_a_failing_create_retries_with_back_off_and_writes_no_status(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    kube.failures[("create", "example-job-worker-0")] = ApiError(500, "Internal Server Error")
    errors = count("dlk8s_reconcile_total", kind="TFJob", result="error")
    run_one(controller)
    # The other creates went out; the status, which would count the missing
    # pod as created, did not.
    assert sorted(kube.writes()) == [c for c in FIRST_PASS if c[0] != "update"]
    assert controller.queue.failures(KEY) == 1
    assert retried(controller)
    assert count("dlk8s_reconcile_total", kind="TFJob", result="error") == errors + 1


def test_a_name_taken_by_a_stranger_is_reported_and_retried(
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
    api_pool: ThreadPoolExecutor,
) -> None:
    submitted(job_caches)
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
    job_caches: dict[str, Cache],
    api_pool: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object) -> None:
        raise KeyError("replicaSpecs")

    monkeypatch.setattr(controller_module, "reconcile", broken)
    submitted(job_caches)
    bugs = count("dlk8s_reconcile_total", kind="TFJob", result="bug")
    errors = count("dlk8s_reconcile_errors_total", kind="TFJob")
    run_one(controller)
    drain(api_pool)
    assert kube.writes() == []
    assert [(e["type"], e["reason"]) for e in kube.events] == [
        (EventType.WARNING, Reason.INTERNAL_ERROR)
    ]
    assert "KeyError" in kube.events[0]["message"]
    assert count("dlk8s_reconcile_total", kind="TFJob", result="bug") == bugs + 1
    assert count("dlk8s_reconcile_errors_total", kind="TFJob") == errors + 1
    assert controller.queue.failures(KEY) == 1
    assert retried(controller)
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


def test_a_namespace_being_deleted_is_terminal_not_retried(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    refusal = NamespaceTerminatingError(403, "Forbidden", {})
    for name in PODS:
        kube.failures[("create", name)] = refusal
    terminal = count("dlk8s_reconcile_total", kind="TFJob", result="terminal")
    run_one(controller)
    assert ("update", "tfjobs/status", "ns", "example-job") not in kube.calls
    assert controller.queue.failures(KEY) == 0
    assert not retried(controller)
    assert count("dlk8s_reconcile_total", kind="TFJob", result="terminal") == terminal + 1


def test_pending_expectations_requeue_the_job_for_later(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    submitted(job_caches)
    controller.sync(KEY)
    later = count("dlk8s_reconcile_total", kind="TFJob", result="requeue_after")
    run_one(controller)
    assert count("dlk8s_reconcile_total", kind="TFJob", result="requeue_after") == later + 1
    assert controller.queue.waiting == 1
    assert controller.queue.failures(KEY) == 0


def test_a_deleted_job_is_a_success_without_calls(
    controller: Controller, kube: RecordingKube
) -> None:
    controller.queue.add(KEY)
    done = count("dlk8s_reconcile_total", kind="TFJob", result="success")
    assert controller.process_next(timeout=1)
    assert kube.calls == []
    assert count("dlk8s_reconcile_total", kind="TFJob", result="success") == done + 1


def test_an_unreachable_api_server_is_logged_once_per_job_not_per_retry(
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
    caplog: pytest.LogCaptureFixture,
) -> None:
    submitted(job_caches)
    for name in [*PODS, CONFIGMAP]:  # pods, their services and the configmap
        kube.failures[("create", name)] = TransportError("connection refused")
    caplog.set_level(logging.DEBUG, logger="dlk8s.runtime.controller")
    for _ in range(3):
        run_one(controller)
    failed = [r for r in caplog.records if r.getMessage() == "reconcile failed; retrying"]
    assert [r.levelno for r in failed] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert controller.queue.failures(KEY) == 3
