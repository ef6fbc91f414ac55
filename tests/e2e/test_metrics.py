"""/metrics during a burst: the work queue's figures and the jobs' lifecycle."""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from .helpers import apply, finish_pod, job_manifest, wait_for_state, wait_until

JOBS = 12


def samples(operator: OperatorProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(operator.metrics()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def one(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_during_a_burst(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    before = samples(operator)
    depths: list[float] = []
    stop = threading.Event()

    def watch_depth() -> None:  # sampled while the burst is worked off
        while not stop.wait(0.05):
            depths.append(one(samples(operator), "dlk8s_workqueue_depth"))

    sampler = threading.Thread(target=watch_depth, daemon=True)
    sampler.start()
    try:
        for i in range(JOBS):
            apply(cluster, namespace, job_manifest("TFJob", f"m{i}", {"MASTER": 1}, "tensorflow"))
        for i in range(JOBS):
            wait_for_state(cluster, namespace, "TFJob", f"m{i}", "Running")
        finish_pod(cluster, namespace, "m0-master-0", 0)
        finish_pod(cluster, namespace, "m1-master-0", 1)
        wait_for_state(cluster, namespace, "TFJob", "m0", "Succeeded")
        wait_for_state(cluster, namespace, "TFJob", "m1", "Failed")
        cluster.kubectl("delete", "tfjob", "m2", "-n", namespace, "--wait=true")
    finally:
        stop.set()
        sampler.join()

    def lifecycle(name: str) -> float:
        return one(samples(operator), name, kind="TFJob", namespace=namespace)

    wait_until(lambda: lifecycle("dlk8s_jobs_deleted_total") == 1, what="the deletion counted")
    assert lifecycle("dlk8s_jobs_created_total") == JOBS
    assert lifecycle("dlk8s_jobs_succeeded_total") == 1
    assert lifecycle("dlk8s_jobs_failed_total") == 1
    assert lifecycle("dlk8s_jobs_restarted_total") == 0

    after = samples(operator)
    grew = {
        name: one(after, name) - one(before, name)
        for name in (
            "dlk8s_workqueue_adds_total",
            "dlk8s_workqueue_queue_duration_seconds_count",
            "dlk8s_workqueue_work_duration_seconds_count",
        )
    }
    assert all(n >= JOBS for n in grew.values()), grew
    assert ("dlk8s_workqueue_longest_running_processor_seconds", ()) in after
    assert ("dlk8s_workqueue_retries_total", ()) in after
    # The queue had work waiting at some moment, and is empty once worked off.
    assert depths
    assert min(depths) >= 0
    wait_until(lambda: one(samples(operator), "dlk8s_workqueue_depth") == 0, what="empty queue")
