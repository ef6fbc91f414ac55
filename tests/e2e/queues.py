"""Kueue's objects as the end-to-end tests make and read them (test_kueue,
test_kueue_jobs, test_train_kueue)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from dlk8s_dev import kueue
from dlk8s_dev.localcluster import LocalCluster, NodeSpec, missing_tools

from .helpers import condition

KUEUE_API = kueue.KUEUE_API
kueue_object = kueue.kueue_object


def cluster_queue_spec(
    quota: Mapping[str, str], flavor: str, namespace: str = "", preemption: bool = False
) -> dict[str, Any]:
    """A ClusterQueue of `quota` on one flavor, for `namespace` only (all
    namespaces when ""); with `preemption`, a job preempts lower ones."""
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}} if namespace else {}
    resources = [{"name": r, "nominalQuota": q} for r, q in quota.items()]
    spec: dict[str, Any] = {
        "namespaceSelector": selector,
        "resourceGroups": [
            {"coveredResources": list(quota), "flavors": [{"name": flavor, "resources": resources}]}
        ],
    }
    if preemption:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return spec


def is_true(obj: dict[str, Any], kind: str) -> bool:
    """Whether the object's condition `kind` is True."""
    found = condition(obj.get("status", {}), kind)
    return found is not None and found["status"] == "True"


@contextlib.contextmanager
def kueue_cluster(nodes: Sequence[NodeSpec], **options: Any) -> Iterator[LocalCluster]:
    """A cluster of a module's own with Kueue beside it (`options`: Kueue's
    settings, kueue.Kueue's fields), stopped at the end."""
    own = LocalCluster(nodes=tuple(nodes), kueue=True, kueue_options=options)
    missing = missing_tools(own.tools_bin) + kueue.missing_tools(own.tools_bin)
    if missing:
        pytest.skip(f"Kueue's tools missing: {missing} (run `make tools`)")
    own.start()
    try:
        yield own
    finally:
        own.stop()


def kind_specs() -> dict[str, dict[str, Any]]:
    """One small job of every kind, each container asking for CPU."""
    ask = {"requests": {"cpu": "100m", "memory": "64Mi"}}

    def template(container: str) -> dict[str, Any]:
        return {
            "spec": {
                "containers": [{"name": container, "image": f"{container}:1", "resources": ask}]
            }
        }

    return {
        "TFJob": {
            "replicaSpecs": [
                {"tfReplicaType": "MASTER", "replicas": 1, "template": template("tensorflow")},
                {"tfReplicaType": "PS", "replicas": 1, "template": template("tensorflow")},
            ]
        },
        "MXJob": {
            "replicaSpecs": [
                {"mxReplicaType": r, "replicas": 1, "template": template("mxnet")}
                for r in ("SCHEDULER", "SERVER", "WORKER")
            ]
        },
        "Caffe2Job": {
            "backendSpecs": {"backendType": "redis"},
            "replicaSpecs": [
                {"replicaType": "MASTER", "replicas": 1, "template": template("caffe2")},
                {"replicaType": "WORKER", "replicas": 1, "template": template("caffe2")},
            ],
        },
        "PyTorchJob": {
            "replicaSpecs": [
                {"pytorchReplicaType": "MASTER", "replicas": 1, "template": template("pytorch")},
                {"pytorchReplicaType": "WORKER", "replicas": 2, "template": template("pytorch")},
            ]
        },
        "PaddleJob": {
            "image": "example/paddle:1",
            "faultTolerant": True,
            "trainer": {
                "entrypoint": "python train.py",
                "minInstance": 2,
                "maxInstance": 2,
                "resources": ask,
            },
            "pserver": {"minInstance": 1, "maxInstance": 1, "resources": ask},
        },
    }
