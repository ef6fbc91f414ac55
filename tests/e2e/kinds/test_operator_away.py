"""What happens to pods while no operator runs is judged when it returns
(issue 49; job.reconcile.tracking, docs/kinds.md).

Every pod carries the operator's tracking finalizer, so a pod deleted while
the operator is stopped stays, Terminating, with its last state. Two jobs,
the operator stopped meanwhile: one WORKER exits 42, which a podFailurePolicy
rule makes fatal, and is deleted; another is evicted (a drain). Back, the
operator fails the first job by its rule rather than recreating a pod it
would have counted as vanished, recreates the second without counting a
restart, and lets both pods go.
"""

from __future__ import annotations

from typing import Any

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from ..helpers import (
    apply,
    evict,
    finish_pod,
    get_json,
    get_or_none,
    job_manifest,
    temporary_namespace,
    wait_for_phase,
    wait_for_pods,
    wait_for_state,
    wait_until,
)

FATAL, EVICTED = "away-fatal", "away-evicted"
FINALIZER = "dlk8s.io/job-tracking"


def tfjob(name: str, **spec: Any) -> dict[str, Any]:
    return job_manifest("TFJob", name, {"MASTER": 1, "WORKER": 1}, "tensorflow", **spec)


def kept_terminating(cluster: LocalCluster, ns: str, pod: str) -> dict[str, Any]:
    """The pod, deleted and confirmed by its kubelet, kept by our finalizer alone."""
    found = get_json(cluster, "pod", pod, "-n", ns)
    assert found["metadata"].get("deletionTimestamp"), found["metadata"]
    assert found["metadata"].get("finalizers") == [FINALIZER], found["metadata"]
    return found


def test_a_failure_and_a_disruption_while_the_operator_is_stopped_count_when_it_returns(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    fatal = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}
    apply(cluster, namespace, tfjob(FATAL, runPolicy={"podFailurePolicy": {"rules": [fatal]}}))
    apply(cluster, namespace, tfjob(EVICTED))
    for job in (FATAL, EVICTED):
        wait_for_pods(cluster, namespace, job, {f"{job}-master-0", f"{job}-worker-0"})
        wait_for_phase(cluster, namespace, "TFJob", job, "Running")
    evicted_uid = get_json(cluster, "pod", f"{EVICTED}-worker-0", "-n", namespace)["metadata"][
        "uid"
    ]
    operator.stop()
    try:
        finish_pod(cluster, namespace, f"{FATAL}-worker-0", 42)
        wait_until(
            lambda: (
                get_json(cluster, "pod", f"{FATAL}-worker-0", "-n", namespace)["status"].get(
                    "phase"
                )
                == "Failed"
            ),
            what="the WORKER to fail",
        )
        cluster.kubectl("delete", "pod", f"{FATAL}-worker-0", "-n", namespace, "--wait=false")
        evict(cluster, namespace, f"{EVICTED}-worker-0")
        for job in (FATAL, EVICTED):
            wait_until(
                lambda j=job: (
                    get_or_none(cluster, "pod", f"{j}-worker-0", "-n", namespace)
                    and kept_terminating(cluster, namespace, f"{j}-worker-0")
                ),
                what=f"{job}-worker-0 deleted",
            )
    finally:
        operator.start()
    status = wait_for_state(cluster, namespace, "TFJob", FATAL, "Failed")
    assert status["reason"] == "PodFailurePolicy", status
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert "exited with code 42" in failed["message"], status
    # The evicted WORKER comes back without a restart counted; its old pod goes.
    wait_until(
        lambda: (
            (p := get_or_none(cluster, "pod", f"{EVICTED}-worker-0", "-n", namespace))
            and p["metadata"]["uid"] != evicted_uid
        ),
        timeout=60,
        what=f"{EVICTED}-worker-0 recreated",
    )
    status = get_json(cluster, "tfjob", EVICTED, "-n", namespace)["status"]
    assert status.get("restartCount", 0) == 0, status
    [uncounted] = status["uncountedRestarts"]
    assert (uncounted["uid"], uncounted["reason"]) == (evicted_uid, "EvictionByEvictionAPI")
    wait_until(
        lambda: get_or_none(cluster, "pod", f"{FATAL}-worker-0", "-n", namespace) is None,
        what=f"{FATAL}-worker-0 let go",
    )


def test_an_operator_uninstalled_lets_go_of_every_pod(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    """`helm uninstall` deletes the operator's Deployment, then its pods: as
    it stops, an operator that finds its Deployment gone removes the
    finalizer from every pod, so that no later delete waits on it. (Stopped
    with its Deployment there, as in the test above, it keeps them.)"""
    apply(cluster, namespace, tfjob("left"))
    wait_for_pods(cluster, namespace, "left", {"left-master-0", "left-worker-0"})
    # A stand-in for the chart's Deployment, which the other tests need.
    labels = {"app": "stand-in"}
    container = {"name": "operator", "image": "operator:1"}
    apply(cluster, namespace, {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "stand-in"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    })  # fmt: skip
    operator.stop()
    env = {"DLK8S_DEPLOYMENT": f"{namespace}/stand-in"}
    uninstalled = OperatorProcess(operator.install, name="uninstalled", env=env).start()
    try:
        cluster.kubectl("delete", "deployment", "stand-in", "-n", namespace)
    finally:
        assert uninstalled.stop() == 0, uninstalled.tail()
        operator.start()
    for name in ("left-master-0", "left-worker-0"):
        pod = get_json(cluster, "pod", name, "-n", namespace)
        assert FINALIZER not in pod["metadata"].get("finalizers", []), pod["metadata"]
    assert "uninstalled: the pods' tracking finalizer removed" in uninstalled.tail(100_000)


def test_a_namespace_deleted_while_its_job_runs_goes(
    cluster: LocalCluster, operator: OperatorProcess
) -> None:
    """The namespace deletes its pods first and its jobs only once they are
    gone (ordered namespace deletion, GA in Kubernetes 1.34): the operator
    lets the pods go though their job is still there."""
    with temporary_namespace(cluster) as ns:
        apply(cluster, ns, tfjob("doomed"))
        wait_for_phase(cluster, ns, "TFJob", "doomed", "Running")
    wait_until(
        lambda: get_or_none(cluster, "namespace", ns) is None,
        timeout=60,
        what=f"namespace {ns} gone",
    )


def test_an_operator_whose_deployment_was_never_there_keeps_the_finalizers(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    """A --deployment that names nothing at start-up would make every stop
    look like an uninstall: the operator says so and keeps the finalizers."""
    apply(cluster, namespace, tfjob("kept"))
    wait_for_pods(cluster, namespace, "kept", {"kept-master-0", "kept-worker-0"})
    operator.stop()
    env = {"DLK8S_DEPLOYMENT": f"{namespace}/never-there"}
    misnamed = OperatorProcess(operator.install, name="misnamed", env=env).start()
    try:
        wait_for_phase(cluster, namespace, "TFJob", "kept", "Running")
    finally:
        assert misnamed.stop() == 0, misnamed.tail()
        operator.start()
    for name in ("kept-master-0", "kept-worker-0"):
        pod = get_json(cluster, "pod", name, "-n", namespace)
        assert pod["metadata"].get("finalizers") == [FINALIZER], pod["metadata"]
    log = misnamed.tail(100_000)
    assert "the Deployment named by --deployment is not there" in log
    assert "uninstalled: the pods' tracking finalizer removed" not in log
