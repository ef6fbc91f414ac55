"""Building the status every path writes: carried fields, conditions, counts.

The status is always written whole, so it is built whole: fields every path
keeps (runtimeId, restartCount, observedGeneration, startTime, the kind's
own), the conditions of the path, and the pods per replica by phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from dlk8s.job.api import (
    ConditionType,
    JobContext,
    Kind,
    Obj,
    Phase,
    Reason,
    State,
    as_dict,
    as_int,
    as_list,
)
from dlk8s.job.children import replica_key
from dlk8s.job.policy import (
    PENDING,
    Decision,
    PodOutcome,
    clear_condition,
    is_true,
    replica_status,
    set_condition,
)
from dlk8s.job.reconcile.invalid import spec_problems
from dlk8s.job.reconcile.view import (
    JobView,
    Result,
    SlotView,
    Verdict,
    deciders_of,
    is_up,
    outcomes,
    valid_time,
)


def carried(job: JobView, restarts: int) -> Obj:
    """The status fields every path keeps."""
    status: Obj = {"runtimeId": job.runtime_id, "restartCount": restarts}
    if job.generation is not None:
        status["observedGeneration"] = job.generation
    start = valid_time(job.prev.get("startTime"))
    if start:
        status["startTime"] = start
    if job.kind is not None:
        status |= job.kind.status_fields(job.raw, job.prev, job.stamp)
    return status


def active_status(
    ctx: JobContext,
    job: JobView,
    views: Sequence[SlotView],
    restarts: int,
    lost: int,
    creating: Sequence[SlotView],
) -> Obj:
    now = job.stamp
    deciders = deciders_of(ctx, views)
    running = all(v.settled for v in views) and bool(deciders) and all(map(is_up, deciders))
    restarting = bool(lost) or any(v.decision == Decision.RESTART for v in views)
    restarting = restarting or (is_true(job.conditions, ConditionType.RESTARTING) and not running)
    conditions = job.conditions
    if all(v.pod is not None and not v.terminating for v in views):
        message = f"All {len(views)} pods of the job have been created"
        conditions = set_condition(
            conditions, ConditionType.CREATED, True, Reason.CREATED, message, now
        )
    waiting = Reason.RESTARTING if restarting else Reason.CREATING
    if running:
        what = (
            deciders[0].label + " is"
            if len(deciders) == 1
            else f"the {deciders[0].slot.role} pods are"
        )
        message = f"All pods are created and {what} running"
        conditions = set_condition(
            conditions, ConditionType.RUNNING, True, Reason.RUNNING, message, now
        )
    else:
        message = "Waiting for pods to be created and running"
        conditions = clear_condition(conditions, ConditionType.RUNNING, waiting, message, now)
    if restarting:
        message = "Recreating pods that failed or disappeared"
        conditions = set_condition(
            conditions, ConditionType.RESTARTING, True, Reason.RESTARTING, message, now
        )
    else:
        message = "Every replica has a pod again"
        conditions = clear_condition(
            conditions, ConditionType.RESTARTING, Reason.RECOVERED, message, now
        )
    message = "spec.runPolicy.suspend is false"
    conditions = clear_condition(conditions, ConditionType.SUSPENDED, Reason.RESUMED, message, now)
    return carried(job, restarts) | {
        "startTime": valid_time(job.prev.get("startTime")) or now,
        "state": State.RUNNING,
        "phase": Phase.RUNNING if running else Phase.CREATING,
        "reason": Reason.RUNNING if running else waiting,
        "conditions": conditions,
        "replicaStatuses": replica_statuses(ctx, views, creating),
    }


def replica_statuses(
    ctx: JobContext, views: Sequence[SlotView], creating: Sequence[SlotView] = ()
) -> list[Obj]:
    """Pods by phase per replica. The pods this pass creates count as Pending:
    the status is written only once their creates succeeded, and the next
    pass finds lost pods by comparing with these totals. Left out, a
    replacement would stand in for a pod of its role seen gone next."""
    created = {v.slot.name for v in creating}
    counted = [
        (v.slot.replica, v.outcome or PodOutcome(PENDING))
        for v in views
        if v.outcome is not None or v.slot.name in created
    ]
    return [
        replica_status(r.role, r.replicas, [o for replica, o in counted if replica is r])
        for r in ctx.replicas
    ]


def finished_replica_statuses(job: JobView, pods: Sequence[Obj]) -> list[Obj]:
    kind = job.kind
    if kind is None or spec_problems(job):
        return replica_statuses_by_label(kind, pods)
    statuses = []
    for replica in kind.replicas(job.raw):
        mine = [p for p in pods if _in_replica(p, replica.role, replica.replicas)]
        statuses.append(
            replica_status(replica.role, replica.replicas, outcomes(mine, kind.container))
        )
    return statuses


def replica_statuses_by_label(kind: Kind | None, pods: Sequence[Obj]) -> list[Obj]:
    """For a job whose spec is unusable: group what exists by its labels."""
    known = {role.lower(): role for role in kind.roles} if kind else {}
    groups: dict[str, list[Obj]] = {}
    for pod in pods:
        key = replica_key(pod)
        if key is not None:
            groups.setdefault(known.get(key[0], key[0].upper()), []).append(pod)
    container = kind.container if kind else ""
    return [
        replica_status(role, len(group), outcomes(group, container))
        for role, group in sorted(groups.items())
    ]


def _in_replica(pod: Obj, role: str, replicas: int) -> bool:
    key = replica_key(pod)
    return key is not None and key[0] == role.lower() and key[1] < replicas


def verdict_conditions(conditions: list[Obj], verdict: Verdict, now: str) -> list[Obj]:
    type_ = ConditionType.SUCCEEDED if verdict.state == State.SUCCEEDED else ConditionType.FAILED
    conditions = set_condition(conditions, type_, True, verdict.reason, verdict.message, now)
    conditions = clear_condition(
        conditions, ConditionType.RUNNING, verdict.reason, "The job has finished", now
    )
    return clear_condition(
        conditions, ConditionType.RESTARTING, verdict.reason, "The job has finished", now
    )


# The pods of every role by phase, for `kubectl get`'s printer columns: a
# JSONPath cannot sum replicaStatuses across roles. Unknown is not shown.
POD_TOTALS: Final = {
    "pendingPods": PENDING,
    "runningPods": "Running",
    "succeededPods": "Succeeded",
    "failedPods": "Failed",
}


def with_pod_totals(result: Result) -> Result:
    """The result with its status's pod counts summed over replicaStatuses."""
    statuses = [as_dict(entry) for entry in as_list(result.status.get("replicaStatuses"))]
    totals = {
        field: sum(as_int(as_dict(s.get("replicasStates")).get(phase), 0) for s in statuses)
        for field, phase in POD_TOTALS.items()
    }
    return replace(result, status=result.status | totals)
