"""The active path: a valid job that has not finished and is not suspended.

Recreate what failed or vanished, replace what is stuck on a lost node
(stuck.py), create what is missing, remember how
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
from dlk8s.job.conditions import clear_condition, condition_of, set_condition
from dlk8s.job.config import ControllerConfig
from dlk8s.job.failurepolicy import Action as FailureAction
from dlk8s.job.failurepolicy import Judgement
from dlk8s.job.jobmodel import ChildView, JobContext, JobView, Kind, Slot
from dlk8s.job.objects import Condition, Obj, as_list, is_text
from dlk8s.job.outcomes import Decision
from dlk8s.job.reconcile.changes import changes, first_pods
from dlk8s.job.reconcile.endings import remember
from dlk8s.job.reconcile.finished import finish
from dlk8s.job.reconcile.queued import admitted, gate, is_queued
from dlk8s.job.reconcile.restarts import lost_pods, restart_actions
from dlk8s.job.reconcile.slots import SlotView, match_pods, replica_statuses
from dlk8s.job.reconcile.stuck import stuck_pods
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
    detached, stuck = stuck_pods(views, job.children.pods, job.now)
    ending, timers = verdict(ctx, views, lost, memory.failed)
    if ending is not None:
        finished = finish(job, ending, True)
        return replace(finished, actions=memory.events + finished.actions)
    created, creating = changes(ctx, views, strays, job.restarts + lost)
    actions = restarts + detached + memory.events + _notices(job, views, lost) + created
    actions += ctx.kind.update_children(ctx)
    timers += waits + stuck
    requeue = min(timers) if timers else None
    status = active_status(ctx, views, lost, creating)
    return Result(actions + _not_starting_notice(job, status), status, requeue)


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


def _notices(job: JobView, views: Sequence[SlotView], lost: int) -> list[Action]:
    notices: list[Action] = []
    # A pod the operator deleted because it failed left a tombstone that
    # says so (slots.py): its restart was announced when it was deleted.
    failed = min(lost, sum(1 for v in views if v.pod is None and _counted(v.judgement)))
    count = f"(restarts: {job.restarts + lost})"
    if failed:
        message = f"Recreating {failed} pod(s) that failed {count}"
        notices.append(Event(EventType.NORMAL, Reason.RECREATING, message))
    if lost > failed:
        message = f"Recreating {lost - failed} pod(s) deleted or lost {count}"
        notices.append(Event(EventType.WARNING, Reason.RECREATING, message))
    if ConditionType.SUSPENDED in job.true_conditions:
        notices.append(
            Event(EventType.NORMAL, Reason.RESUMED, "Resuming the job: creating its pods")
        )
    return notices


def _counted(judgement: Judgement | None) -> bool:
    return judgement is not None and judgement.action == FailureAction.COUNT


def _deciders(ctx: JobContext, views: Sequence[SlotView]) -> list[SlotView]:
    return [v for v in views if v.slot.role == ctx.deciding_role]


def active_status(
    ctx: JobContext, views: Sequence[SlotView], lost: int, creating: Sequence[SlotView]
) -> Obj:
    job, now = ctx.job, ctx.job.stamp
    deciders = _deciders(ctx, views)
    running = all(v.settled for v in views) and bool(deciders) and all(v.up for v in deciders)
    recreating = bool(lost) or any(
        v.decision in (Decision.RESTART, Decision.REPLACE) for v in views
    )
    restarting = recreating or (ConditionType.RESTARTING in job.true_conditions and not running)
    conditions = _created(ctx, views, creating)
    waiting, why = _waiting(views, recreating, restarting)
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
    elif waiting == Reason.POD_NOT_STARTING:  # said even before the job ever ran
        conditions = set_condition(conditions, ConditionType.RUNNING, False, waiting, why, now)
    else:
        conditions = clear_condition(conditions, ConditionType.RUNNING, waiting, why, now)
    if restarting:
        conditions = set_condition(
            conditions, ConditionType.RESTARTING, True, Reason.RESTARTING, _cause(job, views), now
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


def _created(
    ctx: JobContext, views: Sequence[SlotView], creating: Sequence[SlotView]
) -> list[Condition]:
    """The job's conditions, Created among them once every pod is.

    The pods this pass creates count as created: its status is written
    only once every create succeeded (runtime.controller), and a refusal
    turns the condition False (refused.py). Said in the creating pass,
    the job needs no write of its own for it."""
    conditions = ctx.job.conditions
    sent = {v.slot.name for v in creating}
    if all((v.pod is not None and not v.terminating) or v.slot.name in sent for v in views):
        message = f"All {len(views)} pods of the job have been created"
        conditions = set_condition(
            conditions, ConditionType.CREATED, True, Reason.CREATED, message, ctx.job.stamp
        )
    return conditions


def _waiting(views: Sequence[SlotView], recreating: bool, restarting: bool) -> tuple[str, str]:
    """Why a job that is not running yet waits: its reason and message. A
    pod that cannot start says so unless this pass recreates pods (a
    replacement may be stuck too: a Secret deleted meanwhile)."""
    if not recreating:
        stuck = [v for v in views if v.outcome is not None and v.outcome.not_starting]
        if stuck:
            more = f" (and {len(stuck) - 1} more pod(s))" if len(stuck) > 1 else ""
            first = stuck[0]
            message = f"{first.label} (pod {first.pod_name}) is not starting: {first.detail}"
            return Reason.POD_NOT_STARTING, message + more
    reason = Reason.RESTARTING if restarting else Reason.CREATING
    return reason, "Waiting for pods to be created and running"


def _cause(job: JobView, views: Sequence[SlotView]) -> str:
    """The Restarting condition's message: the pods being recreated and why,
    or, while their replacements come up, what the last pass said."""
    failed = [
        (v, v.judgement)
        for v in views
        if v.judgement is not None
        and (v.decision in (Decision.RESTART, Decision.REPLACE) or v.pod is None)
    ]
    if failed:
        first, judgement = failed[0]
        more = f" (and {len(failed) - 1} more pod(s))" if len(failed) > 1 else ""
        return f"Recreating {first.label} (pod {first.pod_name}): {judgement.what}{more}"
    before = condition_of(job.conditions, ConditionType.RESTARTING)
    if before.get("status") == "True" and is_text(before.get("message")):
        return str(before["message"])
    return "Recreating pods that failed or disappeared"


def _not_starting_notice(job: JobView, status: Obj) -> list[Action]:
    """A Warning once a pod's cause of not starting is new to the status."""
    if status.get("reason") != Reason.POD_NOT_STARTING:
        return []
    now = condition_of(as_list(status.get("conditions")), ConditionType.RUNNING)
    before = condition_of(job.conditions, ConditionType.RUNNING)
    if before.get("reason") == now.get("reason") and before.get("message") == now.get("message"):
        return []
    return [Event(EventType.WARNING, Reason.POD_NOT_STARTING, str(now.get("message")))]
