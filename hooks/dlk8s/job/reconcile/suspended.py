"""The suspended path: spec.runPolicy.suspend, as a batch Job does it.

Every pod is deleted (Services and extras kept); the job waits in phase
Creating with reason Suspended and condition Suspended. On resume it stays
here until the suspension's pods are gone, then starts afresh with a new
startTime (so activeDeadlineSeconds does not count the suspension).
"""

from __future__ import annotations

from collections.abc import Sequence

from dlk8s.job.actions import Action, Event
from dlk8s.job.api import ConditionType, EventType, JobContext, Observed, Phase, Reason, State
from dlk8s.job.children import POD, is_terminating
from dlk8s.job.policy import clear_condition, is_true, set_condition
from dlk8s.job.reconcile.status import carried, replica_statuses
from dlk8s.job.reconcile.view import JobView, Result, SlotView, delete_actions


def suspended(
    ctx: JobContext, job: JobView, owned: Observed, views: Sequence[SlotView], restarts: int
) -> Result:
    """Suspended, or resumed while the suspension's pods are still going away."""
    actions: list[Action] = []
    if not is_true(job.conditions, ConditionType.SUSPENDED):
        actions.append(
            Event(EventType.NORMAL, Reason.SUSPENDED, "Suspending the job: deleting its pods")
        )
    for pod in owned.pods:
        if not is_terminating(pod):
            actions += delete_actions(pod, POD, "the job is suspended")
    now = job.stamp
    message = (
        "spec.runPolicy.suspend is true"
        if ctx.run_policy.suspend
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
    # No startTime: the deadline starts again on resume, as for a batch Job.
    status = carried(job, restarts) | {
        "state": State.RUNNING,
        "phase": Phase.CREATING,
        "reason": Reason.SUSPENDED,
        "conditions": conditions,
        "replicaStatuses": replica_statuses(ctx, views),
    }
    status.pop("startTime", None)
    return Result(actions, status, None)
