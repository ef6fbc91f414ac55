"""A simulated copy of the cluster the plan places pods and trainers on.

Each node's free room, each elastic job's trainer count and where its
trainers sit, and the nodes kept for starving jobs. The simulated scheduler
picks, among the nodes that fit, the one with the most free CPU and memory
(kube-scheduler's default LeastAllocated score), so the plan predicts where
pods land; when it is wrong anyway, a trainer left Pending is given back on
the next pass (scaling.place_growing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dlk8s.autoscaler.cluster import ElasticJob, Node, Pod
from dlk8s.job.computeresources import Resources


@dataclass
class JobState:
    """An elastic job in the simulation: the count the plan gives it so far."""

    job: ElasticJob  # as observed
    target: int  # the trainer count planned so far
    # Trainer index -> the node whose room it holds in the simulation (None: none).
    slots: dict[int, str | None]
    frozen: bool  # still in its last change: it neither grows nor gives back to the bound
    shrunk: bool = False  # shrunk this pass: it does not grow again
    reason: str = ""  # why its count changes (the annotation's reason)
    # A trainer of the job, whose placement a trainer not created yet will
    # have too (the trainer template's, plus what the namespace's admission
    # plugins added): growth must fit it, not just any node's room. None
    # while the job has no trainer: then the trainer template's placement.
    model: Pod | None = None

    @property
    def fulfillment(self) -> float:
        return self.job.fulfillment(self.target)


@dataclass(frozen=True)
class Growing:
    """A trainer the job asked for above its minimum that has no node yet:
    growth decided on an earlier pass (its pod pending, or not created)."""

    state: JobState  # its job
    index: int  # its trainer index, at or above the job's minimum
    pod: Pod | None  # None: not created yet


class Simulation:
    def __init__(self, nodes: Sequence[Node], max_load: float) -> None:
        # The schedulable nodes by name: cordoned ones take no pod.
        self.nodes = {n.name: n for n in nodes if n.schedulable}
        # Each node's room left, as the plan fills it.
        self.free = {name: n.allocatable for name, n in self.nodes.items()}
        # The cluster's allocatable, against which max_load is judged.
        self.total = sum((n.allocatable for n in self.nodes.values()), Resources())
        # What the pods placed so far request, summed.
        self.used = Resources()
        # The share of CPU and memory growth stops at.
        self.max_load = max_load
        # Each elastic job by uid.
        self.jobs: dict[str, JobState] = {}
        # Node -> the group key of the starving job it is kept for
        # (reservations.starve): only its pods, growth and pending pods the
        # scheduler binds where it likes are placed there. And the starving
        # jobs' group keys, oldest first.
        self.kept: dict[str, str] = {}
        self.starving: list[str] = []
        # Starving jobs whose gated trainers stay gated: younger than another
        # starving job and not all placed off its kept nodes, so that the
        # scheduler, which knows nothing of keeping, cannot hand them that room.
        self.held_at_gate: set[str] = set()

    # -- room -------------------------------------------------------------------

    def take(self, node: str, req: Resources) -> None:
        self.free[node] = self.free[node] - req
        self.used = self.used + req

    def give(self, node: str, req: Resources) -> None:
        self.free[node] = self.free[node] + req
        self.used = self.used - req

    def may_use(self, name: str, pod: Pod | None, anywhere: bool = False) -> bool:
        """Whether the pod may go to this node: its placement (selector,
        taints, required node affinity), and the nodes kept for the starving
        job (unless the pod is its, or one the scheduler binds where it
        likes: `anywhere`)."""
        owner = self.kept.get(name)
        if owner and not anywhere and (pod is None or group_key(pod) != owner):
            return False
        return pod is None or pod.placement.allows(self.nodes[name])

    def best_node(
        self, req: Resources, pod: Pod | None = None, anywhere: bool = False
    ) -> str | None:
        """Where kube-scheduler's default score would put it: of the nodes it
        fits on, the one with the most free CPU and memory (by share)."""
        best: tuple[float, str] | None = None
        for name, room in self.free.items():
            if not req.fits_in(room) or not self.may_use(name, pod, anywhere):
                continue
            alloc = self.nodes[name].allocatable
            score = (
                share(room.cpu - req.cpu, alloc.cpu) + share(room.memory - req.memory, alloc.memory)
            ) / 2
            if best is None or (-score, name) < (-best[0], best[1]):
                best = (score, name)
        return best[1] if best else None

    def over_bound(self) -> list[str]:
        over = []
        if self.used.cpu > self.max_load * self.total.cpu:
            over.append("cpu")
        if self.used.memory > self.max_load * self.total.memory:
            over.append("memory")
        return over

    def within_bound(self, extra: Resources) -> bool:
        after = self.used + extra
        return (after.cpu <= self.max_load * self.total.cpu or extra.cpu <= 0) and (
            after.memory <= self.max_load * self.total.memory or extra.memory <= 0
        )

    def load_text(self) -> str:
        parts = []
        for label, used, total in (
            ("GPUs", self.used.gpu, self.total.gpu),
            ("CPU", self.used.cpu, self.total.cpu),
            ("memory", self.used.memory, self.total.memory),
        ):
            if total > 0:
                parts.append(f"{label} {100 * used / total:.0f}%")
        return "requested " + ", ".join(parts)

    # -- placing pods ----------------------------------------------------------

    def place_all(
        self, pods: Sequence[Pod], anywhere: bool = False
    ) -> list[tuple[str, Resources]] | None:
        """Place every pod (largest first); on failure undo and return None."""
        placed: list[tuple[str, Resources]] = []
        for pod in largest_first(pods):
            node = self.best_node(pod.requests, pod, anywhere)
            if node is None:
                self.unplace(placed)
                return None
            self.take(node, pod.requests)
            placed.append((node, pod.requests))
        return placed

    def unplace(self, placed: Sequence[tuple[str, Resources]]) -> None:
        for node, req in placed:
            self.give(node, req)

    # -- trainers --------------------------------------------------------------

    def shrink(self, state: JobState, reason: str) -> str | None:
        """Remove the highest trainer; returns the node whose room it freed."""
        state.target -= 1
        node = state.slots.pop(state.target, None)
        if node is not None:
            self.give(node, state.job.trainer)
        state.shrunk = True
        state.reason = reason
        return node

    def unshrink(self, state: JobState, node: str | None) -> None:
        """Undo the last shrink of `state`, which freed `node`."""
        if node is not None:
            self.take(node, state.job.trainer)
        state.slots[state.target] = node
        state.target += 1

    def shrink_to(self, state: JobState, target: int, reason: str) -> None:
        while state.target > max(target, state.job.min):
            self.shrink(state, reason)

    def grow(self, state: JobState, node: str, reason: str) -> None:
        self.take(node, state.job.trainer)
        state.slots[state.target] = node
        state.target += 1
        state.reason = reason

    def snapshot(self) -> tuple[Any, ...]:
        jobs = {uid: (s.target, dict(s.slots), s.shrunk, s.reason) for uid, s in self.jobs.items()}
        return dict(self.free), self.used, jobs

    def restore(self, saved: tuple[Any, ...]) -> None:
        free, used, jobs = saved
        self.free, self.used = dict(free), used
        for uid, (target, slots, shrunk, reason) in jobs.items():
            state = self.jobs[uid]
            state.target, state.slots, state.shrunk, state.reason = (
                target,
                dict(slots),
                shrunk,
                reason,
            )


def share(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0


def largest_first(pods: Iterable[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (p.requests, p.name), reverse=True)


def group_key(pod: Pod) -> str:
    """The pending group a pod belongs to: its job's, or its own."""
    return pod.owner_uid or pod.key


def job_name(group: Sequence[Pod]) -> str:
    name = group[0].name
    role = group[0].role
    return name.rsplit(f"-{role}-", 1)[0] if role and f"-{role}-" in name else name


def unborn_trainer(state: JobState, index: int) -> Pod:
    """A trainer the operator is about to create, as a pending pod placed
    where the job's other pods may go."""
    job, model = state.job, state.model
    namespace, _, name = job.key.partition("/")
    return Pod(
        namespace=namespace,
        name=f"{name}-{job.role}-{index}",
        node="",
        requests=job.trainer,
        owner_uid=job.uid,
        role=job.role,
        index=index,
        created=job.created,
        placement=model.placement if model else job.placement,
        # Created while nodes are kept, it would be gated: place it as such.
        gated=not job.admitted,
    )
