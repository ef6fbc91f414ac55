"""Kueue's objects as the end-to-end tests make and read them (test_kueue,
test_kueue_jobs, test_train_kueue)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .helpers import condition

KUEUE_API = "kueue.x-k8s.io/v1beta2"


def kueue_object(kind: str, name: str, spec: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": meta, "spec": spec}


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
