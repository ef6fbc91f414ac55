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
from dataclasses import dataclass, replace
from typing import Final

from dlk8s.job import childnames
from dlk8s.job.actions import Action, Event, Patch, ReplaceStatus, create_actions, delete_actions
from dlk8s.job.children import POD
from dlk8s.job.conditions import clear_condition, has_condition, set_condition
from dlk8s.job.jobmodel import JobContext, JobView, Placement, Slot
from dlk8s.job.objects import Condition, Obj, dig
from dlk8s.job.reconcile.slots import SlotView, replica_statuses
from dlk8s.job.reconcile.view import Result
from dlk8s.job.vocabulary import (
    API_VERSION,
    KUEUE_API_VERSION,
    LABEL_QUEUE_NAME,
    ConditionType,
    EventType,
    Phase,
    Reason,
    State,
)
from dlk8s.job.workloads import (
    WORKLOAD,
    Queueing,
    Stage,
    WorkloadView,
    assess,
    pods_ready,
    released,
)

WITHOUT_KUEUE: Final = (
    "the operator runs without --kueue (the chart's kueue.enabled=true turns it on):"
    " it cannot ask Kueue to admit the job"
)
# How soon a pass looks again for a ResourceFlavor the admission names but
# the cache does not hold yet (its watch event queues nothing).
FLAVOR_WAIT: Final = 5.0


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


def gate(
    ctx: JobContext, views: Sequence[SlotView], first_pods: Callable[[], dict[str, Obj]]
) -> Result | Admission:
    """What Kueue lets a queued job do: wait (a Result), or run as admitted.
    `first_pods` builds the first pod of each role as it would be created."""
    job, facts = ctx.job, ctx.job.queueing
    if facts is None or facts.problem:
        problem = WITHOUT_KUEUE if facts is None else facts.problem
        message = f"The job names LocalQueue {job.queue}, but {problem}"
        # Pods admitted before are left alone: the operator cannot tell
        # whether their admission still holds.
        return waiting(ctx, views, [], Reason.QUEUE_UNAVAILABLE, message, queued=False, keep=True)
    q = assess(ctx, str(job.queue), first_pods, facts)
    actions: list[Action] = [
        a for obj in q.stale for a in delete_actions(obj, WORKLOAD, "not the job's current one")
    ]
    if dig(job.raw, "metadata", "labels", LABEL_QUEUE_NAME) != job.queue:
        # Queued by its namespace's default LocalQueue: labelled as Kueue
        # labels its own kinds, so that Kueue's pod webhook leaves its pods
        # alone and the autoscaler knows Kueue sizes it.
        labels = {"metadata": {"labels": {LABEL_QUEUE_NAME: job.queue}}}
        actions.append(Patch(API_VERSION, ctx.kind.name, job.namespace, job.name, labels))
    if q.stage == Stage.NONE:
        return _create(ctx, views, q, actions)
    if q.stage == Stage.FINISHED and q.current is not None:
        # Kueue finished it while the job runs on: a new one queues the job again.
        actions += delete_actions(q.current.obj, WORKLOAD, "Kueue finished it before the job")
        message = f"Kueue finished Workload {q.name}: {q.message}"
        return waiting(ctx, views, actions, Reason.PENDING, message, q)
    if q.stage == Stage.EVICTED:
        return _evicted(ctx, views, q, actions)
    if q.outgrown:
        return _outgrown(ctx, views, q, actions)
    if q.stage == Stage.ADMITTED:
        return _admit(ctx, views, q, actions)
    patch = {}
    if q.differs and q.wanted is not None:
        # Pending, the Workload may change: it asks for what the spec does now.
        patch["podSets"] = q.wanted["spec"]["podSets"]
    if q.current is not None and not q.reserved and q.current.queue != job.queue:
        patch["queueName"] = job.queue  # moved by its label while it waits
    if patch:
        actions.append(Patch(KUEUE_API_VERSION, "Workload", job.namespace, q.name, {"spec": patch}))
    said = q.message or "not admitted yet"
    message = f"Waiting in LocalQueue {job.queue} (Workload {q.name}): {said}"
    return waiting(ctx, views, actions, Reason.PENDING, message, q)


def _admit(
    ctx: JobContext, views: Sequence[SlotView], q: Queueing, actions: list[Action]
) -> Result | Admission:
    """Kueue admitted the job: where its pods go, and how many. An elastic
    role admitted at another count than the job's first gets that count
    written to the job (its pods' environment follows it), then runs.
    Pods that run are kept while it waits here."""
    job = ctx.job
    if q.places is None or q.current is None:
        message = f"Admitted by {q.cluster_queue}; waiting for its ResourceFlavors"
        result = waiting(ctx, views, actions, Reason.PENDING, message, q, keep=True)
        return replace(result, requeue_after=FLAVOR_WAIT)
    elastic = ctx.kind.elastic(job.raw)
    given = q.places.get(elastic.role) if elastic is not None else None
    if elastic is not None and given is not None and elastic.requested != given.count:
        bounds = f"{elastic.minimum}..{elastic.maximum}"
        why = f"admitted by Kueue's ClusterQueue {q.cluster_queue} (within {bounds})"
        patch = {"metadata": {"annotations": elastic.annotations(given.count, why)}}
        actions.append(Patch(API_VERSION, ctx.kind.name, job.namespace, job.name, patch))
        message = f"Admitted by {q.cluster_queue} with {given.count} of {bounds}"
        return waiting(ctx, views, actions, Reason.PENDING, message, q, keep=True)
    return Admission(admitted_context(ctx, q.places), q.current, q.cluster_queue, actions)


def _create(
    ctx: JobContext, views: Sequence[SlotView], q: Queueing, actions: list[Action]
) -> Result:
    job = ctx.job
    if q.missing_priority is not None:
        message = (
            f"WorkloadPriorityClass {q.missing_priority} (kueue.x-k8s.io/priority-class)"
            " does not exist"
        )
        return waiting(ctx, views, actions, Reason.QUEUE_UNAVAILABLE, message, queued=False)
    if q.wanted is not None:  # always built for a Workload to create
        actions += create_actions(q.wanted)
    message = f"Waiting in LocalQueue {job.queue} (Workload {q.name}): created"
    return waiting(ctx, views, actions, Reason.PENDING, message)


def _evicted(
    ctx: JobContext, views: Sequence[SlotView], q: Queueing, actions: list[Action]
) -> Result:
    """Kueue took the admission back: the pods go (no restart counted),
    then the reservation is cleared so that the quota frees."""
    job = ctx.job
    reason, said = q.evicted or ("Evicted", q.message)
    for pod in job.children.pods:
        if not pod.terminating:
            actions += delete_actions(pod.obj, POD, f"Kueue evicted the job ({reason})")
    if not job.children.pods and q.reserved and q.current is not None:
        actions.append(ReplaceStatus(released(q.current, job.now, job.stamp)))
    message = f"Evicted by Kueue ({reason}): {said}"
    return waiting(ctx, views, actions, Reason.EVICTED, message, q, keep=True)


def _outgrown(
    ctx: JobContext, views: Sequence[SlotView], q: Queueing, actions: list[Action]
) -> Result:
    """The spec asks for other pods than Kueue admitted (more GPUs, more
    replicas): the admission no longer covers it, so the job is requeued as
    Kueue requeues its own jobs. Its pods go (no restart counted), then its
    Workload, and the next pass queues one that asks for what the spec does
    now; no pod of the new spec runs before that one is admitted."""
    job = ctx.job
    for pod in job.children.pods:
        if not pod.terminating:
            actions += delete_actions(pod.obj, POD, "the job outgrew its admission")
    if not job.children.pods and q.current is not None:
        actions += delete_actions(q.current.obj, WORKLOAD, "the job outgrew its admission")
    message = (
        f"Requeued: the job asks for other pods than ClusterQueue {q.cluster_queue} admitted"
        f" (Workload {q.name})"
    )
    return waiting(ctx, views, actions, Reason.REQUEUED, message, q, keep=True)


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


def waiting(
    ctx: JobContext,
    views: Sequence[SlotView],
    actions: list[Action],
    reason: str,
    message: str,
    q: Queueing | None = None,
    queued: bool = True,
    keep: bool = False,
) -> Result:
    """A queued job that has no admission: no pod, and a status that says
    why. `q`: its Workload's stage; `keep`: its pods are left (the caller
    deletes what must go)."""
    job, now = ctx.job, ctx.job.stamp
    if not keep:
        for pod in job.children.pods:
            if not pod.terminating:
                actions += delete_actions(pod.obj, POD, "the job waits for Kueue's admission")
    if job.prev.get("reason") != reason:
        kind = EventType.NORMAL if reason == Reason.PENDING else EventType.WARNING
        actions = [*actions, Event(kind, reason, message)]
    conditions = set_condition(job.conditions, ConditionType.QUEUED, queued, reason, message, now)
    conditions = clear_condition(conditions, ConditionType.ADMITTED, reason, message, now)
    if q is not None and q.evicted is not None:
        reason_, said = q.evicted
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
    return Result(actions, status, None)
