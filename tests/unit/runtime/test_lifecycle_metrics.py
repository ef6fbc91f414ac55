"""The jobs' lifecycle counters follow the transitions of the status writes."""

from __future__ import annotations

from prometheus_client import REGISTRY

from dlk8s.runtime import metrics


def value(name: str, namespace: str) -> float:
    return REGISTRY.get_sample_value(name, {"kind": "TFJob", "namespace": namespace}) or 0.0


def test_counted_once_per_transition_whatever_the_number_of_writes() -> None:
    ns = "lifecycle-test"
    running = {"runtimeId": "r", "state": "Running", "restartCount": 0}
    metrics.count_transition("TFJob", ns, {}, running)
    metrics.count_transition("TFJob", ns, running, running | {"phase": "Running"})
    restarted = running | {"restartCount": 2}
    metrics.count_transition("TFJob", ns, running, restarted)
    done = restarted | {"state": "Succeeded"}
    metrics.count_transition("TFJob", ns, restarted, done)
    metrics.count_transition("TFJob", ns, done, done | {"phase": "Done"})
    assert value("dlk8s_jobs_created_total", ns) == 1
    assert value("dlk8s_jobs_restarted_total", ns) == 2
    assert value("dlk8s_jobs_succeeded_total", ns) == 1
    assert value("dlk8s_jobs_failed_total", ns) == 0
