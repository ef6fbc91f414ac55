"""/metrics during a burst: the work queue's figures and the jobs' lifecycle;
and who may read them (issue 44): the operator asks this kube-apiserver
(TokenReview, SubjectAccessReview), the probes answer on their own port, and
idle connections to the metrics port neither reach the probes nor stay."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from dlk8s.runtime.serving import IO_TIMEOUT
from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install, OperatorProcess

from ..helpers import apply, finish_pod, get_json, job_manifest, wait_for_state, wait_until

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


def token_of(cluster: LocalCluster, namespace: str, account: str) -> str:
    cluster.kubectl("create", "serviceaccount", account, "-n", namespace)
    return cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()


def metrics_reader(cluster: LocalCluster, install: Install) -> str:
    """The chart's ClusterRole for scrapers, found by its labels."""
    selector = f"app.kubernetes.io/instance={install.release},app.kubernetes.io/component=metrics"
    roles = get_json(cluster, "clusterroles", "-l", selector)["items"]
    [name] = [r["metadata"]["name"] for r in roles if r["metadata"]["name"].endswith("-reader")]
    return str(name)


def test_metrics_answer_only_whom_the_api_server_allows(
    cluster: LocalCluster, namespace: str, install: Install, operator: OperatorProcess
) -> None:
    stranger = token_of(cluster, namespace, "stranger")
    scraper = token_of(cluster, namespace, "scraper")
    binding, role = f"scraper-{namespace}", metrics_reader(cluster, install)
    cluster.kubectl(
        "create", "clusterrolebinding", binding, f"--clusterrole={role}",
        f"--serviceaccount={namespace}:scraper",
    )  # fmt: skip
    try:
        assert operator.get("/metrics", token="")[0] == 401
        assert operator.get("/metrics", token="not-a-token")[0] == 401
        assert operator.get("/metrics", token=stranger) == (403, "Forbidden\n")
        code, text = operator.get("/metrics", token=scraper)
        assert code == 200
        assert "dlk8s_workqueue_depth" in text
    finally:
        cluster.kubectl("delete", "clusterrolebinding", binding)


def test_probes_answer_on_their_own_port(operator: OperatorProcess) -> None:
    assert operator.get("/healthz") == (200, "ok\n")
    assert operator.get("/readyz") == (200, "ok\n")
    assert operator.get("/metrics")[0] == 200  # as the cluster's admin
    # Neither port serves the other's paths.
    assert operator.get("/metrics/../healthz")[0] == 404
    plain = b"GET /metrics HTTP/1.0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", operator.probe_port), timeout=5) as conn:
        conn.sendall(plain)
        assert conn.recv(64).startswith(b"HTTP/1.0 404")


def test_idle_connections_to_the_metrics_port_do_not_stop_the_liveness_probe(
    operator: OperatorProcess,
) -> None:
    idle = [socket.create_connection(("127.0.0.1", operator.port), timeout=5) for _ in range(200)]
    opened = time.monotonic()
    try:
        # The kubelet's probe, several times while all 200 are open.
        while time.monotonic() - opened < IO_TIMEOUT / 2:
            assert operator.get("/healthz") == (200, "ok\n")
            time.sleep(0.5)
        # Idle clients are dropped: the metrics answer again with the 200
        # still open on our side, and the operator has closed every one.
        wait_until(lambda: operator.get("/metrics")[0] == 200, 3 * IO_TIMEOUT, "/metrics again")
        for conn in idle:
            conn.settimeout(3 * IO_TIMEOUT)
            assert conn.recv(1) == b"", "an idle connection the operator kept"
    finally:
        for conn in idle:
            conn.close()
