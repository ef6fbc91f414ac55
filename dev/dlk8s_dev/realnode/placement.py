"""The node as the API server knows it: the taint that keeps other pods off
it and the label, namespace annotations and pod fields that bring pods to
it, and extended resources (e.g. GPUs) it offers with no device plugin.

The node registers with the taint ``dlk8s.io/real-node:NoSchedule`` and the
label ``dlk8s.io/real-node=true``, so the kwok-based tests never land on it
by accident; pods meant for it carry the toleration and node selector
(``pod_placement()``), or are created in a namespace that ``real_namespace()``
annotated, whose pods get both from the API server's PodNodeSelector and
PodTolerationRestriction admission plugins (what a pod nobody can edit
needs, such as `helm test`'s smoke TFJob).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..clusterapi import Cluster

TAINT_KEY = "dlk8s.io/real-node"
LABEL_KEY = "dlk8s.io/real-node"


def namespace_annotations() -> dict[str, str]:
    """What makes a namespace's pods land on the node (see ``real_namespace``)."""
    toleration = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    return {
        "scheduler.alpha.kubernetes.io/node-selector": f"{LABEL_KEY}=true",
        "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps([toleration]),
    }


def real_namespace(cluster: Cluster, name: str) -> str:
    """Create (or annotate) namespace ``name`` so that all its pods run on the node."""
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "annotations": namespace_annotations()},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(namespace))
    return name


def pod_placement() -> dict[str, Any]:
    """Pod spec fields that put a pod on the node (merge into ``spec``)."""
    return {
        "nodeSelector": {LABEL_KEY: "true"},
        "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
    }


def _pointer(name: str) -> str:
    """A resource name as one JSON Pointer token: nvidia.com/gpu -> nvidia.com~1gpu."""
    return name.replace("~", "~0").replace("/", "~1")


def advertise(
    cluster: Cluster,
    node: str,
    resources: Mapping[str, str],
    wait: Callable[[Callable[[], bool], float, str], None],
) -> None:
    """Offer extended resources on ``node``'s ``status.capacity``; returns once
    the kubelet has copied them into ``status.allocatable`` (``wait``s for it)."""
    patch = [
        {"op": "add", "path": f"/status/capacity/{_pointer(name)}", "value": str(count)}
        for name, count in resources.items()
    ]
    _patch_status(cluster, node, patch)
    want = {name: str(count) for name, count in resources.items()}
    wait(
        lambda: _resources(cluster, node, "allocatable", list(want)) == want,
        30,
        f"the kubelet to offer {want}",
    )


def withdraw(cluster: Cluster, node: str, names: Sequence[str]) -> None:
    """Undo ``advertise``: from capacity and allocatable both, since the
    kubelet drops from allocatable only names outside ``*kubernetes.io/``."""
    patch = [
        {"op": "remove", "path": f"/status/{part}/{_pointer(name)}"}
        for name in names
        for part in ("capacity", "allocatable")
    ]
    _patch_status(cluster, node, patch)


def _patch_status(cluster: Cluster, node: str, patch: list[dict[str, str]]) -> None:
    cluster.kubectl(
        "patch", "node", node, "--subresource=status", "--type=json",
        "-p", json.dumps(patch),
    )  # fmt: skip


def _resources(cluster: Cluster, node: str, part: str, names: Sequence[str]) -> dict[str, str]:
    """Of ``names``, those in the node's ``status.<part>``, with their counts."""
    found = json.loads(cluster.kubectl("get", "node", node, "-o", "json").stdout)
    have = found["status"].get(part) or {}
    return {name: have[name] for name in names if name in have}
