"""The active path: a valid job that has not finished and is not suspended.

Recreate what failed or vanished, create what is missing, and decide the
outcome from the deciding replica, the deadline and backoffLimit. When the
operator's own configuration stops it from building the job (preflight),
the job waits with reason ConfigError instead of being failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from dlk8s.job.accelerators import inject_accelerators
from dlk8s.job.actions import Action, Event
from dlk8s.job.api import (
    ConditionType,
    EventType,
    JobContext,
    Obj,
    Observed,
    Phase,
    Reason,
    RunPolicy,
    Slot,
    State,
    parse_time,
)
from dlk8s.job.children import (
    CONFIG_MAP,
    DEPLOYMENT,
    POD,
    SERVICE,
    headless_service,
    is_terminating,
    name_of,
    pod_for_slot,
    replica_key,
)
from dlk8s.job.policy import Decision, decide, is_true, pod_outcome
from dlk8s.job.reconcile.finished import finish
from dlk8s.job.reconcile.restarts import lost_pods, restart_actions, restart_count
from dlk8s.job.reconcile.status import active_status, carried, replica_statuses
from dlk8s.job.reconcile.suspended import suspended
from dlk8s.job.reconcile.view import (
    JobView,
    Result,
    SlotView,
    Verdict,
    create_actions,
    deciders_of,
    delete_actions,
    detail,
    later,
)


def active(ctx: JobContext, job: JobView, owned: Observed) -> Result:
    views, strays = _match_pods(ctx, owned.pods)
    restarts = restart_count(job.prev, owned.pods)
    resuming = is_true(job.conditions, ConditionType.SUSPENDED) and bool(owned.pods)
    if ctx.run_policy.suspend or resuming:
        return suspended(ctx, job, owned, views, restarts)
    problems = ctx.kind.preflight(ctx, owned)
    if problems:
        return blocked(ctx, job, views, restarts, problems)
    lost = lost_pods(ctx, job, views)
    verdict = _verdict(ctx, job, views, restarts, lost)
    if verdict is not None:
        return finish(job, owned, verdict, restarts)
    actions, waits = restart_actions(views, restarts, job.now)
    actions += _notices(job, restarts, lost)
    for pod in strays:
        if not is_terminating(pod):
            actions += delete_actions(pod, POD, "it matches no replica of the spec")
    creating = _missing_pods(views, owned.pods)
    actions += [
        a for v in creating for a in create_actions(_build_pod(ctx, v.slot, restarts + lost))
    ]
    actions += _sync_children(ctx, owned)
    actions += ctx.kind.update_children(ctx, owned)
    deadline = _deadline_wait(ctx.run_policy, job)
    timers = waits if deadline is None else [*waits, deadline]
    requeue = min(timers) if timers else None
    status = active_status(ctx, job, views, restarts + lost, lost, creating)
    return Result(actions, status, requeue)


def blocked(
    ctx: JobContext, job: JobView, views: Sequence[SlotView], restarts: int, problems: list[str]
) -> Result:
    """The operator's own configuration stops it from building the job: say
    so once and wait, without failing a job that is not at fault."""
    message = "; ".join(problems)
    actions: list[Action] = []
    if job.prev.get("reason") != Reason.CONFIG_ERROR:
        actions.append(Event(EventType.WARNING, Reason.CONFIG_ERROR, message))
    phase = job.prev.get("phase")
    status = carried(job, restarts) | {
        "state": State.RUNNING,
        "phase": phase if phase in (Phase.CREATING, Phase.RUNNING) else Phase.CREATING,
        "reason": Reason.CONFIG_ERROR,
        "conditions": job.conditions,
        "replicaStatuses": replica_statuses(ctx, views),
    }
    return Result(actions, status, None)


def _notices(job: JobView, restarts: int, lost: int) -> list[Action]:
    notices: list[Action] = []
    if lost:
        message = f"Recreating {lost} pod(s) deleted or lost (restarts: {restarts + lost})"
        notices.append(Event(EventType.WARNING, Reason.RECREATING, message))
    if is_true(job.conditions, ConditionType.SUSPENDED):
        notices.append(
            Event(EventType.NORMAL, Reason.RESUMED, "Resuming the job: creating its pods")
        )
    return notices


def _match_pods(ctx: JobContext, pods: Sequence[Obj]) -> tuple[list[SlotView], list[Obj]]:
    """Each slot's pod by the labels; everything else the job owns is a stray."""
    wanted = {(slot.role.lower(), slot.index) for slot in ctx.slots}
    groups: dict[tuple[str, int], list[Obj]] = {}
    strays: list[Obj] = []
    for pod in pods:
        key = replica_key(pod)
        if key is not None and key in wanted:
            groups.setdefault(key, []).append(pod)
        else:
            strays.append(pod)
    views = []
    for slot in ctx.slots:
        candidates = groups.get((slot.role.lower(), slot.index), [])
        # Prefer the pod with the slot's own name, then one not being deleted.
        candidates.sort(key=lambda p: (name_of(p) != slot.name, is_terminating(p), name_of(p)))
        strays += candidates[1:]
        views.append(_view(ctx, slot, candidates[0] if candidates else None))
    return views, strays


def _view(ctx: JobContext, slot: Slot, pod: Obj | None) -> SlotView:
    if pod is None:
        return SlotView(slot, None, None, Decision.NONE)
    outcome = pod_outcome(pod, ctx.kind.container)
    deciding = slot.role == ctx.deciding_role
    return SlotView(slot, pod, outcome, decide(outcome, slot.replica.restart_policy, deciding))


def _verdict(
    ctx: JobContext, job: JobView, views: Sequence[SlotView], restarts: int, lost: int
) -> Verdict | None:
    deciders = deciders_of(ctx, views)
    if deciders and all(v.decision == Decision.SUCCEED_JOB for v in deciders):
        last = max(deciders, key=_finish_order)
        what = last.label if len(deciders) == 1 else f"all {len(deciders)} {last.slot.role} pods"
        return Verdict(State.SUCCEEDED, Reason.SUCCEEDED, f"{what} succeeded: {detail(last)}")
    for view in views:
        if view.decision == Decision.FAIL_JOB:
            return Verdict(
                State.FAILED, Reason.REPLICA_FAILED, f"{view.label} failed: {detail(view)}"
            )
    deadline = ctx.run_policy.active_deadline_seconds
    if deadline is not None and _deadline_wait(ctx.run_policy, job) == 0:
        message = f"The job has been active longer than activeDeadlineSeconds ({deadline}s)"
        return Verdict(State.FAILED, Reason.DEADLINE_EXCEEDED, message)
    limit = ctx.run_policy.backoff_limit
    needed = lost + sum(1 for v in views if v.decision == Decision.RESTART)
    if limit is not None and needed and restarts + needed > limit:
        message = (
            f"{needed} more pod restart(s) needed after {restarts}, but backoffLimit is {limit}"
        )
        return Verdict(State.FAILED, Reason.BACKOFF_LIMIT_EXCEEDED, message)
    return None


def _finish_order(view: SlotView) -> tuple[datetime, int]:
    finished = view.outcome.finished_at if view.outcome else None
    return (finished or datetime.min.replace(tzinfo=UTC), view.slot.index)


def _deadline_wait(policy: RunPolicy, job: JobView) -> float | None:
    """Seconds until activeDeadlineSeconds runs out (0 once it has)."""
    if policy.active_deadline_seconds is None:
        return None
    start = parse_time(job.prev.get("startTime")) or job.now
    left = (later(start, policy.active_deadline_seconds) - job.now).total_seconds()
    return max(0.0, left)


def _missing_pods(views: Sequence[SlotView], pods: Sequence[Obj]) -> list[SlotView]:
    """Slots whose pod is to be created now. A name still held by any pod
    (even one being deleted) must be freed first: never two pods of one name."""
    taken = {name_of(pod) for pod in pods}
    return [v for v in views if v.pod is None and v.slot.name not in taken]


def _build_pod(ctx: JobContext, slot: Slot, restarts: int) -> Obj:
    pod = ctx.kind.decorate_pod(ctx, slot, pod_for_slot(ctx, slot, restarts))
    inject_accelerators(pod["spec"], ctx.config.accelerators)
    return pod


def _sync_children(ctx: JobContext, owned: Observed) -> list[Action]:
    """Services, ConfigMaps and Deployments: create what is missing, delete
    what the spec no longer asks for. Existing ones are left as they are, and
    only missing ones are built, so a job at rest costs little."""
    extras = ctx.kind.extras(ctx)
    port_name = ctx.kind.port_name
    want = {(e["kind"], e["metadata"]["name"]) for e in extras}
    if port_name is not None:
        want |= {(SERVICE[1], slot.name) for slot in ctx.slots}
    existing = (
        [(o, SERVICE) for o in owned.services]
        + [(o, CONFIG_MAP) for o in owned.configmaps]
        + [(o, DEPLOYMENT) for o in owned.deployments]
    )
    have = {(api_kind[1], name_of(o)) for o, api_kind in existing}
    actions: list[Action] = []
    if port_name is not None:
        for slot in ctx.slots:
            if (SERVICE[1], slot.name) not in have:
                actions += create_actions(headless_service(ctx, slot, port_name))
    for obj in extras:
        if (obj["kind"], obj["metadata"]["name"]) not in have:
            actions += create_actions(obj)
    for obj, api_kind in existing:
        if (api_kind[1], name_of(obj)) not in want and not is_terminating(obj):
            actions += delete_actions(obj, api_kind, "the spec no longer asks for it")
    return actions
