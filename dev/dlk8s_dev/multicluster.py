"""Kueue's MultiKueue on this machine: a manager control plane and worker
control planes, each a LocalCluster with Kueue beside it (`make cluster
MULTIKUEUE=1`, the multi-cluster tests and `bench.multikueue`).

The manager holds the queues (and a node without GPUs, for the chart's
pod and the jobs that stay there): a ClusterQueue whose admission check is
MultiKueue's, which dispatches every admitted job to one of the workers
(each a MultiKueueCluster, reached through a kubeconfig Secret in Kueue's
namespace) and copies its status back. Each worker has kwok nodes and a
ClusterQueue of its own capacity. dlk8s's kinds are the manager's
multiKueue.externalFrameworks (docs/multicluster.md says what users write).
What runs the jobs comes with them: the chart on every cluster
(kueue.enabled=true) and an operator per cluster, a local process with the
chart's ServiceAccount (localdeploy.py), stopped with the clusters.

On 2 cores the three control planes start one after the other (each
with its Kueue); at rest they cost what three clusters do.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .clusterapi import ClusterError
from .kueue import EXTERNAL_FRAMEWORKS, NAMESPACE, kueue_object
from .localcluster import START_WAIT, LocalCluster, NodeSpec
from .localdeploy import OperatorProcess, install_chart

# MultiKueue's controller name, the value of spec.managedBy it dispatches.
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
CHECK = "dlk8s-multikueue"  # the manager's AdmissionCheck
CONFIG = "dlk8s-workers"  # its MultiKueueConfig
FLAVOR = "default-flavor"
GPU = "nvidia.com/gpu"
# What each worker's ClusterQueue admits at once; the manager's admits all
# of them together (it holds no pod; MultiKueue picks the worker).
WORKER_QUOTA = {"cpu": "64", "memory": "256Gi", GPU: "8"}


def cluster_queue(name: str, quota: dict[str, str], checks: Sequence[str] = ()) -> dict[str, Any]:
    """A ClusterQueue of `quota` on the one flavor, for every namespace."""
    resources = [{"name": r, "nominalQuota": q} for r, q in quota.items()]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": list(quota), "flavors": [{"name": FLAVOR, "resources": resources}]}
        ],
    }
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return kueue_object("ClusterQueue", name, spec)


def multi_kueue_settings(worker_lost_timeout: str, gc_interval: str) -> dict[str, Any]:
    """The manager's Configuration section: dlk8s's kinds for MultiKueue's
    generic adapter (Kind.version.group, as for the single-cluster list)."""
    return {
        "externalFrameworks": [{"name": kind} for kind in EXTERNAL_FRAMEWORKS],
        "workerLostTimeout": worker_lost_timeout,
        "gcInterval": gc_interval,
    }


def scaled(quota: dict[str, str], times: int) -> dict[str, str]:
    """`quota` `times` over (its quantities are plain numbers or Gi)."""
    out = {}
    for name, value in quota.items():
        unit = "Gi" if value.endswith("Gi") else ""
        out[name] = f"{int(value.removesuffix(unit)) * times}{unit}"
    return out


@dataclass
class MultiCluster:
    """A manager and `workers` workers. start()/stop(), or a context manager."""

    workers: int = 2
    worker_nodes: Sequence[NodeSpec] = (NodeSpec("gpu-node-0", gpu=8),)
    # The manager runs no dispatched job's pod; its node, without GPUs,
    # holds the chart's own pod and the jobs that stay on the manager.
    manager_nodes: Sequence[NodeSpec] = (NodeSpec("manager-node-0", gpu=0),)
    # How long a worker out of reach keeps its jobs before MultiKueue
    # dispatches them again (Kueue's default is 15 minutes), and how often
    # MultiKueue removes copies its manager no longer has.
    worker_lost_timeout: str = "30s"
    gc_interval: str = "10s"
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr))
    # Set when the run is asked to stop (a signal): start() gives up at its next wait.
    interrupt: threading.Event | None = None
    manager: LocalCluster = field(init=False)
    members: dict[str, LocalCluster] = field(init=False, default_factory=dict)
    operators: dict[str, OperatorProcess] = field(init=False, default_factory=dict)
    # What every stop() so far removed, to tell the user (stopping.Run).
    removed: list[str] = field(init=False, default_factory=list)

    @property
    def names(self) -> list[str]:
        return [f"worker-{i + 1}" for i in range(self.workers)]

    def start(self) -> MultiCluster:
        settings = multi_kueue_settings(self.worker_lost_timeout, self.gc_interval)
        self.manager = self._cluster(self.manager_nodes, {"multi_kueue": settings})
        try:
            self.manager.start()
            for name in self.names:
                worker = self._cluster(self.worker_nodes, {})
                self.members[name] = worker
                worker.start()
                self._worker_queues(worker)
            # MultiKueue watches the jobs' kind on every worker: the CRDs
            # come first, or a worker's connection waits out a back-off.
            self._install_dlk8s()
            self._manager_queues()
            self._wait_active()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> list[str]:
        """The operators stopped, then every cluster, by pid; what was removed."""
        before = len(self.removed)
        removed = self.removed
        for name, process in self.operators.items():
            process.stop()
            removed.append(f"the operator of {name}")
        self.operators.clear()
        # Side by side: each API server takes seconds to shut down.
        clusters = [*self.members.values()]
        if getattr(self, "manager", None) is not None:
            clusters.append(self.manager)
        with ThreadPoolExecutor(max(1, len(clusters))) as pool:
            for done in pool.map(LocalCluster.stop, clusters):
                removed += done
        return removed[before:]

    def _cluster(self, nodes: Sequence[NodeSpec], kueue_options: dict[str, Any]) -> LocalCluster:
        return LocalCluster(
            nodes=tuple(nodes),
            log=self.log,
            kueue=True,
            kueue_options=kueue_options,
            interrupt=self.interrupt,
        )

    def __enter__(self) -> MultiCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def clusters(self) -> dict[str, LocalCluster]:
        return {"manager": self.manager, **self.members}

    def _install_dlk8s(self) -> None:
        """The chart (kueue.enabled=true; on the manager kueue.multiKueue.manager
        too) and a running operator on every cluster."""
        for name, cluster in self.clusters.items():
            sets: tuple[str, ...] = ("cloud=gke", "kueue.enabled=true")
            if cluster is self.manager:
                sets += ("kueue.multiKueue.manager=true",)
            install = install_chart(cluster, sets=sets)
            self.operators[name] = OperatorProcess(install, name=f"{name}-operator").start()

    def local_queue(self, cluster: LocalCluster, namespace: str, name: str = "team") -> None:
        """A LocalQueue `name` in `namespace` for the cluster's ClusterQueue
        (MultiKueue needs the namespace and the queue on every worker too)."""
        local = kueue_object("LocalQueue", name, {"clusterQueue": "team"}, namespace)
        cluster.kubectl("apply", "-f", "-", input=json.dumps(local))

    # -- the queues ----------------------------------------------------------

    def _worker_queues(self, worker: LocalCluster) -> None:
        _apply(worker, kueue_object("ResourceFlavor", FLAVOR, {}))
        _apply(worker, cluster_queue("team", WORKER_QUOTA))

    def _manager_queues(self) -> None:
        manager = self.manager
        for name, worker in self.members.items():
            secret = f"{name}-kubeconfig"
            path = worker.write_kubeconfig(worker.workdir / "multikueue.kubeconfig", worker.token)
            manager.kubectl(
                "create", "secret", "generic", secret, "-n", NAMESPACE,
                f"--from-file=kubeconfig={path}",
            )  # fmt: skip
            source = {"kubeConfig": {"locationType": "Secret", "location": secret}}
            _apply(manager, kueue_object("MultiKueueCluster", name, {"clusterSource": source}))
        _apply(manager, kueue_object("MultiKueueConfig", CONFIG, {"clusters": self.names}))
        parameters = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CONFIG}
        check = {"controllerName": MULTIKUEUE, "parameters": parameters}
        _apply(manager, kueue_object("AdmissionCheck", CHECK, check))
        _apply(manager, kueue_object("ResourceFlavor", FLAVOR, {}))
        _apply(manager, cluster_queue("team", scaled(WORKER_QUOTA, self.workers), [CHECK]))

    def _wait_active(self) -> None:
        """Until the manager's ClusterQueue is active: its admission check
        is, once MultiKueue has reached every worker."""
        path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team"
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            status, queue = self.manager.api(path)
            conditions = queue.get("status", {}).get("conditions", []) if status == 200 else []
            if any(c["type"] == "Active" and c["status"] == "True" for c in conditions):
                return
            time.sleep(0.5)
        raise ClusterError(f"the manager's ClusterQueue is not active: {conditions}")


def _apply(cluster: LocalCluster, obj: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
