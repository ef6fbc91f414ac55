"""Why a job of the elastic replay waits (``wait_cause``), and why GPUs run
no trainer while demand exceeds the cluster (``idle_gpus``), from the GPUs
alone: the names are traces.WAIT_CAUSES and traces.IDLE_CAUSES."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bench.elastic.podviews import PodView, is_sized


def wait_cause(
    spec: Mapping[str, Any],
    mine: Sequence[PodView],
    gpus: Mapping[str, int],
    pods: Sequence[PodView],
    bounds: Mapping[str, int],
) -> str:
    """Why `spec`'s job has no trainer (WORKER) running, from the GPUs alone
    (the bench's trainers and WORKERs ask 2 CPUs and 8 GiB per GPU: GPUs run
    out first).

    `gpus`: each node's allocatable GPUs; `pods`: every live pod of the
    cluster; `bounds`: each job's minInstance."""
    per, low = spec["gpusPerTrainer"], spec["minTrainers"]
    live = [v for v in mine if is_sized(v) and not v.pod.terminating and v.pod.index < low]
    if len(live) < low:
        return "no pods yet"
    need = [per] * sum(1 for v in live if not v.pod.node)
    free, freeing, above = dict(gpus), Counter[str](), Counter[str]()
    for view in pods:
        node = view.pod.node
        if node not in free:
            continue
        free[node] -= view.pod.requests.gpu
        if view.pod.terminating:
            freeing[node] += view.pod.requests.gpu
        elif is_sized(view) and view.job and view.pod.index >= bounds.get(view.job, 1 << 30):
            above[node] += view.pod.requests.gpu
    if fits(need, free):
        return "room free"
    with_freed = {n: free[n] + freeing[n] for n in free}
    if fits(need, with_freed):
        return "room being freed"
    reclaimable = {n: with_freed[n] + above[n] for n in free}
    if fits(need, reclaimable):
        return "held above minimum"
    if sum(reclaimable.values()) >= sum(need):
        return "fragmented"
    return "full at minimums"


def fits(need: Sequence[int], room: Mapping[str, int]) -> bool:
    """First fit, largest first, of the needs into the rooms (GPUs)."""
    left = dict(room)
    for amount in sorted(need, reverse=True):
        node = next((n for n, r in sorted(left.items()) if r >= amount), None)
        if node is None:
            return False
        left[node] -= amount
    return True


def idle_gpus(
    gpus: Mapping[str, int], pods: Sequence[PodView], growable: Sequence[int], dt: float
) -> Counter[str]:
    """GPU-seconds of one tick in which GPUs run no trainer, by cause."""
    free, idle = dict(gpus), Counter[str]()
    for view in pods:
        if view.pod.node in free:
            free[view.pod.node] -= view.pod.requests.gpu
            if not view.running or view.pod.terminating:
                idle["not running"] += view.pod.requests.gpu * dt
    spare = sum(max(0, f) for f in free.values())
    if spare <= 0:
        return idle
    pending = [v.pod.requests.gpu for v in pods if not v.pod.node and v.pod.requests.gpu]
    if any(fits([g], free) for g in pending):
        idle["pending pods"] += spare * dt
    elif any(fits([g], free) for g in growable):
        idle["growth"] += spare * dt
    else:
        idle["fragments"] += spare * dt
    return idle
