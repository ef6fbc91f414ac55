"""The active path: a valid job that has not finished and is not suspended.

Recreate what failed or vanished, create what is missing, remember how
pods ended (endings.py) and decide the outcome (verdicts.py: the success
policy, podFailurePolicy, the deadline and backoffLimit). When the
operator's own configuration stops it from building the job (preflight),
the job waits with reason ConfigError instead of being failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dlk8s.job import childnames
from dlk8s.job.actions import Action, Event
from dlk8s.job.conditions import clear_condition, set_condition
from dlk8s.job.config import ControllerConfig
from dlk8s.job.jobmodel import ChildView, JobContext, JobView, Kind, Slot
from dlk8s.job.objects import Obj
from dlk8s.job.outcomes import Decision
from dlk8s.job.reconcile.changes import changes, first_pods
from dlk8s.job.reconcile.endings import remember
from dlk8s.job.reconcile.finished import finish
from dlk8s.job.reconcile.queued import admitted, gate, is_queued
from dlk8s.job.reconcile.restarts import lost_pods, restart_actions
from dlk8s.job.reconcile.slots import SlotView, match_pods, replica_statuses
from dlk8s.job.reconcile.suspended import suspended
from dlk8s.job.reconcile.verdicts import verdict
from dlk8s.job.reconcile.view import MEMORY_FIELDS, Result
from dlk8s.job.vocabulary import ConditionType, EventType, Phase, Reason, State


def job_context(job: JobView, kind: Kind, config: ControllerConfig) -> JobContext:
    """A valid job's view with what its spec makes of it."""
    replicas = kind.replicas(job.raw)
    slots = tuple(
        Slot(replica, index, childnames.pod_name(job.name, replica.role, index))
        for replica in replicas
        for index in range(replica.replicas)
    )
    return JobContext(job, kind, replicas, slots, config, kind.deciding_role(replicas))


def active(ctx: JobContext) -> Result:
    job = ctx.job
    views, strays = match_pods(ctx)
    resuming = ConditionType.SUSPENDED in job.true_conditions and bool(job.children.pods)
    if job.policy.suspend or resuming:
        return suspended(ctx, views)
    problems = ctx.kind.preflight(ctx)
    if problems:
        return blocked(ctx, views, problems)
    if not is_queued(job):
        return _running(ctx, views, strays)
    gated = gate(ctx, views, lambda: first_pods(ctx))
    if isinstance(gated, Result):
        return gated
    views, strays = match_pods(gated.ctx)
    return admitted(gated, views, _running(gated.ctx, views, strays))


def _running(ctx: JobContext, views: list[SlotView], strays: list[ChildView]) -> Result:
    """A job whose pods may run: it is not queued, or Kueue admitted it."""
    job = ctx.job
    memory = remember(ctx, views)
    kept = {k: v for k, v in job.carried.items() if k not in MEMORY_FIELDS}
    job = replace(job, carried=kept | memory.fields)
    ctx = replace(ctx, job=job)
    lost = lost_pods(ctx, views, memory)
    restarts, waits = restart_actions(views, job.restarts, job.now)
    ending, timers = verdict(ctx, views, lost, memory.failed)
    if ending is not None:
        finished = finish(job, ending, True)
        return replace(finished, actions=memory.events + finished.actions)
    created, creating = changes(ctx, views, strays, job.restarts + lost)
    actions = restarts + memory.events + _notices(job, lost) + created
    actions += ctx.kind.update_children(ctx)
    timers += waits
    requeue = min(timers) if timers else None
    return Result(actions, active_status(ctx, views, lost, creating), requeue)


def blocked(ctx: JobContext, views: Sequence[SlotView], problems: list[str]) -> Result:
    """The operator's own configuration stops it from building the job: say
    so once and wait, without failing a job that is not at fault."""
    job = ctx.job
    message = "; ".join(problems)
    actions: list[Action] = []
    if job.prev.get("reason") != Reason.CONFIG_ERROR:
        actions.append(Event(EventType.WARNING, Reason.CONFIG_ERROR, message))
    phase = job.prev.get("phase")
    status = job.carried | {
        "state": State.RUNNING,
        "phase": phase if phase in (Phase.CREATING, Phase.RUNNING) else Phase.CREATING,
        "reason": Reason.CONFIG_ERROR,
        "conditions": job.conditions,
        "replicaStatuses": replica_statuses(ctx, views),
    }
    return Result(actions, status, None)


def _notices(job: JobView, lost: int) -> list[Action]:
    notices: list[Action] = []
    if lost:
        message = f"Recreating {lost} pod(s) deleted or lost (restarts: {job.restarts + lost})"
        notices.append(Event(EventType.WARNING, Reason.RECREATING, message))
    if ConditionType.SUSPENDED in job.true_conditions:
        notices.append(
            Event(EventType.NORMAL, Reason.RESUMED, "Resuming the job: creating its pods")
        )
    return notices


def _deciders(ctx: JobContext, views: Sequence[SlotView]) -> list[SlotView]:
    return [v for v in views if v.slot.role == ctx.deciding_role]


def active_status(
    ctx: JobContext, views: Sequence[SlotView], lost: int, creating: Sequence[SlotView]
) -> Obj:
    job, now = ctx.job, ctx.job.stamp
    deciders = _deciders(ctx, views)
    running = all(v.settled for v in views) and bool(deciders) and all(v.up for v in deciders)
    restarting = bool(lost) or any(
        v.decision in (Decision.RESTART, Decision.REPLACE) for v in views
    )
    restarting = restarting or (ConditionType.RESTARTING in job.true_conditions and not running)
    conditions = job.conditions
    # The pods this pass creates count as created: its status is written
    # only once every create succeeded (runtime.controller), and a refusal
    # turns the condition False (refused.py). Said in the creating pass,
    # the job needs no write of its own for it.
    sent = {v.slot.name for v in creating}
    if all((v.pod is not None and not v.terminating) or v.slot.name in sent for v in views):
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
    return job.carried | {
        "restartCount": job.restarts + lost,
        "startTime": job.start_time or now,
        "state": State.RUNNING,
        "phase": Phase.RUNNING if running else Phase.CREATING,
        "reason": Reason.RUNNING if running else waiting,
        "conditions": conditions,
        "replicaStatuses": replica_statuses(ctx, views, creating),
    }
