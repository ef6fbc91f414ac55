"""Admission: which waiting groups get room, and which are passed over.

Every pod not bound to a node, and every minimum trainer of an elastic job
about to start that is not created yet, grouped by job, oldest first, is
placed on the simulated nodes whole (per-node fit of CPU, memory and GPUs,
the node selector and NoSchedule/NoExecute taints), shrinking others if it
must (scaling.make_room). A group that cannot fit even then is passed over:
nothing is shrunk for it, the groups behind it still get their turn, and
it is reported (Plan.unplaceable); once it has waited too long it starves
(reservations).

Then the passed over: their pods that fit the room left keep it, oldest
group first, without shrinking anyone. The scheduler binds them one by one
as room appears (a fault-tolerant job starts with fewer trainers than its
minimum), and a hole that a large trainer fits is rare once growth has
filled it with small ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlk8s.autoscaler.cluster import Pod
from dlk8s.autoscaler.reservations import Patience, starve
from dlk8s.autoscaler.scaling import make_room
from dlk8s.autoscaler.simulation import Simulation, group_key, largest_first


def admit(
    sim: Simulation, groups: Sequence[list[Pod]], patience: Patience
) -> tuple[list[list[Pod]], list[list[Pod]]]:
    """Place each pending group, oldest first, shrinking others if it must.
    A group that cannot fit even then is passed over: nothing is shrunk for
    it and the groups behind it still get their turn; once it has waited
    too long, it starves (reservations.starve). Gated groups are placed off
    the kept nodes; others go where the scheduler puts them. Returns the
    groups admitted and those passed over."""
    admitted: list[list[Pod]] = []
    passed_over: list[list[Pod]] = []
    for group in groups:
        if make_room(sim, group, anywhere=not _gated(group)):
            admitted.append(group)
            continue
        passed_over.append(group)
        count = patience.nodes(group)
        if is_job(group) and count > 0:
            starve(sim, group, count)
    return admitted, passed_over


def hold_what_fits(sim: Simulation, passed_over: Sequence[list[Pod]]) -> list[list[Pod]]:
    """The pods of passed-over groups that fit the room left now, oldest
    group first, keep it from growth: the scheduler binds them one by one as
    room appears (a fault-tolerant job starts with fewer trainers), and a
    hole a large trainer fits is rare once growth has filled it with small
    ones. Nothing is shrunk for them, and the groups behind them were
    admitted first. The starving job placed its own (reservations.starve);
    gated groups hold nothing while nodes are kept, as they stay gated.
    Returns the groups that hold room."""
    held: list[list[Pod]] = []
    for group in passed_over:
        if group_key(group[0]) in sim.starving or (_gated(group) and sim.starving):
            continue
        placed = [p for p in largest_first(group) if sim.place_all([p]) is not None]
        if placed:
            held.append(placed)
    return held


def to_admit(
    sim: Simulation, admitted: Sequence[list[Pod]], passed_over: Sequence[list[Pod]]
) -> set[str]:
    """Jobs whose gated trainers may go to the scheduler now: those given
    room, a starving job itself (its room is kept) unless a younger one
    would reach an older one's kept room (sim.held_at_gate), and, once no
    job starves, every gated job (the gate only guards kept nodes)."""
    waiting = [
        g
        for g in passed_over
        if not sim.starving
        or (group_key(g[0]) in sim.starving and group_key(g[0]) not in sim.held_at_gate)
    ]
    return {
        s.job.uid
        for g in (*admitted, *waiting)
        if (s := sim.jobs.get(group_key(g[0]))) is not None and _gated(g) and not s.job.admitted
    }


def is_job(group: Sequence[Pod]) -> bool:
    """Pods of a job the operator runs (they carry a replica type). Other
    pending pods get room made for them but do not hold growth back: they
    may wait for things the planner does not model (volumes, pod affinity)."""
    return any(p.role for p in group)


def _gated(group: Sequence[Pod]) -> bool:
    return any(p.gated for p in group)
