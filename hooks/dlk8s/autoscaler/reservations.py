"""The starvation reserve: nodes kept for a job that has waited too long.

A passed-over job that has waited `reserve_after` seconds starves. Oldest
first, each of its trainers gets the room the most fulfilled jobs can give
back, and for the trainers still left, nodes are kept for it (Plan.kept):
one per `reserve_after` waited, the closest to fitting first among those
not kept for an older one. No other job's minimum is placed there, but
growth may borrow them (a trainer above a minimum is given back on the next
pass that needs its room), and pods created before cannot be held back.
While nodes are kept, new elastic trainers are created gated
(config.Admission); a gated job is admitted (a Change, maybe of the same
count) once its minimum fits off the kept nodes, and every gated job once
no job starves (admission.to_admit). A gated job that starves in its turn
is admitted only when it is the oldest starving job or its trainers all fit
off the older ones' kept nodes (Simulation.held_at_gate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from dlk8s.autoscaler.cluster import Pod
from dlk8s.autoscaler.scaling import make_room
from dlk8s.autoscaler.simulation import Simulation, group_key, largest_first, share
from dlk8s.job.computeresources import Resources


@dataclass(frozen=True)
class Patience:
    """How long a job that cannot be placed waits before nodes are kept
    for it: one node after `reserve_after` seconds, one more for every
    further `reserve_after`, up to one per trainer it still waits for."""

    now: float | None  # epoch seconds; None keeps no nodes for anyone
    reserve_after: float  # seconds per node kept

    def nodes(self, group: Sequence[Pod]) -> int:
        stamps = [t for t in (_epoch(p.created) for p in group) if t is not None]
        if self.now is None or self.reserve_after <= 0 or not stamps:
            return 0
        return max(0, int((self.now - min(stamps)) // self.reserve_after))


def _epoch(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def starve(sim: Simulation, group: Sequence[Pod], count: int) -> None:
    """A job that cannot be placed, once it has waited too long:
    each of its trainers that fits now, or fits once the most fulfilled
    jobs give back trainers, gets that room (it starts with fewer than its
    minimum, as a fault-tolerant job may); for the rest, `count` nodes
    closest to fitting them are kept from everyone else, so that room freed
    there by jobs ending adds up instead of going to smaller, younger pods.
    Growth may borrow it meanwhile: this shrinks those trainers as soon as
    one of the job's fits. Without this, a job of large trainers can wait
    for ever behind smaller ones."""
    key = group_key(group[0])
    younger = bool(sim.starving)
    sim.starving.append(key)
    # Gated trainers go where the gate lets them: off the nodes kept for an
    # older starving job (a gated group is held back from exactly that room).
    gated = any(p.gated for p in group)
    unplaced = [p for p in largest_first(group) if not make_room(sim, [p], anywhere=not gated)]
    if not unplaced:
        return
    if gated and younger:
        # Ungated now, kube-scheduler could bind what did not fit onto the
        # older job's kept room: it waits behind the gate for its own.
        sim.held_at_gate.add(key)
    closest = _closest_nodes(sim, unplaced[0])
    if not closest:  # no node could ever hold it: keeping any would help nobody
        sim.starving.remove(key)
    for name in closest[: min(count, len(unplaced))]:
        sim.kept[name] = key


def _closest_nodes(sim: Simulation, pod: Pod) -> list[str]:
    """The nodes a pod may go to, by how little of its request their room
    at minimums lacks (as a share of each node's allocatable). Room at
    minimums (free, and trainers above their job's minimum: growth gives
    those back) moves only as jobs end or minimums are placed, so the nodes
    kept stay the same from pass to pass while room adds up on them; free
    room alone would move them to wherever a job ended last."""
    lent = _above_minimums(sim)

    def lacking(name: str) -> tuple[float, str]:
        room, alloc = sim.free[name] + lent.get(name, Resources()), sim.nodes[name].allocatable
        short = sum(
            share(max(0, need - have), whole)
            for need, have, whole in (
                (pod.requests.gpu, room.gpu, alloc.gpu),
                (pod.requests.cpu, room.cpu, alloc.cpu),
                (pod.requests.memory, room.memory, alloc.memory),
            )
            if need > 0
        )
        return short, name

    fitting = [
        n
        for n, node in sim.nodes.items()
        if pod.requests.fits_in(node.allocatable)
        and n not in sim.kept
        and sim.may_use(n, pod, anywhere=True)
    ]
    return sorted(fitting, key=lacking)


def _above_minimums(sim: Simulation) -> dict[str, Resources]:
    """Per node, the requests of the trainers above their job's minimum."""
    lent: dict[str, Resources] = {}
    for state in sim.jobs.values():
        for index, node in state.slots.items():
            if node is not None and index >= state.job.min:
                lent[node] = lent.get(node, Resources()) + state.job.trainer
    return lent
