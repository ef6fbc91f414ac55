"""Growth and shrink: who gives back a trainer, and who gets one more.

Fulfillment is (trainers - min) / (max - min). Shrinking takes from the most
fulfilled job, on a tie the dearer (GPUs, CPU, memory per trainer), then the
younger one; growth goes to the least fulfilled, the cheaper, then the older
one. Counts never leave [min, max].

- Making room (admission.admit, reservations.starve): a group that does not
  fit makes the most fulfilled jobs give back their highest trainer, one at
  a time and never below their minimum, until it fits; shrinks that turn
  out not to be needed are undone.
- Growth under way: trainers above a job's minimum that have no node yet
  (grown on an earlier pass: pending, or not created) get what room is
  left; one that finds none is given back.
- The max-load bound: while the cluster's requested CPU or memory is above
  max_load (EDL's 0.97) of its allocatable, the most fulfilled job shrinks.
- Growth: the least fulfilled running job gets one more trainer if some
  node fits it and CPU and memory stay within max_load; repeated until no
  job can grow. GPUs are bounded only by what nodes have, as in EDL: an
  idle GPU is pure waste, while CPU and memory headroom serves everything
  else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dlk8s.autoscaler.cluster import ElasticJob, Pod
from dlk8s.autoscaler.simulation import Growing, JobState, Simulation, job_name, unborn_trainer
from dlk8s.job.computeresources import Resources


def make_room(sim: Simulation, group: Sequence[Pod], anywhere: bool = False) -> bool:
    """Place a pending group, shrinking the most fulfilled jobs if it must."""
    placed = sim.place_all(group, anywhere)
    if placed is not None:
        return True
    saved = sim.snapshot()
    owner = group[0].owner_uid
    need = sum((p.requests for p in group), Resources())
    reason = f"making room for the pending pods of {group[0].namespace}/{job_name(group)}"
    steps: list[tuple[JobState, str | None]] = []
    while placed is None:
        donor = _most_fulfilled(sim, owner, need)
        if donor is None:
            sim.restore(saved)
            return False
        steps.append((donor, sim.shrink(donor, reason)))
        placed = sim.place_all(group, anywhere)
    sim.unplace(placed)
    _undo_unneeded(sim, group, steps, reason, anywhere)
    if sim.place_all(group, anywhere) is None:  # cannot happen: only what still fits was kept
        sim.restore(saved)
        return False
    for uid, (target, _, shrunk, old_reason) in saved[2].items():
        state = sim.jobs[uid]
        if state.target == target:
            state.shrunk, state.reason = shrunk, old_reason
    return True


def _most_fulfilled(sim: Simulation, owner: str, need: Resources) -> JobState | None:
    """The job to give back a trainer for a pending group: the most fulfilled
    one above its minimum whose trainer frees something the group needs.
    A job still applying its last change counts too: it is no less fulfilled
    for it, and its leaving pods are already counted as gone."""
    donors = [
        s
        for s in sim.jobs.values()
        if s.target > s.job.min and s.job.uid != owner and _helps(s.job.trainer, need)
    ]
    return max(donors, key=lambda s: (s.fulfillment, _cheapness(s.job)), default=None)


def _undo_unneeded(
    sim: Simulation,
    group: Sequence[Pod],
    steps: Sequence[tuple[JobState, str | None]],
    reason: str,
    anywhere: bool,
) -> None:
    """Give back the trainers the group turns out not to need, last shrunk
    first. A job gives up its highest trainers only: once one of its
    trainers is kept shrunk, its earlier (lower) steps must stay shrunk too."""
    kept: set[str] = set()
    for donor, node in reversed(steps):
        if donor.job.uid in kept:
            continue
        sim.unshrink(donor, node)
        trial = sim.place_all(group, anywhere)
        if trial is None:
            sim.shrink(donor, reason)
            kept.add(donor.job.uid)
        else:
            sim.unplace(trial)


def _helps(trainer: Resources, need: Resources) -> bool:
    """Whether freeing such a trainer gives the group something it needs."""
    return (
        (need.gpu > 0 and trainer.gpu > 0)
        or (need.cpu > 0 and trainer.cpu > 0)
        or (need.memory > 0 and trainer.memory > 0)
    )


def place_growing(sim: Simulation, growing: Sequence[Growing]) -> None:
    """Growth decided earlier gets what room the waiting jobs left; a
    trainer that finds none is given back, with every one above it."""
    for item in growing:
        state = item.state
        if item.index >= state.target:
            continue  # given back already, with a lower one
        placed = sim.place_all([item.pod or unborn_trainer(state, item.index)], anywhere=True)
        if placed is not None:
            state.slots[item.index] = placed[0][0]
            continue
        why = "cannot be scheduled" if item.pod else "finds no room"
        sim.shrink_to(state, item.index, f"{state.job.role} {item.index} {why}; giving it back")


def respect_bound(sim: Simulation) -> None:
    while True:
        over = sim.over_bound()
        if not over:
            return
        donors = [
            s
            for s in sim.jobs.values()
            if not s.frozen
            and s.target > s.job.min
            and any(getattr(s.job.trainer, r) > 0 for r in over)
        ]
        if not donors:
            return
        donor = max(donors, key=lambda s: (s.fulfillment, _cheapness(s.job)))
        # Pods may request more than a cluster without allocatable has.
        share = {r: _percent(getattr(sim.used, r), getattr(sim.total, r)) for r in over}
        text = ", ".join(f"{r} {v:.0f}%" for r, v in share.items())
        sim.shrink(donor, f"cluster load ({text}) is over the max load {sim.max_load:.0%}")


def _percent(used: int, total: int) -> float:
    return 100 * used / total if total > 0 else math.inf


def grow(sim: Simulation) -> None:
    while True:
        candidates = sorted(
            (
                s
                for s in sim.jobs.values()
                if s.job.running and not s.frozen and not s.shrunk and s.target < s.job.max
            ),
            key=lambda s: (s.fulfillment, _cheapness(s.job)),
        )
        for state in candidates:
            if not sim.within_bound(state.job.trainer):
                continue
            # Growth may borrow the kept nodes: its trainers are given back
            # as soon as the starving job's fit there (reservations.starve
            # shrinks them).
            trainer = unborn_trainer(state, state.target)
            node = sim.best_node(state.job.trainer, trainer, anywhere=True)
            if node is None:
                continue
            sim.grow(state, node, "")
            state.reason = f"room on the nodes, least fulfilled first ({sim.load_text()})"
            break
        else:
            return


def _cheapness(job: ElasticJob) -> tuple[int, int, int, str, str]:
    return (job.trainer.gpu, job.trainer.cpu, job.trainer.memory, job.created, job.key)
