"""Reading a job once, and what every path returns.

read_job makes the JobView (jobmodel.JobView) every path reads: leniently, so
any input gives one, and once, so no path digs in the object again. A
Verdict is an outcome decided in this pass; a Result is what a pass returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from dlk8s.job import childnames
from dlk8s.job.actions import Action
from dlk8s.job.conditions import clean_conditions
from dlk8s.job.failurepolicy import read_rules
from dlk8s.job.jobmodel import (
    DEFAULT_BACKOFF_LIMIT,
    Children,
    ChildView,
    JobView,
    Observed,
    RunPolicy,
)
from dlk8s.job.kinds import lookup
from dlk8s.job.kueue.multikueue import handling, prebuilt_workload
from dlk8s.job.kueue.workload import queue_label, queue_of
from dlk8s.job.objects import (
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    dig,
    format_time,
    is_int,
    is_terminating,
    later,
    name_of,
    parse_time,
    replica_key,
)
from dlk8s.job.outcomes import FAILED, PENDING, RUNNING, SUCCEEDED, counted_pods
from dlk8s.job.vocabulary import (
    ANNOTATION_RESTART_COUNT,
    CleanPodPolicy,
    ConditionType,
    State,
    SuccessPolicy,
)

# The status fields that remember how pods ended: the replicas that failed
# for good, and the pods recreated without counting a restart.
MEMORY_FIELDS: Final = ("failedReplicas", "uncountedRestarts")


@dataclass(frozen=True)
class Result:
    actions: list[Action]  # what the I/O side is to do, in order
    status: Obj  # the complete desired .status
    requeue_after: float | None  # seconds until a timer needs another pass
    # The job as the pass read it (reconcile sets it): what after_refusals
    # builds on, so the job is read once a pass. Not part of the plan.
    job: JobView | None = field(default=None, compare=False, repr=False)
    # What the I/O side does once the status is written (or found written):
    # the finalizers of pods whose end it records (reconcile.tracking).
    after_status: list[Action] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    """The outcome of a job, decided in this pass (the finished path records it)."""

    state: str  # State.SUCCEEDED or State.FAILED
    reason: str  # the status's reason and the event's
    message: str  # what the condition and the event say


def read_job(raw: Obj, observed: Observed, now: datetime) -> JobView:
    meta, prev = as_dict(raw.get("metadata")), as_dict(raw.get("status"))
    uid, generation = as_str(meta.get("uid")), meta.get("generation")
    generation = generation if is_int(generation) and generation >= 0 else None
    policy, kind = run_policy(raw), lookup(raw.get("kind"))
    conditions = clean_conditions(prev.get("conditions"))
    true = frozenset(c["type"] for c in conditions if c.get("status") == "True")
    start, completion = prev.get("startTime"), prev.get("completionTime")
    started_at, completed_at = parse_time(start), parse_time(completion)
    start_time = start if started_at is not None else None
    runtime_id, stamp = childnames.runtime_id(uid), format_time(now)
    children = read_children(observed)
    restarts = restart_count(prev, observed.pods)
    limit = policy.active_deadline_seconds
    deadline = None if limit is None else later(started_at or now, limit)
    # The status fields every path keeps.
    carried: Obj = {"runtimeId": runtime_id, "restartCount": restarts}
    if generation is not None:
        carried["observedGeneration"] = generation
    if start_time:
        carried["startTime"] = start_time
    # What the status remembers of how pods ended (reconcile.endings).
    for name in MEMORY_FIELDS:
        if isinstance(prev.get(name), list) and prev[name]:
            carried[name] = prev[name]
    if kind is not None:
        carried |= kind.status_fields(raw, prev, stamp)
    return JobView(
        raw=raw,
        kind=kind,
        name=as_str(meta.get("name")),
        namespace=as_str(meta.get("namespace")),
        uid=uid,
        runtime_id=runtime_id,
        generation=generation,
        deleting=meta.get("deletionTimestamp") is not None,
        policy=policy,
        children=children,
        prev=prev,
        conditions=conditions,
        true_conditions=true,
        counted=counted_pods(prev.get("replicaStatuses")),
        restarts=restarts,
        outcome=_outcome(prev.get("state"), true),
        start_time=start_time,
        started_at=started_at,
        completion_time=completion if completed_at is not None else None,
        completed_at=completed_at,
        deadline=deadline,
        carried=carried,
        now=now,
        stamp=stamp,
        queue=queue_of(meta, observed.queueing, children),
        queue_label=queue_label(meta),
        queueing=observed.queueing,
        handling=handling(raw),
        prebuilt=prebuilt_workload(meta),
    )


def run_policy(job: object) -> RunPolicy:
    """spec.runPolicy with every unusable field replaced by its default.

    Lenient on purpose: a job that failed validation still needs its cleanup
    policy and TTL honoured.
    """
    raw = as_dict(dig(job, "spec", "runPolicy"))
    clean, success = raw.get("cleanPodPolicy"), raw.get("successPolicy")
    ttl, deadline, limit = (
        as_int(raw.get(key), -1)
        for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit")
    )
    return RunPolicy(
        clean_pod_policy=clean if clean in CleanPodPolicy.ALLOWED else CleanPodPolicy.RUNNING,
        ttl_seconds_after_finished=ttl if ttl >= 0 else None,
        active_deadline_seconds=deadline if deadline > 0 else None,
        backoff_limit=limit if limit >= 0 else DEFAULT_BACKOFF_LIMIT,
        suspend=raw.get("suspend") is True,
        success_policy=success
        if success in SuccessPolicy.ALLOWED
        else SuccessPolicy.NO_FAILED_REPLICAS,
        failure_rules=read_rules(raw.get("podFailurePolicy")),
    )


def read_children(observed: Observed) -> Children:
    def read(group: Sequence[Obj]) -> tuple[ChildView, ...]:
        return tuple(
            ChildView(obj, name_of(obj), replica_key(obj), is_terminating(obj)) for obj in group
        )

    return Children(
        read(observed.pods),
        read(observed.services),
        read(observed.configmaps),
        read(observed.deployments),
        read(observed.gone),
        read(observed.workloads),
        read(observed.networkpolicies),
    )


def restart_count(prev: Obj, pods: Sequence[Obj]) -> int:
    """The restarts the status counted, or more if a pod's annotation says so
    (a restart acted on whose status write was lost: see restarts.py)."""
    counts = [max(0, as_int(prev.get("restartCount"), 0))]
    for pod in pods:
        value = dig(pod, "metadata", "annotations", ANNOTATION_RESTART_COUNT)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
            counts.append(int(value))
    return max(counts)


def _outcome(state: object, true_conditions: frozenset[str]) -> str | None:
    """Succeeded or Failed once the job has finished, by its status's state
    or else by its conditions; None while it has not."""
    if state in (State.SUCCEEDED, State.FAILED):
        return str(state)
    if ConditionType.SUCCEEDED in true_conditions:
        return State.SUCCEEDED
    return State.FAILED if ConditionType.FAILED in true_conditions else None


# The pods of every role by phase, for `kubectl get`'s printer columns: a
# JSONPath cannot sum replicaStatuses across roles. Unknown is not shown.
POD_TOTALS: Final = {
    "pendingPods": PENDING,
    "runningPods": RUNNING,
    "succeededPods": SUCCEEDED,
    "failedPods": FAILED,
}


def with_pod_totals(result: Result, job: JobView) -> Result:
    """The result of `job`'s pass with its status's pod counts summed over
    replicaStatuses."""
    statuses = [as_dict(entry) for entry in as_list(result.status.get("replicaStatuses"))]
    totals = {
        name: sum(as_int(as_dict(s.get("replicasStates")).get(phase), 0) for s in statuses)
        for name, phase in POD_TOTALS.items()
    }
    return replace(result, status=result.status | totals, job=job)
