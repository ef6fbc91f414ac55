"""The suspended path: spec.runPolicy.suspend, as a batch Job does it.

Every pod is deleted (Services and extras kept); the job waits in phase
Creating with reason Suspended and condition Suspended. On resume it stays
here until the suspension's pods are gone, then starts afresh with a new
startTime (so activeDeadlineSeconds does not count the suspension).
"""

from __future__ import annotations

from collections.abc import Sequence

from dlk8s.job.actions import Action, Event, delete_actions
from dlk8s.job.children import POD
from dlk8s.job.conditions import clear_condition, set_condition
from dlk8s.job.jobmodel import JobContext
from dlk8s.job.kueue.workload import WORKLOAD
from dlk8s.job.reconcile.slots import SlotView, replica_statuses
from dlk8s.job.reconcile.view import Result
from dlk8s.job.vocabulary import ConditionType, EventType, Phase, Reason, State


def suspended(ctx: JobContext, views: Sequence[SlotView]) -> Result:
    """Suspended, or resumed while the suspension's pods are still going away."""
    job = ctx.job
    actions: list[Action] = []
    if ConditionType.SUSPENDED not in job.true_conditions:
        actions.append(
            Event(EventType.NORMAL, Reason.SUSPENDED, "Suspending the job: deleting its pods")
        )
    for pod in job.children.pods:
        if not pod.terminating:
            actions += delete_actions(pod.obj, POD, "the job is suspended")
    # A suspended job gives its Kueue admission back; it queues again on resume.
    for workload in job.children.workloads:
        if not workload.terminating:
            actions += delete_actions(workload.obj, WORKLOAD, "the job is suspended")
    now = job.stamp
    message = (
        "spec.runPolicy.suspend is true"
        if job.policy.suspend
        else "Resuming once the pods of the suspension are gone"
    )
    conditions = set_condition(
        job.conditions, ConditionType.SUSPENDED, True, Reason.SUSPENDED, message, now
    )
    conditions = clear_condition(
        conditions, ConditionType.RUNNING, Reason.SUSPENDED, "The job is suspended", now
    )
    conditions = clear_condition(
        conditions, ConditionType.RESTARTING, Reason.SUSPENDED, "The job is suspended", now
    )
    conditions = clear_condition(
        conditions, ConditionType.ADMITTED, Reason.SUSPENDED, "The job gave its admission back", now
    )
    # No startTime: the deadline starts again on resume, as for a batch Job.
    status = job.carried | {
        "state": State.RUNNING,
        "phase": Phase.CREATING,
        "reason": Reason.SUSPENDED,
        "conditions": conditions,
        "replicaStatuses": replica_statuses(ctx, views),
    }
    status.pop("startTime", None)
    return Result(actions, status, None)
