"""What ends a job, on kwok (docs/kinds.md "What ends a job", issue 30):
pods evicted through the Eviction API or by `kubectl drain` are recreated
without counting a restart and the status says why; podFailurePolicy's
FailJob and Ignore rules; a TFJob whose WORKER failed for good while its
MASTER succeeded, under the default success policy and the seeds' rule.

The operator runs as a local process with the chart's RBAC (conftest's
`operator`); kwok ends a pod's containers with the exit code of its
annotation (helpers.finish_pod).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster

from ..helpers import (
    apply,
    condition,
    evict,
    finish_pod,
    get_json,
    job_manifest,
    job_status,
    pods_of,
    wait_for_pods,
    wait_for_replacement,
    wait_for_state,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("operator")

RULES = "spec.runPolicy.podFailurePolicy.rules"


def tfjob(name: str, workers: int = 2, **run_policy: Any) -> dict[str, Any]:
    roles = {"MASTER": 1, "WORKER": workers}
    return job_manifest("TFJob", name, roles, "tensorflow", runPolicy=run_policy)


def started(cluster: LocalCluster, ns: str, job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    apply(cluster, ns, job)
    name = job["metadata"]["name"]
    workers = job["spec"]["replicaSpecs"][1]["replicas"]
    names = {f"{name}-master-0"} | {f"{name}-worker-{i}" for i in range(workers)}
    pods = wait_for_pods(cluster, ns, name, names)
    wait_for_state(cluster, ns, "TFJob", name, "Running")
    return pods


def uncounted(cluster: LocalCluster, ns: str, job: str, pods: int) -> dict[str, Any]:
    """The job's status once `pods` pods are listed as recreated without counting."""
    return wait_until(
        lambda: (
            len((s := job_status(cluster, ns, "TFJob", job)).get("uncountedRestarts") or []) >= pods
            and s
        ),
        timeout=60,
        what=f"{pods} entries in {job}'s status.uncountedRestarts",
    )


def events(cluster: LocalCluster, ns: str, reason: str) -> list[str]:
    found = get_json(cluster, "events", "-n", ns, "--field-selector", f"reason={reason}")
    return [e["message"] for e in found["items"]]


def budget(cluster: LocalCluster, ns: str, job: str, pods: int) -> None:
    """A PodDisruptionBudget over the job's pods that allows one disruption:
    minAvailable, as an integer, is what a budget of pods whose controller
    has no scale subresource may say."""
    selector = {"matchLabels": {"dlk8s.io/job-name": job}}
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": job},
        "spec": {"minAvailable": pods - 1, "selector": selector},
    }
    apply(cluster, ns, pdb)
    wait_until(
        lambda: get_json(cluster, "pdb", job, "-n", ns).get("status", {}).get("disruptionsAllowed"),
        what=f"the budget of {job} to allow a disruption",
    )


def no_restart(status: dict[str, Any]) -> None:
    assert status.get("restartCount", 0) == 0, status
    assert status["state"] == "Running", status


def test_a_pod_evicted_through_the_eviction_api_is_recreated_without_counting(
    cluster: LocalCluster, namespace: str
) -> None:
    pods = started(cluster, namespace, tfjob("evicted", backoffLimit=0))
    budget(cluster, namespace, "evicted", len(pods))
    victim = "evicted-worker-1"
    evict(cluster, namespace, victim)
    wait_for_replacement(cluster, namespace, "evicted", victim, pods[victim]["metadata"]["uid"])
    status = uncounted(cluster, namespace, "evicted", 1)
    [entry] = status["uncountedRestarts"]
    assert (entry["pod"], entry["replicaType"], entry["index"]) == (victim, "WORKER", 1)
    assert entry["uid"] == pods[victim]["metadata"]["uid"]
    assert entry["reason"] == "EvictionByEvictionAPI"
    wait_for_pods(cluster, namespace, "evicted", set(pods))
    no_restart(job_status(cluster, namespace, "TFJob", "evicted"))
    [message] = events(cluster, namespace, "PodDisrupted")
    assert message.startswith(f"WORKER 1 (pod {victim}) was disrupted: EvictionByEvictionAPI")


@contextmanager
def drained(cluster: LocalCluster, node: str, job: str) -> Iterator[None]:
    """`kubectl drain` of the node, evicting the job's pods there (and no
    one else's: the session's other pods stay), uncordoned afterwards."""
    try:
        cluster.kubectl(
            "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s",
            f"--pod-selector=dlk8s.io/job-name={job}",
        )  # fmt: skip
        yield
    finally:
        cluster.kubectl("uncordon", node)


def test_pods_on_a_drained_node_are_recreated_elsewhere_without_counting(
    cluster: LocalCluster, namespace: str
) -> None:
    pods = started(cluster, namespace, tfjob("drained", workers=3, backoffLimit=0))
    node = pods["drained-worker-0"]["spec"]["nodeName"]
    there = {name for name, pod in pods.items() if pod["spec"]["nodeName"] == node}
    with drained(cluster, node, "drained"):
        for name in there:
            wait_for_replacement(cluster, namespace, "drained", name, pods[name]["metadata"]["uid"])
        status = uncounted(cluster, namespace, "drained", len(there))
        again = wait_for_pods(cluster, namespace, "drained", set(pods))
        assert all(again[name]["spec"]["nodeName"] != node for name in there)
    assert {e["pod"] for e in status["uncountedRestarts"]} == there
    assert {e["reason"] for e in status["uncountedRestarts"]} == {"EvictionByEvictionAPI"}
    no_restart(job_status(cluster, namespace, "TFJob", "drained"))
    # Events of one reason in one pass are posted as one, naming every pod.
    told = " ".join(events(cluster, namespace, "PodDisrupted"))
    assert all(f"(pod {name}) was disrupted: EvictionByEvictionAPI" in told for name in there)


def rule(action: str, *codes: int) -> dict[str, Any]:
    return {"action": action, "onExitCodes": {"operator": "In", "values": list(codes)}}


def test_a_fail_job_rule_on_42_fails_the_job_at_once_without_recreating(
    cluster: LocalCluster, namespace: str
) -> None:
    policy = {"rules": [rule("FailJob", 42)]}
    pods = started(cluster, namespace, tfjob("fatal", podFailurePolicy=policy))
    finish_pod(cluster, namespace, "fatal-worker-0", 42)
    status = wait_for_state(cluster, namespace, "TFJob", "fatal", "Failed", timeout=30)
    assert status["reason"] == "PodFailurePolicy"
    failed = condition(status, "Failed")
    assert failed is not None
    assert failed["message"] == (
        "WORKER 0 (pod fatal-worker-0) failed: container tensorflow exited with code 42,"
        f" matching {RULES}[0] (FailJob)"
    )
    assert status.get("restartCount", 0) == 0
    left = pods_of(cluster, namespace, "fatal")
    assert left["fatal-worker-0"]["metadata"]["uid"] == pods["fatal-worker-0"]["metadata"]["uid"]
    assert events(cluster, namespace, "PodFailurePolicy") == [failed["message"]]


def test_an_ignore_rule_on_3_recreates_without_counting(
    cluster: LocalCluster, namespace: str
) -> None:
    policy = {"rules": [rule("Ignore", 3)]}
    pods = started(cluster, namespace, tfjob("forgiven", backoffLimit=0, podFailurePolicy=policy))
    finish_pod(cluster, namespace, "forgiven-worker-1", 3)
    old = pods["forgiven-worker-1"]["metadata"]["uid"]
    wait_for_replacement(cluster, namespace, "forgiven", "forgiven-worker-1", old)  # after 10 s
    [entry] = uncounted(cluster, namespace, "forgiven", 1)["uncountedRestarts"]
    assert (entry["uid"], entry["reason"]) == (old, "PodFailurePolicy")
    assert entry["message"] == (
        f"container tensorflow exited with code 3, matching {RULES}[0] (Ignore)"
    )
    wait_for_pods(cluster, namespace, "forgiven", set(pods))
    no_restart(job_status(cluster, namespace, "TFJob", "forgiven"))
    assert len(events(cluster, namespace, "PodFailureIgnored")) == 1


@pytest.mark.parametrize(
    ("success_policy", "state", "reason"),
    [(None, "Failed", "OtherReplicasFailed"), ("DecidingReplica", "Succeeded", "Succeeded")],
)
def test_a_worker_that_failed_for_good_and_a_master_that_succeeded(
    cluster: LocalCluster, namespace: str, success_policy: str | None, state: str, reason: str
) -> None:
    policy = {"successPolicy": success_policy} if success_policy else {}
    name = f"truth-{(success_policy or 'default').lower()}"
    started(cluster, namespace, tfjob(name, workers=1, **policy))
    finish_pod(cluster, namespace, f"{name}-worker-0", 1)
    wait_until(
        lambda: job_status(cluster, namespace, "TFJob", name).get("failedReplicas"),
        what="the WORKER remembered as failed for good",
    )
    finish_pod(cluster, namespace, f"{name}-master-0", 0)
    status = wait_for_state(cluster, namespace, "TFJob", name, state, timeout=30)
    assert status["reason"] == reason
    message = condition(status, state)["message"]  # type: ignore[index]
    assert f"WORKER 0 (pod {name}-worker-0, exit code 1)" in message, message
    assert status["failedReplicas"] == [
        {
            "replicaType": "WORKER",
            "index": 0,
            "pod": f"{name}-worker-0",
            "exitCode": 1,
            "reason": "Error",
            "time": status["failedReplicas"][0]["time"],
        }
    ]
