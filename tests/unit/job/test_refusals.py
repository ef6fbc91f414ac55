"""What the API server refuses shows in the job's status and events, and
nothing claims a create that did not happen (issue 14, defect 2).

The controller runs one pass against a recording fake of our own client
wrapper whose creates fail as the API server answers: Pod Security's 403,
an invalid pod's 422, strict field validation's 400.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dlk8s.job.actions import Create
from dlk8s.job.vocabulary import EventType, Reason
from dlk8s.runtime import executor
from dlk8s.runtime.controller import Controller
from dlk8s.runtime.errors import ApiError, api_error
from dlk8s.runtime.expectations import Expectations
from dlk8s.runtime.informer import Cache

from ..support.controller import FIRST_PASS, KEY, drain, retried, run_one, watch_catches_up
from ..support.fakes import RecordingKube, api_status
from ..support.worlds import NOW, PODS

# Every pass here is of the seed's TFJob, in its cache before the test starts.
pytestmark = pytest.mark.usefixtures("submitted_job")

MASTER = "example-job-master-0"


def forbidden(name: str) -> ApiError:
    message = (
        f'pods "{name}" is forbidden: violates PodSecurity "restricted:latest": '
        f'allowPrivilegeEscalation != false (container "tensorflow" must set '
        "securityContext.allowPrivilegeEscalation=false)"
    )
    return api_error(403, "Forbidden", api_status(403, "Forbidden", message))


def unknown_field(field: str) -> ApiError:
    message = (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        f'unknown field "{field}"'
    )
    return api_error(400, "Bad Request", api_status(400, "BadRequest", message))


def refuse(kube: RecordingKube, names: list[str], error: Any = forbidden) -> None:
    for name in names:
        kube.failures[("create", "pods", name)] = error(name)


def written_status(kube: RecordingKube) -> dict[str, Any]:
    return kube.objects[("tfjobs", "ns", "example-job")]["status"]


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def reasons(kube: RecordingKube) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in kube.events]


def test_a_refused_create_is_in_the_status_with_the_api_servers_words(
    controller: Controller, kube: RecordingKube
) -> None:
    refuse(kube, PODS)
    run_one(controller)
    status = written_status(kube)
    assert (status["state"], status["phase"], status["reason"]) == (
        "Running",
        "Creating",
        "FailedCreate",
    )
    created = condition(status, "Created")
    assert (created["status"], created["reason"]) == ("False", "FailedCreate")
    assert created["message"].startswith('pods "example-job-master-0" is forbidden: violates')
    assert (
        "3 more refused: example-job-worker-0, example-job-ps-0, example-job-ps-1"
        in (created["message"])
    )
    # No pod was created, so none is counted: the next pass must not take
    # them for lost pods (and count restarts against backoffLimit).
    assert all(r["replicasStates"] == {} for r in status["replicaStatuses"])
    assert status["restartCount"] == 0


def test_a_refused_job_is_retried_with_back_off(
    controller: Controller, kube: RecordingKube
) -> None:
    refuse(kube, [MASTER])
    assert run_one(controller) == ["error"]
    assert controller.queue.failures(KEY) == 1
    assert retried(controller)


def test_no_successful_create_event_names_a_refused_pod(
    controller: Controller, kube: RecordingKube, api_pool: ThreadPoolExecutor
) -> None:
    refuse(kube, [MASTER])
    run_one(controller)
    drain(api_pool)
    created = [e for e in kube.events if e["reason"] == Reason.CREATE]
    assert len(created) == 1
    assert f"pod {MASTER}" not in created[0]["message"]
    assert "pod example-job-worker-0" in created[0]["message"]
    [failed] = [e for e in kube.events if e["reason"] == "FailedCreate"]
    assert failed["type"] == EventType.WARNING
    assert failed["message"].startswith(f'pods "{MASTER}" is forbidden: violates PodSecurity')


def test_only_the_created_pods_are_counted(controller: Controller, kube: RecordingKube) -> None:
    refuse(kube, [MASTER, "example-job-ps-1"])
    run_one(controller)
    counted = {
        r["replicaType"]: r["replicasStates"] for r in written_status(kube)["replicaStatuses"]
    }
    assert counted == {"MASTER": {}, "WORKER": {"Pending": 1}, "PS": {"Pending": 1}}


def test_a_pod_refused_for_another_reason_is_not_counted_either(
    controller: Controller, kube: RecordingKube
) -> None:
    refuse(kube, [MASTER])
    kube.failures[("create", "pods", "example-job-worker-0")] = ApiError(500, "Server Error")
    run_one(controller)
    counted = {
        r["replicaType"]: r["replicasStates"] for r in written_status(kube)["replicaStatuses"]
    }
    assert counted == {"MASTER": {}, "WORKER": {}, "PS": {"Pending": 2}}


def test_the_job_recovers_by_itself_once_the_cause_is_gone(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    refuse(kube, PODS)
    run_one(controller)
    kube.failures.clear()  # the namespace's policy was relaxed
    for _ in range(3):
        watch_catches_up(controller, kube, job_caches)
        controller.sync(KEY)
    watch_catches_up(controller, kube, job_caches)
    status = written_status(kube)
    assert condition(status, "Created")["status"] == "True"
    assert status["reason"] == Reason.CREATING
    assert {
        r["replicaType"]: sum(r["replicasStates"].values()) for r in status["replicaStatuses"]
    } == {
        "MASTER": 1,
        "WORKER": 1,
        "PS": 2,
    }


def test_a_repeated_refusal_is_counted_on_one_event(
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
    api_pool: ThreadPoolExecutor,
) -> None:
    refuse(kube, PODS)
    for _ in range(3):
        with contextlib.suppress(ApiError):
            controller.sync(KEY)
        watch_catches_up(controller, kube, job_caches)
    drain(api_pool)
    failed = [e for e in kube.events if e["reason"] == "FailedCreate"]
    assert len(failed) == 1
    assert failed[0]["count"] == 3
    patches = [c for c in kube.calls if c[:2] == ("patch", "events")]
    assert len(patches) == 2


def test_an_unknown_template_field_fails_the_job_naming_it(
    controller: Controller, kube: RecordingKube, api_pool: ThreadPoolExecutor
) -> None:
    worker = "example-job-worker-0"
    kube.failures[("create", "pods", worker)] = unknown_field("spec.containers[0].resource")
    run_one(controller)
    drain(api_pool)
    status = written_status(kube)
    assert (status["state"], status["reason"]) == ("Failed", Reason.INVALID_SPEC)
    failed = condition(status, "Failed")
    assert (
        "unknown field spec.replicaSpecs[1].template.spec.containers[0].resource"
        in (failed["message"])
    )
    assert (EventType.WARNING, Reason.INVALID_SPEC) in reasons(kube)
    # A spec no retry can fix: the status write brings the job back for cleanup.
    assert controller.queue.failures(KEY) == 0
    assert not retried(controller)


def test_a_job_fully_created_writes_what_it_did_before(
    controller: Controller, kube: RecordingKube
) -> None:
    """Nothing refused: the pass is what it always was."""
    run_one(controller)
    assert sorted(kube.writes()) == FIRST_PASS
    assert "reason" in written_status(kube)
    assert written_status(kube)["reason"] == Reason.CREATING


def terminating(name: str) -> ApiError:
    message = f'pods "{name}" is forbidden: namespace ns is being terminated'
    body = api_status(403, "Forbidden", message)
    # as kube-apiserver sends it (tests/e2e/kinds/test_informer.py checks it does)
    cause = {"reason": "NamespaceTerminating", "field": "metadata.namespace"}
    body["details"] = {"causes": [cause]}
    return api_error(403, "Forbidden", body)


def pod_creates(kube: RecordingKube) -> list[tuple[str, ...]]:
    return [c for c in kube.calls if c[:2] == ("create", "pods")]


def test_other_refusals_do_not_stop_the_creates_of_the_pass(
    controller: Controller, kube: RecordingKube
) -> None:
    """The first pod refused (its own template's fault): the others are still tried."""
    refuse(kube, [MASTER])
    run_one(controller)
    assert len(pod_creates(kube)) == len(PODS)


def test_a_namespace_being_deleted_stops_the_creates_at_the_first_refusal(
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
) -> None:
    """Its teardown deletes the pods one by one, each a pass: one create is
    refused, then none is tried, and none of the passes is retried."""
    refuse(kube, PODS, error=terminating)
    assert run_one(controller) == ["terminal"]
    assert len(pod_creates(kube)) == 1
    assert not retried(controller)
    for _ in range(3):
        watch_catches_up(controller, kube, job_caches)
        assert run_one(controller) == ["terminal"]
    assert len(pod_creates(kube)) == 1
    assert not retried(controller)
    # Nor is a status written that would count pods never made.
    assert not [c for c in kube.calls if c[:2] == ("update", "tfjobs/status")]


def test_the_memory_of_jobs_in_deleted_namespaces_is_bounded(
    monkeypatch: pytest.MonkeyPatch, api_pool: ThreadPoolExecutor
) -> None:
    """The oldest is forgotten first; a forgotten job only tries one create again."""
    monkeypatch.setattr(executor, "MAX_DOOMED", 2)
    kube = RecordingKube()
    kube.failures[("create", "pods", "p")] = terminating("p")
    done = executor.Executor(kube, Expectations(), api_pool, lambda: NOW)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    for uid in ("a", "b", "c"):
        job = {"metadata": {"uid": uid, "namespace": "ns", "name": uid}}
        done.execute(job, [Create(pod), Create(pod)])
    creates = [c for c in kube.calls if c[:2] == ("create", "pods")]
    assert len(creates) == 3  # one each
    assert [done._is_doomed(uid) for uid in ("a", "b", "c")] == [False, True, True]
