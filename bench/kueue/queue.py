"""The Kueue benchmark's jobs and queue: TFJobs asking for GPUs, a
ClusterQueue whose GPU quota admits --quota-jobs of them at once, and what
the ClusterQueue shows once it drained."""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common.ceiling import EXIT_CODE, RUN_DURATION
from bench.common.harness import Context, tfjob, wait_for
from bench.common.operator import LABEL_QUEUE_NAME

GPU = "nvidia.com/gpu"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
FLAVOR = "bench-gpus"


def bench_job(name: str, queue: str, args: argparse.Namespace) -> dict[str, Any]:
    """harness.tfjob with GPUs asked for, its MASTER ending after --run-for, in `queue`."""
    job = tfjob(name, args.job_workers, 0)
    gpus = {GPU: str(args.gpus_per_pod)}
    for spec in job["spec"]["replicaSpecs"]:
        template = spec["template"]
        template["spec"]["containers"][0]["resources"] = {"requests": gpus, "limits": gpus}
        if spec["tfReplicaType"] == "MASTER":
            template["metadata"] = {"annotations": {EXIT_CODE: "0", RUN_DURATION: args.run_for}}
    if queue:
        job["metadata"]["labels"] = {LABEL_QUEUE_NAME: queue}
    return job


def make_queue(ctx: Context, namespace: str) -> str:
    """A ClusterQueue for `namespace` whose GPUs admit --quota-jobs jobs at
    once, and its LocalQueue of the same name; returns that name."""
    args = ctx.args
    quota = args.quota_jobs * (1 + args.job_workers) * args.gpus_per_pod
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor"}
    ctx.api.json("POST", f"{KUEUE_API}/resourceflavors", flavor | {"metadata": {"name": FLAVOR}},
                 ok=(409,))  # fmt: skip
    name = f"bench-{namespace}"
    group = {
        "coveredResources": [GPU],
        "flavors": [{"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": str(quota)}]}],
    }
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    ctx.api.json("POST", f"{KUEUE_API}/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": selector, "resourceGroups": [group]},
    })  # fmt: skip
    ctx.api.json("POST", f"{KUEUE_API}/namespaces/{namespace}/localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": name},
    })  # fmt: skip
    wait_for(lambda: condition_true(cluster_queue(ctx, name), "Active"), 60, f"{name} Active")
    return name


def cluster_queue(ctx: Context, name: str) -> dict[str, Any]:
    found: dict[str, Any] = ctx.api.json("GET", f"{KUEUE_API}/clusterqueues/{name}")
    return found


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def reserved_gpus(cq: dict[str, Any]) -> float:
    """GPUs the ClusterQueue holds reserved (a quantity: "0", "200", "1500m")."""
    status = cq.get("status") or {}
    totals = [
        str(res.get("total", "0"))
        for flavor in status.get("flavorsReservation") or []
        for res in flavor.get("resources") or []
        if res.get("name") == GPU
    ]
    return sum(float(t[:-1]) / 1000 if t.endswith("m") else float(t) for t in totals)


def drained_queue(ctx: Context, name: str) -> dict[str, Any]:
    """The ClusterQueue's status once every job ended: Kueue writes it a
    little later, so the benchmark waits up to 30 s for it to show nothing
    reserved, then reports what it shows."""
    deadline = time.monotonic() + 30
    while True:
        cq = cluster_queue(ctx, name)
        status = cq.get("status") or {}
        busy = status.get("reservingWorkloads", 0) or status.get("admittedWorkloads", 0)
        if not (busy or reserved_gpus(cq)) or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {
        "reserving_workloads": status.get("reservingWorkloads", 0),
        "admitted_workloads": status.get("admittedWorkloads", 0),
        "pending_workloads": status.get("pendingWorkloads", 0),
        "reserved_gpus": reserved_gpus(cq),
    }
