"""The queued path: a job that waits for Kueue to admit it (docs/kueue.md).

A job that names a LocalQueue (or whose namespace has one called
"default") creates no pod until Kueue admits its Workload, which this
path creates, one per job, owned by it. Once admitted, the active path
builds the admitted pods where the admission puts them (`gate` hands it a
context with the admitted counts and placements); `admitted` then adds
what the status and the Workload say of it. When Kueue evicts the
Workload (preemption, waitForPodsReady's timeout, a stopped queue), the
job deletes its pods, counting no restart, gives the quota back as Kueue
expects of an integration, and waits again.

A job that started before it named a queue (or before the operator ran
with Kueue) is left running: queueing it would delete its pods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from dlk8s.job import childnames
from dlk8s.job.actions import Action, Event, Patch, ReplaceStatus, create_actions, delete_actions
from dlk8s.job.children import POD, owner_reference
from dlk8s.job.conditions import clear_condition, has_condition, set_condition
from dlk8s.job.jobmodel import JobContext, JobView, Placement, Slot
from dlk8s.job.kueue.multikueue import adoption
from dlk8s.job.kueue.status import pods_ready, released
from dlk8s.job.kueue.workload import WORKLOAD, Queueing, Stage, WorkloadView, assess
from dlk8s.job.objects import Condition, Obj
from dlk8s.job.reconcile.slots import SlotView, replica_statuses
from dlk8s.job.reconcile.view import Result
from dlk8s.job.vocabulary import (
    API_VERSION,
    KUEUE_API_VERSION,
    LABEL_PREBUILT_WORKLOAD,
    LABEL_QUEUE_NAME,
    ConditionType,
    EventType,
    Phase,
    Reason,
    State,
)

WITHOUT_KUEUE: Final = (
    "the operator runs without --kueue (the chart's kueue.enabled=true turns it on):"
    " it cannot ask Kueue to admit the job"
)
WAITS: Final = "the job waits for Kueue's admission"
# How soon a pass looks again for a ResourceFlavor the admission names but
# the cache does not hold yet (its watch event queues nothing).
FLAVOR_WAIT: Final = 5.0
# How soon a pass looks again for the Workload MultiKueue makes for a job's
# copy: not ours yet, its creation queues nothing for the job.
PREBUILT_WAIT: Final = 5.0


@dataclass(frozen=True)
class Admission:
    """Kueue let the job in: the context with the admitted pods, and its Workload."""

    ctx: JobContext
    workload: WorkloadView
    cluster_queue: str  # the admission's
    actions: list[Action]


def is_queued(job: JobView) -> bool:
    """Whether the job waits for Kueue: it names a queue, and it has not
    started outside one."""
    if job.queue is None:
        return False
    return job.start_time is None or any(
        has_condition(job.conditions, t) for t in (ConditionType.QUEUED, ConditionType.ADMITTED)
    )


# What a pass deletes while the job waits: the object, its API kind, and why.
Doomed = tuple[Obj, tuple[str, str], str]


@dataclass(frozen=True)
class Wait:
    """Why a queued job waits, and what this pass changes meanwhile: each
    branch of `gate` says so as data, and `waiting` makes the actions and
    the status in one place."""

    reason: str
    message: str
    actions: list[Action] = field(default_factory=list)  # creates, patches, status edits
    doomed: list[Doomed] = field(default_factory=list)  # deleted before them
    q: Queueing | None = None  # its Workload's stage, when it has one
    queued: bool = True  # the Queued condition's status
    keep: bool = False  # its pods stay (the branch dooms what must go)
    requeue_after: float | None = None


def gate(
    ctx: JobContext, views: Sequence[SlotView], first_pods: Callable[[], dict[str, Obj]]
) -> Result | Admission:
    """What Kueue lets a queued job do: wait (a Result), or run as admitted.
    `first_pods` builds the first pod of each role as it would be created."""
    decided = decide(ctx, first_pods)
    return decided if isinstance(decided, Admission) else waiting(ctx, views, decided)


def decide(ctx: JobContext, first_pods: Callable[[], dict[str, Obj]]) -> Wait | Admission:
    """Whether Kueue lets the job run, and what this pass changes of its
    Workload meanwhile; the manager's dispatched path reads it too."""
    job, facts = ctx.job, ctx.job.queueing
    if facts is None or facts.problem:
        problem = WITHOUT_KUEUE if facts is None else facts.problem
        message = f"The job names LocalQueue {job.queue}, but {problem}"
        # Pods admitted before are left alone: the operator cannot tell
        # whether their admission still holds.
        return Wait(Reason.QUEUE_UNAVAILABLE, message, queued=False, keep=True)
    q = assess(ctx, str(job.queue), first_pods, facts)
    doomed: list[Doomed] = [(obj, WORKLOAD, "not the job's current one") for obj in q.stale]
    actions: list[Action] = []
    if job.queue_label != job.queue:
        # Queued by its namespace's default LocalQueue: labelled as Kueue
        # labels its own kinds, so that Kueue's pod webhook leaves its pods
        # alone and the autoscaler knows Kueue sizes it.
        labels = {"metadata": {"labels": {LABEL_QUEUE_NAME: job.queue}}}
        actions.append(Patch(API_VERSION, ctx.kind.name, job.namespace, job.name, labels))
    if job.prebuilt is not None:
        held = _prebuilt(ctx, q, actions, doomed)
        if held is not None:
            return held
    if q.stage == Stage.NONE:
        return _create(ctx, q, actions, doomed)
    if q.stage == Stage.FINISHED and q.current is not None:
        # Kueue finished it while the job runs on: a new one queues the job again.
        doomed.append((q.current.obj, WORKLOAD, "Kueue finished it before the job"))
        message = f"Kueue finished Workload {q.name}: {q.message}"
        return Wait(Reason.PENDING, message, actions, doomed, q)
    if q.stage == Stage.EVICTED:
        return _evicted(ctx, q, actions, doomed)
    if q.outgrown:
        return _outgrown(ctx, q, actions, doomed)
    if q.stage == Stage.ADMITTED:
        return _admit(ctx, q, actions, doomed)
    return _pending(ctx, q, actions, doomed)


def _prebuilt(
    ctx: JobContext, q: Queueing, actions: list[Action], doomed: list[Doomed]
) -> Wait | None:
    """A job MultiKueue copied to this (worker) cluster runs under the
    Workload MultiKueue made for it, adopted here and never made, changed
    or deleted by dlk8s: MultiKueue's manager compares it with its own, and
    removes the copy of a job whose Workload differs. None: go on as for
    any queued job."""
    job, name = ctx.job, q.name
    if q.current is None:
        message = f"Waiting for Workload {name}, which MultiKueue makes for this copy of the job"
        return Wait(Reason.PENDING, message, actions, doomed, requeue_after=PREBUILT_WAIT)
    patch, problem = adoption(q.current.obj, owner_reference(ctx))
    if problem:
        message = f"Workload {name} ({LABEL_PREBUILT_WORKLOAD}) is not this job's: {problem}"
        return Wait(Reason.QUEUE_UNAVAILABLE, message, actions, doomed, queued=False)
    if patch is not None:
        actions.append(Patch(KUEUE_API_VERSION, "Workload", job.namespace, name, patch))
    if q.stage == Stage.FINISHED:
        message = f"Kueue finished Workload {name}: {q.message}"
        return Wait(Reason.PENDING, message, actions, doomed, q)
    if q.differs or q.outgrown:
        message = (
            f"Workload {name} ({LABEL_PREBUILT_WORKLOAD}) asks for other pods than the job:"
            " it was made for another spec"
        )
        return Wait(Reason.QUEUE_UNAVAILABLE, message, actions, doomed, q, queued=False)
    return None


def _pending(ctx: JobContext, q: Queueing, actions: list[Action], doomed: list[Doomed]) -> Wait:
    """Not admitted yet: the Workload follows the spec and the queue label."""
    job, patch = ctx.job, {}
    if q.differs and q.wanted is not None:
        # Pending, the Workload may change: it asks for what the spec does now.
        patch["podSets"] = q.wanted["spec"]["podSets"]
    if q.current is not None and not q.reserved and q.current.queue != job.queue:
        patch["queueName"] = job.queue  # moved by its label while it waits
    if patch:
        actions.append(Patch(KUEUE_API_VERSION, "Workload", job.namespace, q.name, {"spec": patch}))
    said = q.message or "not admitted yet"
    message = f"Waiting in LocalQueue {job.queue} (Workload {q.name}): {said}"
    return Wait(Reason.PENDING, message, actions, doomed, q)


def _admit(
    ctx: JobContext, q: Queueing, actions: list[Action], doomed: list[Doomed]
) -> Wait | Admission:
    """Kueue admitted the job: where its pods go, and how many. An elastic
    role admitted at another count than the job's first gets that count
    written to the job (its pods' environment follows it), then runs.
    Pods that run are kept while it waits here."""
    job = ctx.job
    if q.places is None or q.current is None:
        message = f"Admitted by {q.cluster_queue}; waiting for its ResourceFlavors"
        return Wait(
            Reason.PENDING, message, actions, doomed, q, keep=True, requeue_after=FLAVOR_WAIT
        )
    elastic = ctx.kind.elastic(job.raw)
    given = q.places.get(elastic.role) if elastic is not None else None
    if elastic is not None and given is not None and elastic.requested != given.count:
        bounds = f"{elastic.minimum}..{elastic.maximum}"
        why = f"admitted by Kueue's ClusterQueue {q.cluster_queue} (within {bounds})"
        patch = {"metadata": {"annotations": elastic.annotations(given.count, why)}}
        actions.append(Patch(API_VERSION, ctx.kind.name, job.namespace, job.name, patch))
        message = f"Admitted by {q.cluster_queue} with {given.count} of {bounds}"
        return Wait(Reason.PENDING, message, actions, doomed, q, keep=True)
    actions = [*deletes(doomed), *actions]
    return Admission(admitted_context(ctx, q.places), q.current, q.cluster_queue, actions)


def _create(ctx: JobContext, q: Queueing, actions: list[Action], doomed: list[Doomed]) -> Wait:
    job = ctx.job
    if q.missing_priority is not None:
        message = (
            f"WorkloadPriorityClass {q.missing_priority} (kueue.x-k8s.io/priority-class)"
            " does not exist"
        )
        return Wait(Reason.QUEUE_UNAVAILABLE, message, actions, doomed, queued=False)
    if q.wanted is not None:  # always built for a Workload to create
        actions += create_actions(q.wanted)
    message = f"Waiting in LocalQueue {job.queue} (Workload {q.name}): created"
    return Wait(Reason.PENDING, message, actions, doomed)


def _evicted(ctx: JobContext, q: Queueing, actions: list[Action], doomed: list[Doomed]) -> Wait:
    """Kueue took the admission back: the pods go (no restart counted),
    then the reservation is cleared so that the quota frees."""
    job = ctx.job
    reason, said = q.evicted or ("Evicted", q.message)
    doomed += _pods(job, f"Kueue evicted the job ({reason})")
    if not job.children.pods and q.reserved and q.current is not None:
        actions.append(ReplaceStatus(released(q.current, job.now, job.stamp)))
    message = f"Evicted by Kueue ({reason}): {said}"
    return Wait(Reason.EVICTED, message, actions, doomed, q, keep=True)


def _outgrown(ctx: JobContext, q: Queueing, actions: list[Action], doomed: list[Doomed]) -> Wait:
    """The spec asks for other pods than Kueue admitted (more GPUs, more
    replicas): the admission no longer covers it, so the job is requeued as
    Kueue requeues its own jobs. Its pods go (no restart counted), then its
    Workload, and the next pass queues one that asks for what the spec does
    now; no pod of the new spec runs before that one is admitted."""
    job = ctx.job
    doomed += _pods(job, "the job outgrew its admission")
    if not job.children.pods and q.current is not None:
        doomed.append((q.current.obj, WORKLOAD, "the job outgrew its admission"))
    message = (
        f"Requeued: the job asks for other pods than ClusterQueue {q.cluster_queue} admitted"
        f" (Workload {q.name})"
    )
    return Wait(Reason.REQUEUED, message, actions, doomed, q, keep=True)


def _pods(job: JobView, why: str) -> list[Doomed]:
    return [(pod.obj, POD, why) for pod in job.children.pods if not pod.terminating]


def deletes(doomed: Sequence[Doomed]) -> list[Action]:
    return [action for obj, kind, why in doomed for action in delete_actions(obj, kind, why)]


def admitted_context(ctx: JobContext, places: Mapping[str, Placement]) -> JobContext:
    """The job as admitted: each role at the admitted count (an elastic
    role may be let in below its count), its pods placed as admitted."""
    replicas = tuple(
        replace(r, replicas=min(r.replicas, places[r.role].count)) if r.role in places else r
        for r in ctx.replicas
    )
    slots = tuple(
        Slot(replica, index, childnames.pod_name(ctx.job.name, replica.role, index))
        for replica in replicas
        for index in range(replica.replicas)
    )
    return replace(ctx, replicas=replicas, slots=slots, placements=places)


def admitted(admission: Admission, views: Sequence[SlotView], result: Result) -> Result:
    """An admitted job's pass: its status says so, and its Workload's
    PodsReady follows the pods (Kueue's waitForPodsReady reads it)."""
    job, workload = admission.ctx.job, admission.workload
    if result.status.get("state") != State.RUNNING:
        return replace(result, actions=admission.actions + result.actions)
    now = job.stamp
    conditions: list[Condition] = result.status["conditions"]
    message = f"Admitted by ClusterQueue {admission.cluster_queue}"
    conditions = set_condition(
        conditions, ConditionType.ADMITTED, True, Reason.ADMITTED, message, now
    )
    conditions = clear_condition(conditions, ConditionType.QUEUED, Reason.ADMITTED, message, now)
    conditions = clear_condition(conditions, ConditionType.EVICTED, Reason.ADMITTED, message, now)
    actions = list(admission.actions)
    if ConditionType.ADMITTED not in job.true_conditions:
        actions.append(Event(EventType.NORMAL, Reason.ADMITTED, message))
    update = pods_ready(workload, bool(views) and all(v.up for v in views), now)
    if update is not None:
        actions.append(ReplaceStatus(update))
    status = result.status | {"conditions": conditions}
    return replace(result, actions=actions + result.actions, status=status)


def waiting(ctx: JobContext, views: Sequence[SlotView], wait: Wait) -> Result:
    """A queued job that has no admission: no pod (unless `wait.keep`), and
    a status that says why."""
    job, now, reason, message = ctx.job, ctx.job.stamp, wait.reason, wait.message
    doomed = wait.doomed if wait.keep else [*wait.doomed, *_pods(job, WAITS)]
    actions = [*deletes(doomed), *wait.actions]
    if job.prev.get("reason") != reason:
        kind = EventType.NORMAL if reason == Reason.PENDING else EventType.WARNING
        actions.append(Event(kind, reason, message))
    queued = wait.queued
    conditions = set_condition(job.conditions, ConditionType.QUEUED, queued, reason, message, now)
    conditions = clear_condition(conditions, ConditionType.ADMITTED, reason, message, now)
    if wait.q is not None and wait.q.evicted is not None:
        reason_, said = wait.q.evicted
        conditions = set_condition(
            conditions, ConditionType.EVICTED, True, reason_, f"{reason_}: {said}", now
        )
    for type_ in (ConditionType.RUNNING, ConditionType.RESTARTING):
        conditions = clear_condition(conditions, type_, reason, "The job waits for Kueue", now)
    # A resumed job queues again here, not in the active path that clears it.
    resumed = "spec.runPolicy.suspend is false"
    conditions = clear_condition(conditions, ConditionType.SUSPENDED, Reason.RESUMED, resumed, now)
    status = job.carried | {
        "state": State.RUNNING,
        "phase": Phase.QUEUED,
        "reason": reason,
        "conditions": conditions,
        "replicaStatuses": replica_statuses(ctx, views),
    }
    # No startTime: activeDeadlineSeconds counts from the admission.
    status.pop("startTime", None)
    return Result(actions, status, wait.requeue_after)
