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

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from dlk8s.job import naming
from dlk8s.job.actions import Action, Event, Patch, ReplaceStatus, create_actions, delete_actions
from dlk8s.job.children import POD
from dlk8s.job.conditions import clear_condition, has_condition, set_condition
from dlk8s.job.kind import JobContext, JobView, Placement, QueueFacts, Slot
from dlk8s.job.names import (
    API_VERSION,
    KUEUE_API_VERSION,
    LABEL_QUEUE_NAME,
    ConditionType,
    EventType,
    Phase,
    Reason,
    State,
)
from dlk8s.job.objects import Condition, Obj, dig
from dlk8s.job.reconcile.slots import SlotView, replica_statuses
from dlk8s.job.reconcile.view import Result
from dlk8s.job.workloads import (
    ADMITTED,
    EVICTED,
    FINISHED,
    PODS_READY,
    QUOTA_RESERVED,
    WORKLOAD,
    WorkloadView,
    missing_priority,
    placements,
    pod_set_name,
    pod_sets_differ,
    read_workload,
    released,
    with_conditions,
    workload_for,
    workload_name,
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
    ctx: JobContext, views: Sequence[SlotView], first_pods: dict[str, Obj]
) -> Result | Admission:
    """What Kueue lets a queued job do: wait (a Result), or run as admitted.
    `first_pods`: the first pod of each role as it would be created."""
    job = ctx.job
    facts = job.queueing
    if facts is None or facts.problem:
        problem = WITHOUT_KUEUE if facts is None else facts.problem
        message = f"The job names LocalQueue {job.queue}, but {problem}"
        # Pods admitted before are left alone: the operator cannot tell
        # whether their admission still holds.
        return waiting(
            ctx, views, [], Reason.QUEUE_UNAVAILABLE, message, None, queued=False, keep_pods=True
        )
    name = workload_name(ctx)
    mine = [read_workload(child) for child in job.children.workloads]
    current = next((w for w in mine if w.name == name and not w.terminating), None)
    actions: list[Action] = [
        a
        for w in mine
        if w is not current and not w.terminating
        for a in delete_actions(w.obj, WORKLOAD, "it is not the job's current Workload")
    ]
    if dig(job.raw, "metadata", "labels", LABEL_QUEUE_NAME) != job.queue:
        # Queued by its namespace's default LocalQueue: labelled as Kueue
        # labels its own kinds, so that Kueue's pod webhook leaves its pods
        # alone and the autoscaler knows Kueue sizes it.
        labels = {"metadata": {"labels": {LABEL_QUEUE_NAME: job.queue}}}
        actions.append(Patch(API_VERSION, ctx.kind.name, job.namespace, job.name, labels))
    if current is None:
        return _create(ctx, views, first_pods, facts, actions)
    if current.true(FINISHED):
        # Kueue finished it while the job runs on: a new one queues the job again.
        actions += delete_actions(current.obj, WORKLOAD, "Kueue finished it before the job")
        message = f"Kueue finished Workload {name}: {current.message(FINISHED)}"
        return waiting(ctx, views, actions, Reason.PENDING, message, current)
    if current.true(EVICTED) and (current.true(QUOTA_RESERVED) or job.children.pods):
        return _evicted(ctx, views, current, actions)
    if current.true(ADMITTED) and current.true(QUOTA_RESERVED):
        return _admit(ctx, views, current, facts, actions)
    wanted = workload_for(ctx, str(job.queue), first_pods, facts)
    if not current.true(QUOTA_RESERVED) and pod_sets_differ(current, wanted):
        # Pending, the Workload may change: it asks for what the spec does now.
        patch = {"spec": {"podSets": wanted["spec"]["podSets"]}}
        actions.append(Patch(KUEUE_API_VERSION, "Workload", job.namespace, name, patch))
    said = current.message(QUOTA_RESERVED) or "not admitted yet"
    message = f"Waiting in LocalQueue {job.queue} (Workload {name}): {said}"
    return waiting(ctx, views, actions, Reason.PENDING, message, current)


def _admit(
    ctx: JobContext,
    views: Sequence[SlotView],
    workload: WorkloadView,
    facts: QueueFacts,
    actions: list[Action],
) -> Result | Admission:
    """Kueue admitted the job: where its pods go, and how many. An elastic
    role admitted at another count than the job's first gets that count
    written to the job (its pods' environment follows it), then runs.
    Pods that run are kept while it waits here."""
    job = ctx.job
    places = placements(workload, facts)
    if places is None:
        message = f"Admitted by {workload.cluster_queue}; waiting for its ResourceFlavors"
        result = waiting(ctx, views, actions, Reason.PENDING, message, workload, keep_pods=True)
        return replace(result, requeue_after=FLAVOR_WAIT)
    elastic = ctx.kind.elastic(job.raw)
    given = places.get(pod_set_name(elastic.role)) if elastic is not None else None
    if elastic is not None and given is not None and elastic.requested != given.count:
        bounds = f"{elastic.minimum}..{elastic.maximum}"
        why = f"admitted by Kueue's ClusterQueue {workload.cluster_queue} (within {bounds})"
        patch = {"metadata": {"annotations": elastic.annotations(given.count, why)}}
        actions.append(Patch(API_VERSION, ctx.kind.name, job.namespace, job.name, patch))
        message = f"Admitted by {workload.cluster_queue} with {given.count} of {bounds}"
        return waiting(ctx, views, actions, Reason.PENDING, message, workload, keep_pods=True)
    return Admission(admitted_context(ctx, places), workload, actions)


def _create(
    ctx: JobContext,
    views: Sequence[SlotView],
    first_pods: dict[str, Obj],
    facts: QueueFacts,
    actions: list[Action],
) -> Result:
    job = ctx.job
    missing = missing_priority(ctx, facts)
    if missing is not None:
        message = (
            f"WorkloadPriorityClass {missing} (its kueue.x-k8s.io/priority-class) does not exist"
        )
        return waiting(ctx, views, actions, Reason.QUEUE_UNAVAILABLE, message, None, queued=False)
    wanted = workload_for(ctx, str(job.queue), first_pods, facts)
    actions += create_actions(wanted)
    message = f"Waiting in LocalQueue {job.queue} (Workload {workload_name(ctx)}): created"
    return waiting(ctx, views, actions, Reason.PENDING, message, None)


def _evicted(
    ctx: JobContext, views: Sequence[SlotView], workload: WorkloadView, actions: list[Action]
) -> Result:
    """Kueue took the admission back: the pods go (no restart counted),
    then the reservation is cleared so that the quota frees."""
    job = ctx.job
    why = f"Kueue evicted the job ({workload.reason(EVICTED)})"
    for pod in job.children.pods:
        if not pod.terminating:
            actions += delete_actions(pod.obj, POD, why)
    if not job.children.pods and workload.true(QUOTA_RESERVED):
        actions.append(ReplaceStatus(released(workload, job.now, job.stamp)))
    message = f"Evicted by Kueue ({workload.reason(EVICTED)}): {workload.message(EVICTED)}"
    return waiting(ctx, views, actions, Reason.EVICTED, message, workload, keep_pods=True)


def admitted_context(ctx: JobContext, places: dict[str, Placement]) -> JobContext:
    """The job as admitted: each role at the admitted count (an elastic
    role may be let in below its count), its pods placed as admitted."""
    replicas = tuple(
        replace(r, replicas=min(r.replicas, places[pod_set_name(r.role)].count))
        if pod_set_name(r.role) in places
        else r
        for r in ctx.replicas
    )
    slots = tuple(
        Slot(replica, index, naming.pod_name(ctx.job.name, replica.role, index))
        for replica in replicas
        for index in range(replica.replicas)
    )
    by_role = {
        r.role: places[pod_set_name(r.role)] for r in replicas if pod_set_name(r.role) in places
    }
    return replace(ctx, replicas=replicas, slots=slots, placements=by_role)


def admitted(admission: Admission, views: Sequence[SlotView], result: Result) -> Result:
    """An admitted job's pass: its status says so, and its Workload's
    PodsReady follows the pods (Kueue's waitForPodsReady reads it)."""
    job, workload = admission.ctx.job, admission.workload
    if result.status.get("state") != State.RUNNING:
        return replace(result, actions=admission.actions + result.actions)
    now = job.stamp
    conditions: list[Condition] = result.status["conditions"]
    message = f"Admitted by ClusterQueue {workload.cluster_queue}"
    conditions = set_condition(
        conditions, ConditionType.ADMITTED, True, Reason.ADMITTED, message, now
    )
    conditions = clear_condition(conditions, ConditionType.QUEUED, Reason.ADMITTED, message, now)
    conditions = clear_condition(conditions, ConditionType.EVICTED, Reason.ADMITTED, message, now)
    actions = list(admission.actions)
    if ConditionType.ADMITTED not in job.true_conditions:
        actions.append(Event(EventType.NORMAL, Reason.ADMITTED, message))
    ready = bool(views) and all(v.up for v in views)
    edit = (
        (PODS_READY, True, "Started", "All pods are running or done")
        if ready
        else (PODS_READY, False, "WaitForStart", "Not all pods are running yet")
    )
    if workload.true(PODS_READY) and not ready:
        edit = (PODS_READY, False, "WaitForRecovery", "A pod is being recreated")
    update = with_conditions(workload, [edit], now)
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
    workload: WorkloadView | None,
    queued: bool = True,
    keep_pods: bool = False,
) -> Result:
    """A queued job that has no admission: no pod, and a status that says
    why. `keep_pods`: its pods are left (the caller deletes what must go)."""
    job, now = ctx.job, ctx.job.stamp
    if not keep_pods:
        for pod in job.children.pods:
            if not pod.terminating:
                actions += delete_actions(pod.obj, POD, "the job waits for Kueue's admission")
    if job.prev.get("reason") != reason:
        kind = EventType.NORMAL if reason == Reason.PENDING else EventType.WARNING
        actions = [*actions, Event(kind, reason, message)]
    conditions = set_condition(job.conditions, ConditionType.QUEUED, queued, reason, message, now)
    conditions = clear_condition(conditions, ConditionType.ADMITTED, reason, message, now)
    if workload is not None and workload.true(EVICTED):
        evicted = f"{workload.reason(EVICTED)}: {workload.message(EVICTED)}"
        conditions = set_condition(
            conditions, ConditionType.EVICTED, True, workload.reason(EVICTED), evicted, now
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
