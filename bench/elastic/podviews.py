"""What the elastic replay's sampler sees of the pods, and what it checks
on every tick: no node overcommitted (``overcommitted``), no job outside
its bounds (``out_of_bounds``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common.operator import Pod, Resources, pod_from_manifest
from bench.elastic.manifests import NAMESPACE
from bench.elastic.traces import SIZED_ROLES, kind_of


@dataclass(frozen=True)
class PodView:
    """A pod that has not terminated, as the sampler needs it."""

    pod: Pod  # node, requests, terminating, role, index
    uid: str
    job: str  # the bench job it belongs to ("" for any other pod)
    running: bool


def pod_view(obj: dict[str, Any]) -> PodView | None:
    pod = pod_from_manifest(obj)
    if pod is None:
        return None
    labels = obj["metadata"].get("labels") or {}
    job = labels.get("dlk8s.io/job-name", "") if pod.namespace == NAMESPACE else ""
    running = obj.get("status", {}).get("phase") == "Running"
    return PodView(pod, obj["metadata"].get("uid", ""), job, running)


def is_sized(view: PodView) -> bool:
    """A trainer of a PaddleJob or a WORKER of a PyTorchJob."""
    return view.pod.role in SIZED_ROLES


def overcommitted(allocatable: Mapping[str, Resources], pods: Iterable[PodView]) -> list[str]:
    """Nodes whose bound pods (terminating ones too: they still hold their
    room) request more than the node has."""
    used = dict.fromkeys(allocatable, Resources())
    for view in pods:
        if view.pod.node in used:
            used[view.pod.node] = used[view.pod.node] + view.pod.requests
    return [
        f"{name}: {used[name]} requested of {total}"
        for name, total in allocatable.items()
        if not used[name].fits_in(total)
    ]


def out_of_bounds(
    spec: Mapping[str, Any], obj: Mapping[str, Any] | None, members: Sequence[PodView]
) -> list[str]:
    """What of one job is outside its bounds right now (a PaddleJob's
    [minInstance, maxInstance] trainers, a PyTorchJob's [minReplicas,
    maxReplicas] WORKERs); `members`: its sized pods."""
    low, high, name = spec["minTrainers"], spec["maxTrainers"], spec["name"]
    kind = kind_of(spec)
    noun, (low_name, high_name) = kind.counts.noun, kind.bounds
    found = []
    meta, status = (obj or {}).get("metadata", {}), (obj or {}).get("status", {})
    asked = (meta.get("annotations") or {}).get(kind.counts.count)
    if asked is not None and not (asked.isdigit() and low <= int(asked) <= high):
        found.append(f"{name}: asked for {asked} {noun}, bounds [{low}, {high}]")
    count = status.get(noun)
    if count is not None and not low <= count <= high:
        found.append(f"{name}: status.{noun} {count}, bounds [{low}, {high}]")
    live = [v for v in members if not v.pod.terminating]
    if len(live) > high:
        found.append(f"{name}: {len(live)} live {noun}, {high_name} {high}")
    below = sorted(v.pod.index for v in members if v.pod.terminating and v.pod.index < low)
    if below:
        found.append(f"{name}: {kind.role}(s) {below} below {low_name} {low} deleted")
    return found
