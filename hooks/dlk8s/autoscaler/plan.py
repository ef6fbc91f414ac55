"""The elastic autoscaler's plan, as pure functions (EDL's autoscaler).

plan(nodes, pods, jobs) takes the cluster as the API shows it (the nodes'
allocatable resources, every pod that has not terminated, the elastic jobs
of either kind: autoscaler.cluster, read by autoscaler.manifests) and
returns new trainer counts (a "trainer" is a pod of the role a job scales:
a PaddleJob's TRAINER, an elastic PyTorchJob's WORKER). The I/O side
(autoscaler.loop) feeds it from watches and writes each change to the job's
count annotation (dlk8s.io/trainers, dlk8s.io/workers), which the
reconciler applies.

A pass works on a simulated copy of the cluster (autoscaler.simulation), in
this order. Admission comes before growth: a job that waits for room starts
at its minimum as soon as others can make it, and nothing grows while it
waits.

1. Accounting: who holds room, what waits for it (autoscaler.accounting).
2. Admission of the waiting groups, oldest first, shrinking the most
   fulfilled jobs for them (autoscaler.admission, scaling.make_room); a
   group passed over for too long starves and has nodes kept for it
   (autoscaler.reservations).
3. The passed over keep the room that fits their pods now, without
   shrinking anyone (admission.hold_what_fits).
4. Growth under way: trainers grown earlier that have no node yet get
   what room is left, or are given back (scaling.place_growing).
5. The max-load bound (scaling.respect_bound).
6. Growth (scaling.grow), only if no pod given room in step 2 or 3 still
   waits to be bound (a new trainer is tried by the scheduler at once,
   while pods that failed before wait out their back-off: it could take
   their node). Only pods of the operator's jobs hold growth back; other
   pending pods may wait for what the plan does not model (volumes, pod
   affinity).

Every pod is placed only where its node selector, tolerations and required
node affinity let it go (cluster.Placement); a trainer not created yet goes
where the job's other trainers may, or its trainer template says.

A job some of whose trainers have exited 0 is finishing (a PaddleJob's
master has no task left, a PyTorchJob's torchrun group is done) and is left
alone: job_from_manifest skips it. Jobs whose bounds are equal are not
elastic and never touched; other roles (pservers, masters) never scale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from dlk8s.autoscaler.accounting import account, pending, summary
from dlk8s.autoscaler.admission import admit, hold_what_fits, is_job, to_admit
from dlk8s.autoscaler.cluster import ClusterSummary, ElasticJob, Node, Pod
from dlk8s.autoscaler.reservations import Patience
from dlk8s.autoscaler.scaling import grow, place_growing, respect_bound
from dlk8s.autoscaler.simulation import JobState, Simulation, group_key, job_name
from dlk8s.job.computeresources import Resources

DEFAULT_MAX_LOAD: Final = 0.97
# How long a job that cannot be placed waits before a node is kept for it,
# and then how long each further node takes (see reservations.Patience).
DEFAULT_RESERVE_AFTER: Final = 600.0


@dataclass(frozen=True)
class Change:
    uid: str  # the job's: the patch is guarded by it
    key: str  # namespace/name of the job to patch
    old: int  # the count the job asked for
    new: int  # the count the plan gives it
    reason: str  # the count's reason annotation (dlk8s.io/trainers-reason)
    kind: str = ""  # the job's API kind (ElasticJob.kind)


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]  # what the loop writes
    cluster: ClusterSummary  # what the pass log shows
    unplaceable: tuple[str, ...]  # pending groups that cannot fit even after shrinking
    # Each node's free room once the plan and the pending pods are in place,
    # as the simulation predicts it (never negative in any resource).
    free_after: Mapping[str, Resources] = field(default_factory=dict)
    # Each starving job (namespace/name) and the nodes kept for it (no
    # other job's minimum is placed there); empty while no job starves.
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def plan(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    jobs: Iterable[ElasticJob],
    max_load: float = DEFAULT_MAX_LOAD,
    now: float | None = None,
    reserve_after: float = DEFAULT_RESERVE_AFTER,
) -> Plan:
    """`now` (epoch seconds) dates the waits; None keeps no nodes for anyone."""
    nodes, pods = list(nodes), list(pods)
    elastic = {j.uid: j for j in jobs if j.min < j.max}
    sim = Simulation(nodes, max_load)
    observed = summary(sim, pods, len(elastic))
    unbound = account(sim, pods, elastic)
    groups, growing = pending(sim, unbound)
    admitted, passed_over = admit(sim, groups, Patience(now, reserve_after))
    held = hold_what_fits(sim, passed_over)
    place_growing(sim, growing)
    respect_bound(sim)
    # Admission before growth: while pods of a job given room above still
    # wait for the scheduler, new trainers would race them for it (a new pod
    # is tried at once, a pod that failed before waits out its back-off).
    if not any(is_job(g) for g in (*admitted, *held)):
        grow(sim)
    ungated = to_admit(sim, admitted, passed_over)
    changes = tuple(
        Change(s.job.uid, s.job.key, s.job.trainers, s.target, _why(sim, s), s.job.kind)
        for s in sorted(sim.jobs.values(), key=lambda s: s.job.key)
        if s.target != s.job.trainers or s.job.uid in ungated
    )
    unplaceable = tuple(f"{g[0].namespace}/{g[0].name} (+{len(g) - 1})" for g in passed_over)
    return Plan(changes, observed, unplaceable, dict(sim.free), _kept(sim, passed_over))


def _kept(sim: Simulation, passed_over: Sequence[list[Pod]]) -> dict[str, tuple[str, ...]]:
    return {
        f"{g[0].namespace}/{job_name(g)}": tuple(
            sorted(n for n, key in sim.kept.items() if key == group_key(g[0]))
        )
        for g in passed_over
        if group_key(g[0]) in sim.starving
    }


def _why(sim: Simulation, state: JobState) -> str:
    if state.target != state.job.trainers or state.job.admitted:
        return state.reason
    return f"admitted at {state.target} {state.job.role}s ({sim.load_text()})"
