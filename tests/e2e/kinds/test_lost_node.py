"""A pod stuck terminating on a lost node is replaced beside it, and its job
completes (issue 49; job.reconcile.stuck, docs/troubleshooting.md).

Two kwok nodes of the test's own, tainted and labelled so that only the
WORKER goes there, each played by a kwok process of its own. The node the
WORKER runs on is lost the way a powered-off node is: its kwok is killed,
and nothing will ever confirm that a pod there stopped. Nothing else is
done to it: kube-controller-manager finds the node unreachable after its
grace period (50 s), taints it, and the taint manager deletes the WORKER
(which tolerates the taint for no time, as a job wanting fast failover
would); the pod stays Terminating. Once its grace period is 30 s past, the
operator takes it out of its slot and Service and creates its replacement
on the other node; the job then succeeds with no restart counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster, LosableNode, NodeSpec, losable_node

from ..helpers import (
    apply,
    finish_pod,
    get_json,
    get_or_none,
    job_manifest,
    pods_of,
    wait_for_phase,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("operator")

JOB = "lost"
POOL, TAINT = "dlk8s-test/pool", "lost-node"
NODES = ("lost-node-a", "lost-node-b")
WORKER, REPLACEMENT = f"{JOB}-worker-0", f"{JOB}-worker-0-r1"
# The node controller's grace period and its next look, the grace period
# below, the operator's wait past the deletion deadline (STUCK_AFTER), and
# room for a loaded machine.
TIMEOUT = 50 + 5 + 1 + 30 + 90


@pytest.fixture
def pool(cluster: LocalCluster) -> Iterator[dict[str, LosableNode]]:
    """Two nodes only the WORKER's template tolerates, each played by a kwok
    of its own that can be killed; removed afterwards with their pods."""
    labels, taints = {POOL: TAINT}, [{"key": POOL, "value": TAINT, "effect": "NoSchedule"}]
    with contextlib.ExitStack() as stack:
        nodes = [
            stack.enter_context(losable_node(cluster, NodeSpec(name, gpu=0), labels, taints))
            for name in NODES
        ]
        yield {node.name: node for node in nodes}


def tfjob() -> dict[str, Any]:
    job = job_manifest("TFJob", JOB, {"MASTER": 1, "WORKER": 1}, "tensorflow")
    worker = job["spec"]["replicaSpecs"][1]["template"]["spec"]
    worker["terminationGracePeriodSeconds"] = 1
    worker["tolerations"] = [{"key": POOL, "value": TAINT, "effect": "NoSchedule"}] + [
        {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 0}
        for t in ("unreachable", "not-ready")
    ]  # fmt: skip
    term = {"matchExpressions": [{"key": POOL, "operator": "In", "values": [TAINT]}]}
    worker["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    return job


def running_on(cluster: LocalCluster, ns: str, pod: str, timeout: float = 60) -> str:
    """The node `pod` runs on, once it runs."""

    def node() -> str | None:
        found = get_or_none(cluster, "pod", pod, "-n", ns) or {}
        if found.get("status", {}).get("phase") != "Running":
            return None
        return str(found["spec"]["nodeName"])

    return str(wait_until(node, timeout=timeout, what=f"{pod} running"))


def endpoint_addresses(cluster: LocalCluster, ns: str, service: str) -> list[str]:
    slices = get_json(
        cluster, "endpointslices", "-n", ns, "-l", f"kubernetes.io/service-name={service}"
    )
    return sorted(
        a for s in slices["items"] for e in s.get("endpoints") or [] for a in e["addresses"]
    )


def test_a_worker_stuck_terminating_on_a_lost_node_is_replaced_and_the_job_succeeds(
    cluster: LocalCluster, namespace: str, pool: dict[str, LosableNode]
) -> None:
    apply(cluster, namespace, tfjob())
    lost = running_on(cluster, namespace, WORKER)
    assert lost in pool
    stuck_uid = pods_of(cluster, namespace, JOB)[WORKER]["metadata"]["uid"]
    pool[lost].lose()
    # The taint manager deletes it; nobody confirms it stopped: it stays.
    wait_until(
        lambda: get_json(cluster, "pod", WORKER, "-n", namespace)["metadata"].get(
            "deletionTimestamp"
        ),
        timeout=TIMEOUT,
        what=f"the taint manager to delete {WORKER}",
    )
    other = running_on(cluster, namespace, REPLACEMENT, TIMEOUT)
    assert other in pool
    assert other != lost
    pods = pods_of(cluster, namespace, JOB)
    # The stuck pod is still there (only its kubelet or a person ends it),
    # out of its slot: the job's labels but no index.
    stuck = get_json(cluster, "pod", WORKER, "-n", namespace)
    assert stuck["metadata"]["uid"] == stuck_uid
    assert "dlk8s.io/replica-index" not in stuck["metadata"]["labels"], stuck["metadata"]
    new = pods[REPLACEMENT]
    assert new["spec"]["hostname"] == WORKER
    # The WORKER's name resolves to the replacement alone.
    address = new["status"]["podIP"]
    wait_until(
        lambda: endpoint_addresses(cluster, namespace, WORKER) == [address],
        timeout=30,
        what=f"{WORKER}'s Service to select {REPLACEMENT} alone",
    )
    events = get_json(
        cluster, "events", "-n", namespace, "--field-selector",
        f"involvedObject.name={JOB},reason=PodStuckTerminating",
    )  # fmt: skip
    [said] = [e["message"] for e in events["items"]]
    assert said.startswith(f"WORKER 0: pod {WORKER} on node {lost} is still terminating"), said
    finish_pod(cluster, namespace, REPLACEMENT, 0)
    finish_pod(cluster, namespace, f"{JOB}-master-0", 0)
    status = wait_for_phase(cluster, namespace, "TFJob", JOB, "Done")
    assert status["state"] == "Succeeded", status
    assert status.get("restartCount", 0) == 0, status
    [uncounted] = status["uncountedRestarts"]
    assert (uncounted["pod"], uncounted["uid"]) == (WORKER, stuck_uid), status
    assert uncounted["reason"] == "DeletionByTaintManager", status
