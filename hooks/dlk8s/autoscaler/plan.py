"""The elastic autoscaler's planning, as pure functions (EDL's autoscaler).

plan(nodes, pods, jobs) takes the cluster as the API shows it (the nodes'
allocatable resources, every pod that has not terminated, the elastic
PaddleJobs) and returns new trainer counts. The I/O side
(autoscaler.loop) feeds it from watches and writes each change to the
job's annotation dlk8s.io/trainers, which the reconciler applies.

What it does, in order, on a simulated copy of the cluster. Admission
comes before growth: a job that waits for room starts at its minimum as
soon as others can make it, and nothing grows while it waits.

1. Accounting. A node's free room is its allocatable CPU, memory and GPUs
   minus the requests of the pods bound to it. Pods on their way out
   (terminating, or trainers above the count their job now asks for) count
   as gone. A job still in its last change (such pods exist, or trainers it
   asks for do not exist yet) does not grow this pass.
2. Admission. Every pod not bound to a node, and every minimum trainer of
   an elastic job about to start that is not created yet, grouped by job,
   oldest first, is placed on the simulated nodes whole (per-node fit of
   CPU, memory and GPUs, the node selector and NoSchedule/NoExecute
   taints). A group that does not fit makes the most fulfilled elastic jobs
   give back their highest trainer, one at a time and never below their
   minimum, until it fits; shrinks that turn out not to be needed are
   undone. A group that cannot fit even then is passed over: nothing is
   shrunk for it, the groups behind it still get their turn, and it is
   reported (Plan.unplaceable).
   Starving: a passed-over job that has waited `reserve_after` seconds
   gets, oldest first, for each trainer, the room the most fulfilled jobs
   can give back, and for the trainers still left, nodes kept for it
   (Plan.kept): one per `reserve_after` waited, the closest to fitting
   first among those not kept for an older one. No other job's minimum is
   placed there, but growth may borrow them (a trainer above a minimum is
   given back on the next pass that needs its room), and pods created
   before cannot be held back. While nodes are kept, new elastic trainers
   are created gated (config.Admission); a gated job is admitted (a
   Change, maybe of the same count) once its minimum fits off the kept
   nodes, and every gated job once no job starves.
3. The passed over. Pods of a group passed over in step 2 that fit the room
   left now keep it, oldest group first, without shrinking anyone: the
   scheduler binds them one by one as room appears (a fault-tolerant job
   starts with fewer trainers than its minimum), and a hole that a large
   trainer fits is rare once growth has filled it with small ones.
4. Growth under way. Trainers above a job's minimum that have no node yet
   (grown on an earlier pass: pending, or not created) get what room is
   left; one that finds none is given back.
5. The max-load bound: while the cluster's requested CPU or memory is above
   max_load (EDL's 0.97) of its allocatable, the most fulfilled job shrinks.
6. Growth, only if no pod given room in step 2 or 3 still waits to be bound
   (a new trainer is tried by the scheduler at once, while pods that failed
   before wait out their back-off: it could take their node). Only pods of
   the operator's jobs hold growth back; other pending pods may wait for
   what the plan does not model (volumes, affinity). The least fulfilled
   running job gets one more trainer if some node fits it and CPU and
   memory stay within max_load; repeated until no job can grow. GPUs are
   bounded only by what nodes have, as in EDL: an idle GPU is pure waste,
   while CPU and memory headroom serves everything else.

A job some of whose trainers have exited 0 is finishing (the master's task
queue is empty) and is left alone: job_from_manifest skips it.

Fulfillment is (trainers - min) / (max - min); on a tie growth goes to the
cheaper job (GPUs, CPU, memory per trainer), then the older one, and
shrinking takes from the dearer, then the younger one. Counts never leave
[minInstance, maxInstance]; jobs with minInstance = maxInstance are not
elastic and never touched; pservers never scale. The simulated scheduler
picks, among the nodes that fit, the one with the most free CPU and memory
(kube-scheduler's default LeastAllocated score), so the plan predicts where
pods land; when it is wrong anyway, a trainer left Pending is given back on
the next pass (step 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from dlk8s.job.api import (
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    State,
    as_dict,
    as_int,
    as_list,
    as_str,
    dig,
    string_map,
)
from dlk8s.job.kinds.paddlejob import (
    KIND,
    TRAINER,
    is_admission_gate,
    is_elastic,
    requested_trainers,
    trainer_bounds,
    trainer_count,
)
from dlk8s.job.resources import Resources, container_requests, from_list, pod_requests

DEFAULT_MAX_LOAD: Final = 0.97
# How long a job that cannot be placed waits before a node is kept for it,
# and then how long each further node takes (see _Patience, _starve).
DEFAULT_RESERVE_AFTER: Final = 600.0
_TRAINER_ROLE: Final = TRAINER.lower()
_BLOCKING_EFFECTS: Final = ("NoSchedule", "NoExecute")


# --- the cluster as the planner sees it ----------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class Node:
    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    schedulable: bool = True


@dataclass(frozen=True, slots=True)
class Pod:
    """What the planner needs of a pod that has not terminated."""

    namespace: str
    name: str
    node: str  # "" while not bound
    requests: Resources
    terminating: bool = False
    owner_uid: str = ""  # the controller's uid
    role: str = ""  # dlk8s.io/replica-type
    index: int = -1  # dlk8s.io/replica-index
    created: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    gated: bool = False  # held back by our admission gate: the scheduler leaves it alone

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ElasticJob:
    uid: str
    key: str  # namespace/name
    min: int
    max: int
    trainers: int  # the count the job asks for now
    trainer: Resources  # one trainer's requests
    running: bool  # started and not finishing: may grow
    created: str = ""
    # It carries a trainer count (ours or a user's): trainers it creates
    # are never gated again (see config.Admission).
    admitted: bool = True

    def fulfillment(self, trainers: int) -> float:
        return (trainers - self.min) / (self.max - self.min)


@dataclass(frozen=True)
class Change:
    uid: str
    key: str
    old: int
    new: int
    reason: str


@dataclass(frozen=True)
class ClusterSummary:
    """The cluster as observed (before the plan): usable nodes and bound pods."""

    nodes: int
    total: Resources
    requested: Resources
    pending_pods: int
    elastic_jobs: int

    @property
    def free(self) -> Resources:
        return self.total - self.requested

    def as_log(self) -> dict[str, Any]:
        def block(unit: str, total: float, requested: float) -> dict[str, Any]:
            return {
                "total": round(total, 3),
                "requested": round(requested, 3),
                "free": round(total - requested, 3),
                "unit": unit,
            }

        gib = 2**30
        return {
            "nodes": self.nodes,
            "cpu": block("cores", self.total.cpu / 1000, self.requested.cpu / 1000),
            "memory": block("GiB", self.total.memory / gib, self.requested.memory / gib),
            "gpu": block("gpus", self.total.gpu, self.requested.gpu),
            "pendingPods": self.pending_pods,
            "elasticJobs": self.elastic_jobs,
        }


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]
    cluster: ClusterSummary
    unplaceable: tuple[str, ...]  # pending groups that cannot fit even after shrinking
    # Each node's free room once the plan and the pending pods are in place,
    # as the simulation predicts it (never negative in any resource).
    free_after: Mapping[str, Resources] = field(default_factory=dict)
    # Each starving job (namespace/name) and the nodes kept for it (no
    # other job's minimum is placed there); empty while no job starves.
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# --- from API objects (lenient: never raise) ------------------------------------------


def node_from_manifest(obj: object) -> Node | None:
    name = dig(obj, "metadata", "name")
    if not isinstance(name, str) or not name:
        return None
    taints = tuple(
        Taint(as_str(t.get("key")), as_str(t.get("value")), as_str(t.get("effect")))
        for t in as_list(dig(obj, "spec", "taints"))
        if isinstance(t, dict)
    )
    return Node(
        name=name,
        allocatable=from_list(dig(obj, "status", "allocatable")),
        labels=string_map(dig(obj, "metadata", "labels")),
        taints=taints,
        schedulable=dig(obj, "spec", "unschedulable") is not True,
    )


def pod_from_manifest(obj: object) -> Pod | None:
    """None for pods that have terminated (they hold no resources)."""
    meta = as_dict(dig(obj, "metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or dig(obj, "status", "phase") in ("Succeeded", "Failed"):
        return None
    spec = as_dict(dig(obj, "spec"))
    labels = as_dict(meta.get("labels"))
    index = as_str(labels.get(LABEL_REPLICA_INDEX))
    owner = next(
        (
            ref
            for ref in as_list(meta.get("ownerReferences"))
            if isinstance(ref, dict) and ref.get("controller") is True
        ),
        {},
    )
    tolerations = tuple(
        Toleration(
            as_str(t.get("key")),
            as_str(t.get("operator"), "Equal"),
            as_str(t.get("value")),
            as_str(t.get("effect")),
        )
        for t in as_list(spec.get("tolerations"))
        if isinstance(t, dict)
    )
    return Pod(
        namespace=as_str(meta.get("namespace")),
        name=name,
        node=as_str(spec.get("nodeName")),
        requests=pod_requests(spec),
        terminating=meta.get("deletionTimestamp") is not None,
        owner_uid=as_str(owner.get("uid")),
        role=as_str(labels.get(LABEL_REPLICA_TYPE)),
        index=int(index) if index.isascii() and index.isdigit() and len(index) < 8 else -1,
        created=as_str(meta.get("creationTimestamp")),
        node_selector=string_map(spec.get("nodeSelector")),
        tolerations=tolerations,
        gated=any(map(is_admission_gate, as_list(spec.get("schedulingGates")))),
    )


def job_from_manifest(obj: object) -> ElasticJob | None:
    """An elastic PaddleJob the autoscaler may move; None for anything else
    (not elastic, unusable spec, finished or finishing, suspended or being
    deleted)."""
    if dig(obj, "kind") != KIND or not is_elastic(obj):
        return None
    meta = as_dict(dig(obj, "metadata"))
    status = as_dict(dig(obj, "status"))
    if (
        meta.get("deletionTimestamp") is not None
        or status.get("state") in ("Succeeded", "Failed")
        or _finishing(status)
        or dig(obj, "spec", "runPolicy", "suspend") is True
        or dig(obj, "spec", "faultTolerant") is not True
    ):
        return None
    bounds, count = trainer_bounds(obj), trainer_count(obj)
    uid, name = meta.get("uid"), meta.get("name")
    if bounds is None or count is None or not isinstance(uid, str) or not isinstance(name, str):
        return None
    trainer = container_requests({"resources": dig(obj, "spec", "trainer", "resources")})
    return ElasticJob(
        uid=uid,
        key=f"{as_str(meta.get('namespace'))}/{name}",
        min=bounds[0],
        max=bounds[1],
        trainers=count,
        trainer=trainer,
        running=status.get("state") == "Running" and status.get("phase") == "Running",
        created=as_str(meta.get("creationTimestamp")),
        admitted=requested_trainers(obj) is not None,
    )


def _finishing(status: Mapping[str, Any]) -> bool:
    """Some trainer has exited 0: the master's task queue is empty and the
    job is ending. Scaling it now would cut trainers short or add ones with
    nothing to do, and its finished trainers (gone from the pods the plan
    sees) are not trainers waiting for room."""
    for entry in as_list(status.get("replicaStatuses")):
        if isinstance(entry, dict) and entry.get("replicaType") == TRAINER:
            return as_int(as_dict(entry.get("replicasStates")).get(State.SUCCEEDED), 0) > 0
    return False


# --- the simulation ---------------------------------------------------------------------


@dataclass
class _JobState:
    job: ElasticJob
    target: int
    # Trainer index -> the node whose room it holds in the simulation (None: none).
    slots: dict[int, str | None]
    frozen: bool
    shrunk: bool = False
    reason: str = ""
    # A pod of the job whose node selector and tolerations a trainer not
    # created yet will have too (they come from the namespace's admission
    # plugins, not from the PaddleJob's spec): growth must fit them, not
    # just any node's room. None while the job has no pod.
    model: Pod | None = None

    @property
    def fulfillment(self) -> float:
        return self.job.fulfillment(self.target)


class _Simulation:
    def __init__(self, nodes: Sequence[Node], max_load: float) -> None:
        self.nodes = {n.name: n for n in nodes if n.schedulable}
        self.free = {name: n.allocatable for name, n in self.nodes.items()}
        self.total = sum((n.allocatable for n in self.nodes.values()), Resources())
        self.used = Resources()
        self.max_load = max_load
        self.jobs: dict[str, _JobState] = {}
        # Node -> the group key of the starving job it is kept for (_starve):
        # only its pods, growth and pending pods the scheduler binds where
        # it likes are placed there. And the starving jobs' group keys.
        self.kept: dict[str, str] = {}
        self.starving: list[str] = []

    # -- room -------------------------------------------------------------------

    def take(self, node: str, req: Resources) -> None:
        self.free[node] = self.free[node] - req
        self.used = self.used + req

    def give(self, node: str, req: Resources) -> None:
        self.free[node] = self.free[node] + req
        self.used = self.used - req

    def _allowed(self, node: Node, pod: Pod | None) -> bool:
        selector = pod.node_selector if pod else {}
        if any(node.labels.get(k) != v for k, v in selector.items()):
            return False
        tolerations = pod.tolerations if pod else ()
        return all(
            taint.effect not in _BLOCKING_EFFECTS or any(t.tolerates(taint) for t in tolerations)
            for taint in node.taints
        )

    def may_use(self, name: str, pod: Pod | None, anywhere: bool = False) -> bool:
        """Whether the pod may go to this node: its selector and taints,
        and the nodes kept for the starving job (unless the pod is its, or
        one the scheduler binds where it likes: `anywhere`)."""
        owner = self.kept.get(name)
        if owner and not anywhere and (pod is None or _group_key(pod) != owner):
            return False
        return self._allowed(self.nodes[name], pod)

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
                _share(room.cpu - req.cpu, alloc.cpu)
                + _share(room.memory - req.memory, alloc.memory)
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
        for pod in _largest_first(pods):
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

    def shrink(self, state: _JobState, reason: str) -> str | None:
        """Remove the highest trainer; returns the node whose room it freed."""
        state.target -= 1
        node = state.slots.pop(state.target, None)
        if node is not None:
            self.give(node, state.job.trainer)
        state.shrunk = True
        state.reason = reason
        return node

    def unshrink(self, state: _JobState, node: str | None) -> None:
        """Undo the last shrink of `state`, which freed `node`."""
        if node is not None:
            self.take(node, state.job.trainer)
        state.slots[state.target] = node
        state.target += 1

    def shrink_to(self, state: _JobState, target: int, reason: str) -> None:
        while state.target > max(target, state.job.min):
            self.shrink(state, reason)

    def grow(self, state: _JobState, node: str, reason: str) -> None:
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


def _share(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0


def _cheapness(job: ElasticJob) -> tuple[int, int, int, str, str]:
    return (job.trainer.gpu, job.trainer.cpu, job.trainer.memory, job.created, job.key)


# --- the plan ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Growing:
    """A trainer the job asked for above its minimum that has no node yet:
    growth decided on an earlier pass (its pod pending, or not created)."""

    state: _JobState
    index: int
    pod: Pod | None  # None: not created yet


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
    sim = _Simulation(nodes, max_load)
    summary = _summary(sim, pods, len(elastic))
    unbound = _account(sim, pods, elastic)
    groups, growing = _pending(sim, unbound)
    admitted, passed_over = _admit(sim, groups, _Patience(now, reserve_after))
    held = _hold_what_fits(sim, passed_over)
    _place_growing(sim, growing)
    _respect_bound(sim)
    # Admission before growth: while pods of a job given room above still
    # wait for the scheduler, new trainers would race them for it (a new pod
    # is tried at once, a pod that failed before waits out its back-off).
    if not any(_is_job(g) for g in (*admitted, *held)):
        _grow(sim)
    ungated = _to_admit(sim, admitted, passed_over)
    changes = tuple(
        Change(s.job.uid, s.job.key, s.job.trainers, s.target, _why(sim, s))
        for s in sorted(sim.jobs.values(), key=lambda s: s.job.key)
        if s.target != s.job.trainers or s.job.uid in ungated
    )
    unplaceable = tuple(f"{g[0].namespace}/{g[0].name} (+{len(g) - 1})" for g in passed_over)
    kept = {
        _job_label(g): tuple(sorted(n for n, key in sim.kept.items() if key == _group_key(g[0])))
        for g in passed_over
        if _group_key(g[0]) in sim.starving
    }
    return Plan(changes, summary, unplaceable, dict(sim.free), kept)


@dataclass(frozen=True)
class _Patience:
    """How long a job that cannot be placed waits before nodes are kept
    for it: one node after `reserve_after` seconds, one more for every
    further `reserve_after`, up to one per trainer it still waits for."""

    now: float | None
    reserve_after: float

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


def _to_admit(
    sim: _Simulation, admitted: Sequence[list[Pod]], passed_over: Sequence[list[Pod]]
) -> set[str]:
    """Jobs whose gated trainers may go to the scheduler now: those given
    room, the starving job itself (its room is kept), and, once no job
    starves, every gated job (the gate only guards kept nodes)."""
    waiting = [g for g in passed_over if not sim.starving or _group_key(g[0]) in sim.starving]
    return {
        s.job.uid
        for g in (*admitted, *waiting)
        if (s := sim.jobs.get(_group_key(g[0]))) is not None and _gated(g) and not s.job.admitted
    }


def _why(sim: _Simulation, state: _JobState) -> str:
    if state.target != state.job.trainers or state.job.admitted:
        return state.reason
    return f"admitted at {state.target} trainers ({sim.load_text()})"


def _gated(group: Sequence[Pod]) -> bool:
    return any(p.gated for p in group)


def _job_label(group: Sequence[Pod]) -> str:
    return f"{group[0].namespace}/{_job_name(group)}"


def _summary(sim: _Simulation, pods: Sequence[Pod], elastic: int) -> ClusterSummary:
    requested = Resources()
    for pod in pods:
        if pod.node in sim.nodes:
            requested = requested + pod.requests
    pending = sum(1 for p in pods if not p.node and not p.terminating)
    return ClusterSummary(len(sim.nodes), sim.total, requested, pending, elastic)


def _account(sim: _Simulation, pods: Sequence[Pod], elastic: Mapping[str, ElasticJob]) -> list[Pod]:
    """Take the room of every bound pod that stays; record each elastic job's
    trainers. Returns the pods still waiting for a node."""
    trainers: dict[str, dict[int, Pod]] = {uid: {} for uid in elastic}
    models: dict[str, Pod] = {}
    unbound: list[Pod] = []
    for pod in pods:
        if pod.owner_uid in elastic and (pod.role == _TRAINER_ROLE or pod.owner_uid not in models):
            models[pod.owner_uid] = pod
        job = elastic.get(pod.owner_uid) if pod.role == _TRAINER_ROLE else None
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


def _job_state(sim: _Simulation, job: ElasticJob, mine: Mapping[int, Pod]) -> _JobState:
    missing = any(i not in mine for i in range(job.trainers))
    leaving = any(p.terminating or i >= job.trainers for i, p in mine.items())
    slots: dict[int, str | None] = {
        i: p.node
        for i, p in mine.items()
        if p.node in sim.free and not p.terminating and i < job.trainers
    }
    return _JobState(job, job.trainers, slots, frozen=missing or leaving)


def _pending(sim: _Simulation, unbound: Sequence[Pod]) -> tuple[list[list[Pod]], list[_Growing]]:
    """What waits for room: jobs to admit (each a group of pods placed whole,
    oldest first) and trainers of running jobs above their minimum (growth)."""
    groups: dict[str, list[Pod]] = {}
    growing: list[_Growing] = []
    waiting: set[tuple[str, int]] = set()  # (job uid, trainer index) of pending trainers
    for pod in unbound:
        state = sim.jobs.get(pod.owner_uid)
        if state is not None and pod.role == _TRAINER_ROLE:
            waiting.add((pod.owner_uid, pod.index))
        if state is not None and pod.role == _TRAINER_ROLE and pod.index >= state.job.min:
            growing.append(_Growing(state, pod.index, pod))
        else:
            groups.setdefault(_group_key(pod), []).append(pod)
    for uid, state in sim.jobs.items():  # asked for, not created yet
        for index in range(state.job.trainers):
            if index in state.slots or (uid, index) in waiting:
                continue
            if index >= state.job.min:
                growing.append(_Growing(state, index, None))
            elif not state.job.running:
                # A job about to start. (A running job's missing trainer has
                # ended, or its pod is being recreated: pending, next pass.)
                groups.setdefault(uid, []).append(_unborn_trainer(state, index))
    ordered = sorted(groups.values(), key=lambda g: (min(p.created for p in g), g[0].key))
    return ordered, sorted(growing, key=lambda g: (g.state.job.key, g.index))


def _unborn_trainer(state: _JobState, index: int) -> Pod:
    """A trainer the operator is about to create, as a pending pod placed
    where the job's other pods may go."""
    job, model = state.job, state.model
    namespace, _, name = job.key.partition("/")
    return Pod(
        namespace=namespace,
        name=f"{name}-{_TRAINER_ROLE}-{index}",
        node="",
        requests=job.trainer,
        owner_uid=job.uid,
        role=_TRAINER_ROLE,
        index=index,
        created=job.created,
        node_selector=model.node_selector if model else {},
        tolerations=model.tolerations if model else (),
        # Created while nodes are kept, it would be gated: place it as such.
        gated=not job.admitted,
    )


def _group_key(pod: Pod) -> str:
    return pod.owner_uid or pod.key


def _is_job(group: Sequence[Pod]) -> bool:
    """Pods of a job the operator runs (they carry a replica type). Other
    pending pods get room made for them but do not hold growth back: they
    may wait for things the planner does not model (volumes, affinity)."""
    return any(p.role for p in group)


def _admit(
    sim: _Simulation, groups: Sequence[list[Pod]], patience: _Patience
) -> tuple[list[list[Pod]], list[list[Pod]]]:
    """Place each pending group, oldest first, shrinking others if it must.
    A group that cannot fit even then is passed over: nothing is shrunk for
    it and the groups behind it still get their turn; once it has waited
    too long, it starves (_starve). Gated groups are placed off
    the kept nodes; others go where the scheduler puts them. Returns the
    groups admitted and those passed over."""
    admitted: list[list[Pod]] = []
    passed_over: list[list[Pod]] = []
    for group in groups:
        if _make_room(sim, group, anywhere=not _gated(group)):
            admitted.append(group)
            continue
        passed_over.append(group)
        count = patience.nodes(group)
        if _is_job(group) and count > 0:
            _starve(sim, group, count)
    return admitted, passed_over


def _starve(sim: _Simulation, group: Sequence[Pod], count: int) -> None:
    """A job that cannot be placed, once it has waited too long:
    each of its trainers that fits now, or fits once the most fulfilled
    jobs give back trainers, gets that room (it starts with fewer than its
    minimum, as a fault-tolerant job may); for the rest, `count` nodes
    closest to fitting them are kept from everyone else, so that room freed
    there by jobs ending adds up instead of going to smaller, younger pods.
    Growth may borrow it meanwhile: this shrinks those trainers as soon as
    one of the job's fits. Without this, a job of large trainers can wait
    for ever behind smaller ones."""
    key = _group_key(group[0])
    sim.starving.append(key)
    unplaced = [p for p in _largest_first(group) if not _make_room(sim, [p], anywhere=True)]
    if not unplaced:
        return
    closest = _closest_nodes(sim, unplaced[0])
    if not closest:  # no node could ever hold it: keeping any would help nobody
        sim.starving.remove(key)
    for name in closest[: min(count, len(unplaced))]:
        sim.kept[name] = key


def _closest_nodes(sim: _Simulation, pod: Pod) -> list[str]:
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
            _share(max(0, need - have), whole)
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


def _above_minimums(sim: _Simulation) -> dict[str, Resources]:
    """Per node, the requests of the trainers above their job's minimum."""
    lent: dict[str, Resources] = {}
    for state in sim.jobs.values():
        for index, node in state.slots.items():
            if node is not None and index >= state.job.min:
                lent[node] = lent.get(node, Resources()) + state.job.trainer
    return lent


def _largest_first(pods: Iterable[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (p.requests, p.name), reverse=True)


def _hold_what_fits(sim: _Simulation, passed_over: Sequence[list[Pod]]) -> list[list[Pod]]:
    """The pods of passed-over groups that fit the room left now, oldest
    group first, keep it from growth: the scheduler binds them one by one as
    room appears (a fault-tolerant job starts with fewer trainers), and a
    hole a large trainer fits is rare once growth has filled it with small
    ones. Nothing is shrunk for them, and the groups behind them were
    admitted first. The starving job placed its own (_starve); gated groups
    hold nothing while nodes are kept, as they stay gated. Returns the
    groups that hold room."""
    held: list[list[Pod]] = []
    for group in passed_over:
        if _group_key(group[0]) in sim.starving or (_gated(group) and sim.starving):
            continue
        placed = [p for p in _largest_first(group) if sim.place_all([p]) is not None]
        if placed:
            held.append(placed)
    return held


def _place_growing(sim: _Simulation, growing: Sequence[_Growing]) -> None:
    """Growth decided earlier gets what room the waiting jobs left; a
    trainer that finds none is given back, with every one above it."""
    for item in growing:
        state = item.state
        if item.index >= state.target:
            continue  # given back already, with a lower one
        placed = sim.place_all([item.pod or _unborn_trainer(state, item.index)], anywhere=True)
        if placed is not None:
            state.slots[item.index] = placed[0][0]
            continue
        why = "cannot be scheduled" if item.pod else "finds no room"
        sim.shrink_to(state, item.index, f"trainer {item.index} {why}; giving it back")


def _make_room(sim: _Simulation, group: Sequence[Pod], anywhere: bool = False) -> bool:
    """Place a pending group, shrinking the most fulfilled jobs if it must."""
    placed = sim.place_all(group, anywhere)
    if placed is not None:
        return True
    saved = sim.snapshot()
    owner = group[0].owner_uid
    need = sum((p.requests for p in group), Resources())
    reason = f"making room for the pending pods of {group[0].namespace}/{_job_name(group)}"
    steps: list[tuple[_JobState, str | None]] = []
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


def _most_fulfilled(sim: _Simulation, owner: str, need: Resources) -> _JobState | None:
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
    sim: _Simulation,
    group: Sequence[Pod],
    steps: Sequence[tuple[_JobState, str | None]],
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


def _job_name(group: Sequence[Pod]) -> str:
    name = group[0].name
    role = group[0].role
    return name.rsplit(f"-{role}-", 1)[0] if role and f"-{role}-" in name else name


def _helps(trainer: Resources, need: Resources) -> bool:
    """Whether freeing such a trainer gives the group something it needs."""
    return (
        (need.gpu > 0 and trainer.gpu > 0)
        or (need.cpu > 0 and trainer.cpu > 0)
        or (need.memory > 0 and trainer.memory > 0)
    )


def _respect_bound(sim: _Simulation) -> None:
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


def _grow(sim: _Simulation) -> None:
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
            # as soon as the starving job's fit there (_starve shrinks them).
            trainer = _unborn_trainer(state, state.target)
            node = sim.best_node(state.job.trainer, trainer, anywhere=True)
            if node is None:
                continue
            sim.grow(state, node, "")
            state.reason = f"room on the nodes, least fulfilled first ({sim.load_text()})"
            break
        else:
            return
