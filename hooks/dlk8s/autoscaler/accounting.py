"""The first step of a pass: who holds room, and what waits for it.

A node's free room is its allocatable CPU, memory and GPUs minus the
requests of the pods bound to it. Pods on their way out (terminating, or
trainers above the count their job now asks for) count as gone. A job
still in its last change (such pods exist, or trainers it asks for do not
exist yet) does not grow this pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dlk8s.autoscaler.cluster import ClusterSummary, ElasticJob, Pod
from dlk8s.autoscaler.simulation import Growing, JobState, Simulation, group_key, unborn_trainer
from dlk8s.job.computeresources import Resources


def summary(sim: Simulation, pods: Sequence[Pod], elastic: int) -> ClusterSummary:
    requested = Resources()
    for pod in pods:
        if pod.node in sim.nodes:
            requested = requested + pod.requests
    pending = sum(1 for p in pods if not p.node and not p.terminating)
    return ClusterSummary(len(sim.nodes), sim.total, requested, pending, elastic)


def account(sim: Simulation, pods: Sequence[Pod], elastic: Mapping[str, ElasticJob]) -> list[Pod]:
    """Take the room of every bound pod that stays; record each elastic job's
    trainers. Returns the pods still waiting for a node."""
    trainers: dict[str, dict[int, Pod]] = {uid: {} for uid in elastic}
    models: dict[str, Pod] = {}
    unbound: list[Pod] = []
    for pod in pods:
        job = elastic.get(pod.owner_uid)
        if job is not None and pod.role != job.role:
            job = None  # another role of an elastic job: a pod like any other
        if job is not None:
            models[job.uid] = pod
        if job is not None and pod.index >= 0:
            trainers[job.uid][pod.index] = pod
        if pod.terminating or (job is not None and pod.index >= job.trainers):
            continue  # on its way out: its room counts as free
        if not pod.node:
            unbound.append(pod)
        elif pod.node in sim.free:
            sim.take(pod.node, pod.requests)
    for uid, job in elastic.items():
        sim.jobs[uid] = _job_state(sim, job, trainers[uid])
        sim.jobs[uid].model = models.get(uid)
    return unbound


def _job_state(sim: Simulation, job: ElasticJob, mine: Mapping[int, Pod]) -> JobState:
    missing = any(i not in mine for i in range(job.trainers))
    leaving = any(p.terminating or i >= job.trainers for i, p in mine.items())
    slots: dict[int, str | None] = {
        i: p.node
        for i, p in mine.items()
        if p.node in sim.free and not p.terminating and i < job.trainers
    }
    return JobState(job, job.trainers, slots, frozen=missing or leaving)


def pending(sim: Simulation, unbound: Sequence[Pod]) -> tuple[list[list[Pod]], list[Growing]]:
    """What waits for room: jobs to admit (each a group of pods placed whole,
    oldest first) and trainers of running jobs above their minimum (growth)."""
    groups: dict[str, list[Pod]] = {}
    growing: list[Growing] = []
    waiting: set[tuple[str, int]] = set()  # (job uid, trainer index) of pending trainers
    for pod in unbound:
        state = sim.jobs.get(pod.owner_uid)
        if state is not None and pod.role != state.job.role:
            state = None  # another role of an elastic job: a pod like any other
        if state is not None:
            waiting.add((pod.owner_uid, pod.index))
        if state is not None and pod.index >= state.job.min:
            growing.append(Growing(state, pod.index, pod))
        else:
            groups.setdefault(group_key(pod), []).append(pod)
    for uid, state in sim.jobs.items():  # asked for, not created yet
        for index in range(state.job.trainers):
            if index in state.slots or (uid, index) in waiting:
                continue
            if index >= state.job.min:
                growing.append(Growing(state, index, None))
            elif not state.job.running:
                # A job about to start. (A running job's missing trainer has
                # ended, or its pod is being recreated: pending, next pass.)
                groups.setdefault(uid, []).append(unborn_trainer(state, index))
    ordered = sorted(groups.values(), key=lambda g: (min(p.created for p in g), g[0].key))
    return ordered, sorted(growing, key=lambda g: (g.state.job.key, g.index))
