"""Kueue beside the local control plane (LocalCluster(kueue=True), `make cluster
KUEUE=1`): the pinned release admits Workloads by its ClusterQueue's quota,
its webhooks answer through the API server, and stop() leaves nothing of it.

The Workloads are written by hand, as dlk8s will write its own: Kueue admits
any Workload, whoever made it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev import kueue
from dlk8s_dev.localcluster import LocalCluster, NodeSpec, leftover_processes

from ..helpers import apply, condition, get_json, wait_until
from ..queues import cluster_queue_spec, is_true, kueue_cluster, kueue_object

FLAVOR = "gpu-flavor"
CLUSTER_QUEUE = "team-gpus"
QUEUE = "team"
GPU = "nvidia.com/gpu"
QUOTA_GPUS = 8
PODS, GPUS_PER_POD = 4, 1  # 4 GPUs a Workload: two fit in the quota, a third does not


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A cluster of this module's own, Kueue running beside it."""
    with kueue_cluster([NodeSpec("kueue-node-0")]) as own:
        yield own


@pytest.fixture(scope="module")
def namespace(cluster: LocalCluster) -> str:
    """A team's namespace; it goes with the module's cluster."""
    cluster.kubectl("create", "namespace", "team-a")
    return "team-a"


@pytest.fixture(scope="module")
def queues(cluster: LocalCluster, namespace: str) -> str:
    """A ResourceFlavor, a ClusterQueue of 8 GPUs on it, and a LocalQueue in
    `namespace`; returns the LocalQueue's name once the ClusterQueue is active."""
    quota = {"cpu": "64", "memory": "256Gi", GPU: str(QUOTA_GPUS)}
    create(cluster, kueue_object("ResourceFlavor", FLAVOR, {}))
    create(cluster, kueue_object("ClusterQueue", CLUSTER_QUEUE, cluster_queue_spec(quota, FLAVOR)))
    local = kueue_object("LocalQueue", QUEUE, {"clusterQueue": CLUSTER_QUEUE}, namespace)
    apply(cluster, namespace, local)
    wait_until(
        lambda: is_true(get_json(cluster, "clusterqueue", CLUSTER_QUEUE), "Active"),
        what="the ClusterQueue to be active",
    )
    return QUEUE


def create(cluster: LocalCluster, manifest: dict[str, Any]) -> None:
    cluster.kubectl("create", "-f", "-", input=json.dumps(manifest))


def workload(name: str, namespace: str, queue: str) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi", GPU: str(GPUS_PER_POD)}
    container = {
        "name": "main",
        "image": "pause",
        "resources": {"requests": resources, "limits": {GPU: str(GPUS_PER_POD)}},
    }
    pod_set = {"name": "main", "count": PODS, "template": {"spec": {"containers": [container]}}}
    return kueue_object("Workload", name, {"queueName": queue, "podSets": [pod_set]}, namespace)


def workloads(cluster: LocalCluster, namespace: str) -> dict[str, dict[str, Any]]:
    items = get_json(cluster, "workloads.kueue.x-k8s.io", "-n", namespace)["items"]
    return {w["metadata"]["name"]: w for w in items}


def admitted(cluster: LocalCluster, namespace: str) -> set[str]:
    return {n for n, w in workloads(cluster, namespace).items() if is_true(w, "Admitted")}


def pending_reason(wl: dict[str, Any]) -> dict[str, Any] | None:
    """Its QuotaReserved condition once the scheduler found no room for it."""
    found = condition(wl.get("status", {}), "QuotaReserved")
    return found if found and found["status"] == "False" and found["reason"] == "Pending" else None


def gpus_in_use(cluster: LocalCluster) -> tuple[str | None, str | None]:
    """The ClusterQueue's GPUs reserved and in use, as its status reports them."""
    status = get_json(cluster, "clusterqueue", CLUSTER_QUEUE)["status"]

    def total(key: str) -> str | None:
        for flavor in status.get(key) or []:
            for resource in flavor["resources"] if flavor["name"] == FLAVOR else []:
                if resource["name"] == GPU:
                    return str(resource["total"])
        return None

    return total("flavorsReservation"), total("flavorsUsage")


def admitted_gpus(cluster: LocalCluster, namespace: str, samples: list[int]) -> set[str]:
    """The admitted Workloads; their admitted GPUs added up go to `samples`."""
    found = {n: w for n, w in workloads(cluster, namespace).items() if is_true(w, "Admitted")}
    samples.append(
        sum(
            int(a["resourceUsage"].get(GPU, 0))
            for w in found.values()
            for a in w["status"]["admission"]["podSetAssignments"]
        )
    )
    return set(found)


def wait_for_full_quota(cluster: LocalCluster) -> None:
    # The ClusterQueue's status follows its Workloads' a moment later.
    full = (str(QUOTA_GPUS), str(QUOTA_GPUS))
    wait_until(lambda: gpus_in_use(cluster) == full, what=f"{full} GPUs reserved and in use")


def test_the_quota_admits_two_of_three_and_the_third_when_one_goes(
    cluster: LocalCluster, namespace: str, queues: str
) -> None:
    names = ["wl-a", "wl-b", "wl-c"]
    samples: list[int] = []
    for name in names:
        apply(cluster, namespace, workload(name, namespace, queues))
    wait_until(
        lambda: (
            len(admitted_gpus(cluster, namespace, samples)) == 2
            and any(pending_reason(w) for w in workloads(cluster, namespace).values())
        ),
        what="two Workloads admitted and the third pending",
    )
    by_name = workloads(cluster, namespace)
    first_two = admitted(cluster, namespace)
    (third,) = set(names) - first_two
    for name in first_two:
        admission = by_name[name]["status"]["admission"]
        assert admission["clusterQueue"] == CLUSTER_QUEUE
        (assignment,) = admission["podSetAssignments"]
        assert assignment["count"] == PODS
        assert assignment["flavors"] == {"cpu": FLAVOR, "memory": FLAVOR, GPU: FLAVOR}
        assert assignment["resourceUsage"][GPU] == str(PODS * GPUS_PER_POD)
    waiting = by_name[third]
    assert not is_true(waiting, "Admitted")
    assert "admission" not in waiting["status"]
    reason = pending_reason(waiting)
    assert reason is not None
    # Kueue's flavor assigner: all 8 GPUs taken, the third asks for 4.
    wanted = f"insufficient unused quota for {GPU} in flavor {FLAVOR}, {PODS * GPUS_PER_POD} more"
    assert wanted in reason["message"]
    wait_for_full_quota(cluster)

    gone = sorted(first_two)[0]
    cluster.kubectl("delete", "workloads.kueue.x-k8s.io", gone, "-n", namespace, "--wait=true")
    wait_until(
        lambda: admitted_gpus(cluster, namespace, samples) == (first_two - {gone}) | {third},
        what=f"{third} admitted once {gone} is deleted",
    )
    assert max(samples) == QUOTA_GPUS, "never more admitted than the quota"
    wait_for_full_quota(cluster)


def test_the_validating_webhook_refuses_two_podsets_with_min_count(
    cluster: LocalCluster, namespace: str
) -> None:
    bad = kueue.refused_workload(namespace, name="two-min-counts")
    done = cluster.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert done.returncode != 0
    assert 'admission webhook "vworkload.kb.io" denied the request' in done.stderr
    assert kueue.MIN_COUNT_REFUSAL in done.stderr
    missing = cluster.kubectl(
        "get", "workloads.kueue.x-k8s.io", "two-min-counts", "-n", namespace, check=False
    )
    assert missing.returncode != 0, "the refused Workload must not exist"


def test_stop_leaves_nothing_of_kueue(cluster: LocalCluster, namespace: str) -> None:
    """Last in this module: it stops Kueue (as the cluster's stop() does
    first), then the module's cluster."""
    kueue_run = cluster.kueue_process
    assert kueue_run is not None
    assert kueue_run.pid is not None
    pid, folder, workdir = kueue_run.pid, kueue_run.dir, str(cluster.workdir)
    assert folder.is_dir()
    assert pid in {p for p, _ in leftover_processes(workdir)}
    assert kueue_run.stop() == [f"process kueue (pid {pid})", str(folder)]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not folder.exists()
    hooks = "mutatingwebhookconfigurations,validatingwebhookconfigurations"
    assert "kueue" not in cluster.kubectl("get", hooks, "-o", "name").stdout
    # Its pod webhook (failurePolicy Fail) left behind would refuse this pod.
    cluster.kubectl("run", "after-kueue", "--image=pause", "-n", namespace)
    assert kueue_run.stop() == [], "stopping again removes nothing more"
    cluster.stop()
    assert leftover_processes(workdir) == []
