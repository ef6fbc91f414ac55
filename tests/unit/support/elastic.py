"""Small clusters for the autoscaler's plan: nodes, elastic jobs and their
pods, built in a line each. Shared by the autoscaler's tests by topic."""

from __future__ import annotations

from typing import Any

from dlk8s.autoscaler.cluster import ElasticJob, Node, Pod
from dlk8s.autoscaler.plan import Plan
from dlk8s.job.computeresources import Resources

GI = 2**30


def node(name: str, cpu: float = 8, memory_gi: int = 32, gpu: int = 4, **kw: Any) -> Node:
    return Node(name, Resources(int(cpu * 1000), memory_gi * GI, gpu), **kw)


def res(cpu: float = 0, memory_gi: float = 0, gpu: int = 0) -> Resources:
    return Resources(int(cpu * 1000), int(memory_gi * GI), gpu)


def job(uid: str, low: int, high: int, trainers: int, trainer: Resources, **kw: Any) -> ElasticJob:
    kw.setdefault("running", True)
    return ElasticJob(uid, f"ns/{uid}", low, high, trainers, trainer, **kw)


def trainer_pods(j: ElasticJob, *nodes: str, start: int = 0) -> list[Pod]:
    """Trainers start..start+len(nodes)-1 of `j`, bound to these nodes ("" = pending)."""
    return [
        Pod("ns", f"{j.uid}-trainer-{i}", n, j.trainer, owner_uid=j.uid, role="trainer", index=i)
        for i, n in enumerate(nodes, start=start)
    ]


def pod(name: str, node_name: str, requests: Resources, **kw: Any) -> Pod:
    return Pod("ns", name, node_name, requests, **kw)


def newcomer(
    name: str, gpu: int, created: str = "2026-01-01T01:00:00Z", count: int = 1
) -> list[Pod]:
    """A job's pending trainers, as the operator creates them (they carry a role)."""
    return [
        pod(f"{name}-trainer-{i}", "", res(1, 1, gpu=gpu), owner_uid=name, role="trainer",
            index=i, created=created)
        for i in range(count)
    ]  # fmt: skip


def targets(result: Plan) -> dict[str, int]:
    return {c.uid: c.new for c in result.changes}
