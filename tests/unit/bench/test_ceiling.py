"""The benchmark's ceiling (bench/common/ceiling.py): what it creates, and what a
job's end makes it delete, as the operator's reconcile says."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from bench.common import ceiling
from bench.common.harness import Submission, tfjob
from dlk8s.job.config import ControllerConfig

CONFIG = ControllerConfig()
SERVICES = "/api/v1/namespaces/ns/services"
PODS = "/api/v1/namespaces/ns/pods"
REPLICAS = ["x-master-0", "x-worker-0", "x-worker-1", "x-ps-0"]


def test_a_job_whose_pods_end_deletes_its_services_after_their_run() -> None:
    ending = ceiling.ending_of(tfjob("x", 2, 1, exit_code=0, run_duration="1m30s"), "ns", CONFIG)
    assert ending is not None
    assert ending.after == 90
    assert sorted(ending.deletes) == sorted((SERVICES, name) for name in REPLICAS)


def test_the_cleanup_policy_says_what_the_end_deletes() -> None:
    kept = ceiling.ending_of(tfjob("x", 2, 1, exit_code=0, clean_pod_policy="None"), "ns", CONFIG)
    everything = ceiling.ending_of(
        tfjob("x", 2, 1, exit_code=0, run_duration="5s", clean_pod_policy="All"), "ns", CONFIG
    )
    assert kept is not None
    assert kept.deletes == ()
    assert everything is not None
    assert everything.after == 5
    expected = {(PODS, name) for name in REPLICAS} | {(SERVICES, name) for name in REPLICAS}
    assert set(everything.deletes) == expected


def test_a_job_whose_pods_never_end_has_no_ending() -> None:
    assert ceiling.ending_of(tfjob("x", 2, 1), "ns", CONFIG) is None


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("1m30s", 90), ("500ms", 0.5)])
def test_go_durations(text: str, seconds: float) -> None:
    assert ceiling.go_seconds(text) == seconds


@pytest.mark.parametrize("text", ["60", "1x", "s", "1m 2s"])
def test_what_is_not_a_go_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        ceiling.go_seconds(text)


class FakeApi:
    """bench/measure.Api's request: creates answer with a uid, deletes with 200."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        sent = json.loads(body) if body else {}
        with self.lock:
            self.calls.append((method, path, sent))
        if method == "POST":
            name = sent["metadata"]["name"]
            meta = {"name": name, "uid": f"uid-of-{sent['kind']}-{name}"}
            return 201, json.dumps({"metadata": meta}).encode()
        return 200, b"{}"

    def of(self, method: str) -> list[tuple[str, str, dict[str, Any]]]:
        with self.lock:
            return [call for call in self.calls if call[0] == method]


def _run(jobs: list[dict[str, Any]], wait: float) -> FakeApi:
    api = FakeApi()
    made = ceiling.Ceiling(api, "ns", jobs, CONFIG, parallelism=4)  # type: ignore[arg-type]
    for i, job in enumerate(jobs):
        made.then(Submission(job["metadata"]["name"], uid=f"job-uid-{i}"))
    made.wait_created()
    time.sleep(wait)
    made.stop()
    return api


def test_the_end_deletes_each_service_guarded_by_the_uid_its_create_returned() -> None:
    api = _run([tfjob("x", 2, 1, exit_code=0, run_duration="100ms")], wait=0.3)
    assert len(api.of("POST")) == 8
    deletes = api.of("DELETE")
    assert sorted(path for _, path, _ in deletes) == sorted(f"{SERVICES}/{n}" for n in REPLICAS)
    for _, path, options in deletes:
        name = path.rsplit("/", 1)[1]
        assert options["preconditions"] == {"uid": f"uid-of-Service-{name}"}
        assert options["propagationPolicy"] == "Background"


def test_an_end_not_yet_due_when_the_run_stops_is_not_sent() -> None:
    jobs = [
        tfjob("x", 2, 1, exit_code=0, run_duration="50ms"),
        tfjob("y", 2, 1, exit_code=0, run_duration="1m"),
    ]
    api = _run(jobs, wait=0.3)
    assert len(api.of("POST")) == 16
    assert {path.rsplit("/", 1)[1] for _, path, _ in api.of("DELETE")} == set(REPLICAS)
