"""make bench's account of where the control plane's time goes
(bench/common/servercosts.py): the profile's kinds of work, what each status write
changed, and the medians of repeated runs."""

from __future__ import annotations

from typing import Any

from bench.common import servercosts

SEPARATOR = "-----------+-------------------------------------------------------"
# `go tool pprof -traces` of three samples: a custom resource's status write
# with a CEL rule on its stack, a pod's create, and the Go collector.
TRACES = f"""File: kube-apiserver
Type: cpu
{SEPARATOR}
     30ms   github.com/google/cel-go/interpreter.(*evalOr).Eval
            k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update
            k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update
{SEPARATOR}
     20ms   encoding/json.(*decodeState).object
            k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Create
{SEPARATOR}
     1.5s   runtime.gcBgMarkWorker
{SEPARATOR}
"""


def test_a_sample_counts_for_every_kind_of_work_on_its_stack() -> None:
    total, kinds = servercosts.traces_by_kind(TRACES)
    assert total == 1.55
    assert kinds == {
        "creates (storage)": 0.02,
        "updates and patches (storage)": 0.03,
        "custom resources' status writes": 0.03,
        "CEL": 0.03,
        "JSON decode": 0.02,
        "garbage collection (Go)": 1.5,
    }


def status(phase: str, running: int, conditions: int = 0) -> dict[str, Any]:
    return {"phase": phase, "runningPods": running, "conditions": [{}] * conditions}


def test_status_writes_are_told_apart_by_what_they_changed() -> None:
    jobs = {
        "a": {"statuses": [{}, status("Creating", 0, 1), status("Running", 4, 2)]},
        "b": {"statuses": [{}, status("Creating", 0), status("Running", 3), status("Running", 4)]},
        "c": {},  # never written
    }
    assert servercosts.status_changes(jobs) == {
        "writes": 5,
        "per_job": 1.67,
        "jobs_by_writes": {"0": 1, "2": 1, "3": 1},
        "by_change": {
            "phase - -> Creating": 2,
            "phase Creating -> Running": 2,
            "same phase: runningPods": 1,
        },
    }


def test_each_cost_figure_is_the_median_of_the_runs_an_absent_one_counting_as_none() -> None:
    runs = [
        {"apiserver_profile": {"cpu_seconds": 9.0, "by_kind": {"CEL": 0.4}}},
        {"apiserver_profile": {"cpu_seconds": 7.0, "by_kind": {}}},
        {"apiserver_profile": {"cpu_seconds": 8.0, "by_kind": {"CEL": 0.2}}},
    ]
    assert servercosts.median_costs(runs) == {"profile|all": 8.0, "profile|CEL": 0.2}


def test_metrics_are_summed_by_the_labels_that_tell_requests_apart() -> None:
    page = "\n".join(
        [
            'apiserver_watch_events_total{group="",resource="pods",version="v1"} 5',
            'apiserver_watch_events_total{group="",resource="pods",version="v2"} 2',
            'apiserver_request_total{verb="GET"} 99',  # not a kept family
        ]
    )
    parsed = servercosts._parse(page, servercosts.APISERVER_FAMILIES)
    assert dict(parsed) == {"apiserver_watch_events_total|resource=pods": 7.0}
    before = parsed.copy()
    parsed["apiserver_watch_events_total|resource=pods"] += 3
    assert servercosts.Metrics.since(before, parsed) == {
        "apiserver_watch_events_total|resource=pods": 3.0
    }
