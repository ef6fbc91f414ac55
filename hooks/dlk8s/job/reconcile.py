"""The reconcile engine shared by every kind.

reconcile(job, observed, config, now) is a pure function from a job and its
observed children to the actions that move the world towards the job's spec
and the complete status that describes it. The I/O side executes the actions
and writes the status only when it differs from the job's, so a job at rest
costs no API call: reconciling an unchanged world returns no actions and an
identical status.

A job goes through one of four paths:
- finished (its status says Succeeded or Failed): only cleanup per
  cleanPodPolicy and the TTL. A finished job never gets a pod created again.
- invalid spec: marked Failed with reason InvalidSpec, then as finished.
- suspended: every pod deleted (Services and extras kept); the job waits in
  phase Creating with reason Suspended and condition Suspended. On resume it
  stays there until the suspension's pods are gone, then starts afresh with a
  new startTime (so activeDeadlineSeconds does not count the suspension).
- active: recreate what failed or vanished, create what is missing, decide
  the outcome from the deciding replica, deadline and backoffLimit.

Restart counting, without state beyond the status we already write:
a restart is counted when a pod of the job is gone, i.e. when a role has
fewer pods than the previous status counted (replicaStatuses, same
generation, not just after a suspension). A failed pod is first deleted
(nothing counted), and counted on the pass that sees it gone, which is also
the pass that creates its replacement. The pods a pass creates are counted in
the status it writes (as Pending), so a replacement seen by the next pass
cannot stand in for another pod that vanished meanwhile. Counting from the
difference with the previous status makes it idempotent: a pass repeated on
the same world, or a failed status write, counts the same pods again rather
than more pods (the controller's expectations keep a pass from running
before the caches show the creates of the last one). Each
new pod carries the job's restart count in the annotation
dlk8s.io/restart-count, and the count is never below the highest of those:
if the operator dies after creating a replacement but before writing the
status, the count is recovered from the pod instead of being lost.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from dlk8s.job import naming
from dlk8s.job.accelerators import inject_accelerators
from dlk8s.job.actions import Action, Create, DeleteJob, Event, delete_of
from dlk8s.job.api import (
    ANNOTATION_RESTART_COUNT,
    CleanPodPolicy,
    ConditionType,
    EventType,
    JobContext,
    Kind,
    Obj,
    Observed,
    Phase,
    Reason,
    RunPolicy,
    Slot,
    State,
    as_dict,
    as_int,
    as_str,
    dig,
    format_time,
    is_int,
    parse_time,
    run_policy,
    show,
    to_utc,
)
from dlk8s.job.children import (
    CONFIG_MAP,
    DEPLOYMENT,
    POD,
    SERVICE,
    controlled_by,
    headless_service,
    is_terminating,
    name_of,
    pod_for_slot,
    replica_key,
)
from dlk8s.job.config import ControllerConfig
from dlk8s.job.kinds import KINDS, lookup
from dlk8s.job.policy import (
    PENDING,
    Decision,
    PodOutcome,
    clean_conditions,
    clear_condition,
    decide,
    is_true,
    pod_outcome,
    pod_total,
    replica_status,
    restart_delay,
    set_condition,
)
from dlk8s.job.validation import metadata_problems, run_policy_problems

__all__ = ["Observed", "Result", "reconcile"]

_log = logging.getLogger(__name__)

_FINISHED_POD_PHASES: Final = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Result:
    actions: list[Action]
    status: Obj  # the complete desired .status
    requeue_after: float | None  # seconds until a timer needs another pass


def reconcile(job: Obj, observed: Observed, config: ControllerConfig, now: datetime) -> Result:
    """Any input gives a Result: a spec the kinds cannot use fails the job as
    InvalidSpec. An exception from here is a bug in dlk8s, never the user's;
    the controller retries it with back-off and reports it (event, metric)."""
    return _reconcile(as_dict(job), observed, config, to_utc(now))


@dataclass(frozen=True)
class _Job:
    """What every path needs to know about a job, read leniently."""

    raw: Obj
    kind: Kind | None
    name: str
    namespace: str
    uid: str
    generation: int | None
    policy: RunPolicy
    prev: Obj  # the status written last time
    conditions: list[Obj]
    now: datetime

    @property
    def stamp(self) -> str:
        return format_time(self.now)

    @property
    def runtime_id(self) -> str:
        return naming.runtime_id(self.uid)


def _read_job(raw: Obj, now: datetime) -> _Job:
    meta = as_dict(raw.get("metadata"))
    prev = as_dict(raw.get("status"))
    generation = meta.get("generation")
    if not is_int(generation) or generation < 0:
        generation = None
    return _Job(
        raw=raw,
        kind=lookup(raw.get("kind")),
        name=as_str(meta.get("name")),
        namespace=as_str(meta.get("namespace")),
        uid=as_str(meta.get("uid")),
        generation=generation,
        policy=run_policy(raw),
        prev=prev,
        conditions=clean_conditions(prev.get("conditions")),
        now=now,
    )


@dataclass(frozen=True)
class _Verdict:
    state: str
    reason: str
    message: str


def _reconcile(raw: Obj, observed: Observed, config: ControllerConfig, now: datetime) -> Result:
    job = _read_job(raw, now)
    if dig(raw, "metadata", "deletionTimestamp") is not None:
        return Result([], copy.deepcopy(job.prev), None)  # the garbage collector takes over
    owned = _owned(observed, job.uid)
    if _is_finished(job):
        return _finish(job, owned, None)
    problems = _problems(job)
    if problems or job.kind is None:
        return _finish(job, owned, _Verdict(State.FAILED, Reason.INVALID_SPEC, "; ".join(problems)))
    return _active(_context(job, job.kind, config), job, owned)


def _owned(observed: Observed, uid: str) -> Observed:
    def keep(items: Iterable[object] | None) -> tuple[Obj, ...]:
        return tuple(o for o in items or () if isinstance(o, dict) and controlled_by(o, uid))

    return Observed(
        pods=keep(getattr(observed, "pods", None)),
        services=keep(getattr(observed, "services", None)),
        configmaps=keep(getattr(observed, "configmaps", None)),
        deployments=keep(getattr(observed, "deployments", None)),
    )


def _is_finished(job: _Job) -> bool:
    return job.prev.get("state") in (State.SUCCEEDED, State.FAILED) or any(
        is_true(job.conditions, t) for t in (ConditionType.SUCCEEDED, ConditionType.FAILED)
    )


def _problems(job: _Job) -> list[str]:
    if job.kind is None:
        return [f"kind: {show(job.raw.get('kind'))} is not one of {', '.join(KINDS)}"]
    return metadata_problems(job.raw) + run_policy_problems(job.raw) + job.kind.validate(job.raw)


def _context(job: _Job, kind: Kind, config: ControllerConfig) -> JobContext:
    replicas = kind.replicas(job.raw)
    slots = tuple(
        Slot(replica, index, naming.pod_name(job.name, replica.role, index))
        for replica in replicas
        for index in range(replica.replicas)
    )
    return JobContext(
        job=job.raw,
        kind=kind,
        name=job.name,
        namespace=job.namespace,
        uid=job.uid,
        runtime_id=job.runtime_id,
        generation=job.generation,
        run_policy=job.policy,
        replicas=replicas,
        slots=slots,
        config=config,
        deciding_role=kind.deciding_role(replicas),
    )


# --- finished jobs -------------------------------------------------------------


def _finish(
    job: _Job, owned: Observed, verdict: _Verdict | None, restarts: int | None = None
) -> Result:
    status = _carried(job, _restart_count(job.prev, owned.pods) if restarts is None else restarts)
    conditions, actions = job.conditions, list[Action]()
    if verdict is not None:
        state, reason = verdict.state, verdict.reason
        status["completionTime"] = job.stamp
        conditions = _verdict_conditions(conditions, verdict, job.stamp)
        actions.append(
            Event(
                EventType.NORMAL if state == State.SUCCEEDED else EventType.WARNING,
                reason,
                verdict.message,
            )
        )
    else:
        state, reason = _finished_state(job)
        status["completionTime"] = _valid_time(job.prev.get("completionTime")) or job.stamp
    targets = _cleanup_targets(job, owned)
    why = f"the job has finished (cleanPodPolicy {job.policy.clean_pod_policy})"
    for obj, api_kind in targets:
        if not is_terminating(obj):
            actions += _delete(obj, api_kind, why)
    phase = Phase.CLEANUP if targets else (Phase.DONE if state == State.SUCCEEDED else Phase.FAILED)
    status |= {
        "state": state,
        "phase": phase,
        "reason": reason,
        "conditions": conditions,
        "replicaStatuses": _finished_replica_statuses(job, owned.pods),
    }
    ttl_actions, requeue = _ttl(job, status)
    return Result(actions + ttl_actions, status, requeue)


def _verdict_conditions(conditions: list[Obj], verdict: _Verdict, now: str) -> list[Obj]:
    type_ = ConditionType.SUCCEEDED if verdict.state == State.SUCCEEDED else ConditionType.FAILED
    conditions = set_condition(conditions, type_, True, verdict.reason, verdict.message, now)
    conditions = clear_condition(
        conditions, ConditionType.RUNNING, verdict.reason, "The job has finished", now
    )
    return clear_condition(
        conditions, ConditionType.RESTARTING, verdict.reason, "The job has finished", now
    )


def _finished_state(job: _Job) -> tuple[str, str]:
    state = job.prev.get("state")
    if state not in (State.SUCCEEDED, State.FAILED):
        state = (
            State.SUCCEEDED if is_true(job.conditions, ConditionType.SUCCEEDED) else State.FAILED
        )
    reason = job.prev.get("reason")
    return state, reason if isinstance(reason, str) and reason else state


def _cleanup_targets(job: _Job, owned: Observed) -> list[tuple[Obj, tuple[str, str]]]:
    """What cleanPodPolicy removes once the job has finished.

    Running: pods still pending or running, and every replica's Service
    (nothing is left to reach through them). All: every child, TensorBoard
    and ConfigMaps included. None: nothing. TensorBoard stays under Running
    and None: users look at the results after training; it goes with the job.
    """
    policy = job.policy.clean_pod_policy
    if policy == CleanPodPolicy.NONE:
        return []
    if policy == CleanPodPolicy.ALL:
        return (
            [(o, POD) for o in owned.pods]
            + [(o, SERVICE) for o in owned.services]
            + [(o, CONFIG_MAP) for o in owned.configmaps]
            + [(o, DEPLOYMENT) for o in owned.deployments]
        )
    roles = {role.lower() for role in job.kind.roles} if job.kind else set()
    pods = [(o, POD) for o in owned.pods if dig(o, "status", "phase") not in _FINISHED_POD_PHASES]
    return pods + [(o, SERVICE) for o in owned.services if (replica_key(o) or ("",))[0] in roles]


def _finished_replica_statuses(job: _Job, pods: Sequence[Obj]) -> list[Obj]:
    kind = job.kind
    if kind is None or _problems(job):
        return _replica_statuses_by_label(kind, pods)
    statuses = []
    for replica in kind.replicas(job.raw):
        mine = [p for p in pods if _in_replica(p, replica.role, replica.replicas)]
        statuses.append(
            replica_status(replica.role, replica.replicas, _outcomes(mine, kind.container))
        )
    return statuses


def _replica_statuses_by_label(kind: Kind | None, pods: Sequence[Obj]) -> list[Obj]:
    """For a job whose spec is unusable: group what exists by its labels."""
    known = {role.lower(): role for role in kind.roles} if kind else {}
    groups: dict[str, list[Obj]] = {}
    for pod in pods:
        key = replica_key(pod)
        if key is not None:
            groups.setdefault(known.get(key[0], key[0].upper()), []).append(pod)
    container = kind.container if kind else ""
    return [
        replica_status(role, len(group), _outcomes(group, container))
        for role, group in sorted(groups.items())
    ]


def _in_replica(pod: Obj, role: str, replicas: int) -> bool:
    key = replica_key(pod)
    return key is not None and key[0] == role.lower() and key[1] < replicas


def _ttl(job: _Job, status: Obj) -> tuple[list[Action], float | None]:
    ttl = job.policy.ttl_seconds_after_finished
    finished = parse_time(status.get("completionTime"))
    if ttl is None or finished is None:
        return [], None
    expiry = _later(finished, ttl)
    if job.now < expiry:
        return [], (expiry - job.now).total_seconds()
    message = (
        f"Deleting the job: it finished at {format_time(finished)}"
        f" and ttlSecondsAfterFinished is {ttl}"
    )
    return [Event(EventType.NORMAL, Reason.TTL_EXPIRED, message), DeleteJob()], None


# --- jobs that are not finished ------------------------------------------------


@dataclass(frozen=True)
class _SlotView:
    """One slot and the pod that fills it, if any."""

    slot: Slot
    pod: Obj | None
    outcome: PodOutcome | None
    decision: str

    @property
    def terminating(self) -> bool:
        return self.pod is not None and is_terminating(self.pod)

    @property
    def settled(self) -> bool:
        """Has a pod that needs nothing from us (pending, running or done)."""
        return self.pod is not None and not self.terminating and self.decision != Decision.RESTART

    @property
    def label(self) -> str:
        return f"{self.slot.role} {self.slot.index}"


def _active(ctx: JobContext, job: _Job, owned: Observed) -> Result:
    views, strays = _match_pods(ctx, owned.pods)
    restarts = _restart_count(job.prev, owned.pods)
    resuming = is_true(job.conditions, ConditionType.SUSPENDED) and bool(owned.pods)
    if ctx.run_policy.suspend or resuming:
        return _suspended(ctx, job, owned, views, restarts)
    problems = ctx.kind.preflight(ctx, owned)
    if problems:
        return _blocked(ctx, job, views, restarts, problems)
    lost = _lost_pods(ctx, job, views)
    verdict = _verdict(ctx, job, views, restarts, lost)
    if verdict is not None:
        return _finish(job, owned, verdict, restarts)
    actions, waits = _restarts(views, restarts, job.now)
    actions += _notices(job, restarts, lost)
    for pod in strays:
        if not is_terminating(pod):
            actions += _delete(pod, POD, "it matches no replica of the spec")
    creating = _missing_pods(views, owned.pods)
    actions += [a for v in creating for a in _create(_build_pod(ctx, v.slot, restarts + lost))]
    actions += _sync_children(ctx, owned)
    actions += ctx.kind.update_children(ctx, owned)
    deadline = _deadline_wait(ctx.run_policy, job)
    timers = waits if deadline is None else [*waits, deadline]
    requeue = min(timers) if timers else None
    status = _active_status(ctx, job, views, restarts + lost, lost, creating)
    return Result(actions, status, requeue)


def _notices(job: _Job, restarts: int, lost: int) -> list[Action]:
    notices: list[Action] = []
    if lost:
        message = f"Recreating {lost} pod(s) deleted or lost (restarts: {restarts + lost})"
        notices.append(Event(EventType.WARNING, Reason.RECREATING, message))
    if is_true(job.conditions, ConditionType.SUSPENDED):
        notices.append(
            Event(EventType.NORMAL, Reason.RESUMED, "Resuming the job: creating its pods")
        )
    return notices


def _match_pods(ctx: JobContext, pods: Sequence[Obj]) -> tuple[list[_SlotView], list[Obj]]:
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


def _view(ctx: JobContext, slot: Slot, pod: Obj | None) -> _SlotView:
    if pod is None:
        return _SlotView(slot, None, None, Decision.NONE)
    outcome = pod_outcome(pod, ctx.kind.container)
    deciding = slot.role == ctx.deciding_role
    return _SlotView(slot, pod, outcome, decide(outcome, slot.replica.restart_policy, deciding))


def _restart_count(prev: Obj, pods: Sequence[Obj]) -> int:
    counts = [max(0, as_int(prev.get("restartCount"), 0))]
    for pod in pods:
        value = dig(pod, "metadata", "annotations", ANNOTATION_RESTART_COUNT)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
            counts.append(int(value))
    return max(counts)


def _lost_pods(ctx: JobContext, job: _Job, views: Sequence[_SlotView]) -> int:
    """Pods gone since the previous status counted them (see the module doc)."""
    if job.prev.get("observedGeneration") != ctx.generation or is_true(
        job.conditions, ConditionType.SUSPENDED
    ):
        return 0
    lost = 0
    for replica in ctx.replicas:
        present = sum(1 for v in views if v.slot.replica is replica and v.pod is not None)
        # Capped at today's count: pods removed by scaling down are not lost.
        counted = min(pod_total(job.prev.get("replicaStatuses"), replica.role), replica.replicas)
        lost += max(0, counted - present)
    return lost


def _verdict(
    ctx: JobContext, job: _Job, views: Sequence[_SlotView], restarts: int, lost: int
) -> _Verdict | None:
    deciders = _deciders(ctx, views)
    if deciders and all(v.decision == Decision.SUCCEED_JOB for v in deciders):
        last = max(deciders, key=_finish_order)
        what = last.label if len(deciders) == 1 else f"all {len(deciders)} {last.slot.role} pods"
        return _Verdict(State.SUCCEEDED, Reason.SUCCEEDED, f"{what} succeeded: {_detail(last)}")
    for view in views:
        if view.decision == Decision.FAIL_JOB:
            return _Verdict(
                State.FAILED, Reason.REPLICA_FAILED, f"{view.label} failed: {_detail(view)}"
            )
    deadline = ctx.run_policy.active_deadline_seconds
    if deadline is not None and _deadline_wait(ctx.run_policy, job) == 0:
        message = f"The job has been active longer than activeDeadlineSeconds ({deadline}s)"
        return _Verdict(State.FAILED, Reason.DEADLINE_EXCEEDED, message)
    limit = ctx.run_policy.backoff_limit
    needed = lost + sum(1 for v in views if v.decision == Decision.RESTART)
    if limit is not None and needed and restarts + needed > limit:
        message = (
            f"{needed} more pod restart(s) needed after {restarts}, but backoffLimit is {limit}"
        )
        return _Verdict(State.FAILED, Reason.BACKOFF_LIMIT_EXCEEDED, message)
    return None


def _deciders(ctx: JobContext, views: Sequence[_SlotView]) -> list[_SlotView]:
    return [v for v in views if v.slot.role == ctx.deciding_role]


def _finish_order(view: _SlotView) -> tuple[datetime, int]:
    finished = view.outcome.finished_at if view.outcome else None
    return (finished or datetime.min.replace(tzinfo=UTC), view.slot.index)


def _detail(view: _SlotView) -> str:
    return view.outcome.detail if view.outcome else "no pod"


def _deadline_wait(policy: RunPolicy, job: _Job) -> float | None:
    """Seconds until activeDeadlineSeconds runs out (0 once it has)."""
    if policy.active_deadline_seconds is None:
        return None
    start = parse_time(job.prev.get("startTime")) or job.now
    left = (_later(start, policy.active_deadline_seconds) - job.now).total_seconds()
    return max(0.0, left)


def _restarts(
    views: Sequence[_SlotView], restarts: int, now: datetime
) -> tuple[list[Action], list[float]]:
    """Delete pods to be restarted once their back-off has passed; their
    replacements are created when the deletion has been observed."""
    actions: list[Action] = []
    waits: list[float] = []
    for view in views:
        if view.decision != Decision.RESTART or view.terminating or view.pod is None:
            continue
        finished = view.outcome.finished_at if view.outcome else None
        due = _later(finished, restart_delay(restarts)) if finished else now
        if due > now:
            waits.append((due - now).total_seconds())
            continue
        message = f"Restarting {view.label}: {_detail(view)}; deleting pod {view.slot.name}"
        actions += [delete_of(view.pod, *POD), Event(EventType.WARNING, Reason.RESTARTING, message)]
    return actions, waits


def _missing_pods(views: Sequence[_SlotView], pods: Sequence[Obj]) -> list[_SlotView]:
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
                actions += _create(headless_service(ctx, slot, port_name))
    for obj in extras:
        if (obj["kind"], obj["metadata"]["name"]) not in have:
            actions += _create(obj)
    for obj, api_kind in existing:
        if (api_kind[1], name_of(obj)) not in want and not is_terminating(obj):
            actions += _delete(obj, api_kind, "the spec no longer asks for it")
    return actions


def _active_status(
    ctx: JobContext,
    job: _Job,
    views: Sequence[_SlotView],
    restarts: int,
    lost: int,
    creating: Sequence[_SlotView],
) -> Obj:
    now = job.stamp
    deciders = _deciders(ctx, views)
    running = all(v.settled for v in views) and bool(deciders) and all(map(_is_up, deciders))
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
    return _carried(job, restarts) | {
        "startTime": _valid_time(job.prev.get("startTime")) or now,
        "state": State.RUNNING,
        "phase": Phase.RUNNING if running else Phase.CREATING,
        "reason": Reason.RUNNING if running else waiting,
        "conditions": conditions,
        "replicaStatuses": _replica_statuses(ctx, views, creating),
    }


def _is_up(view: _SlotView) -> bool:
    """Running, or already done (a decider that waits for its peers)."""
    return view.outcome is not None and view.outcome.phase in ("Running", "Succeeded")


def _suspended(
    ctx: JobContext, job: _Job, owned: Observed, views: Sequence[_SlotView], restarts: int
) -> Result:
    """Suspended, or resumed while the suspension's pods are still going away."""
    actions: list[Action] = []
    if not is_true(job.conditions, ConditionType.SUSPENDED):
        actions.append(
            Event(EventType.NORMAL, Reason.SUSPENDED, "Suspending the job: deleting its pods")
        )
    for pod in owned.pods:
        if not is_terminating(pod):
            actions += _delete(pod, POD, "the job is suspended")
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
    status = _carried(job, restarts) | {
        "state": State.RUNNING,
        "phase": Phase.CREATING,
        "reason": Reason.SUSPENDED,
        "conditions": conditions,
        "replicaStatuses": _replica_statuses(ctx, views),
    }
    status.pop("startTime", None)
    return Result(actions, status, None)


def _blocked(
    ctx: JobContext, job: _Job, views: Sequence[_SlotView], restarts: int, problems: list[str]
) -> Result:
    """The operator's own configuration stops it from building the job: say
    so once and wait, without failing a job that is not at fault."""
    message = "; ".join(problems)
    actions: list[Action] = []
    if job.prev.get("reason") != Reason.CONFIG_ERROR:
        actions.append(Event(EventType.WARNING, Reason.CONFIG_ERROR, message))
    phase = job.prev.get("phase")
    status = _carried(job, restarts) | {
        "state": State.RUNNING,
        "phase": phase if phase in (Phase.CREATING, Phase.RUNNING) else Phase.CREATING,
        "reason": Reason.CONFIG_ERROR,
        "conditions": job.conditions,
        "replicaStatuses": _replica_statuses(ctx, views),
    }
    return Result(actions, status, None)


def _replica_statuses(
    ctx: JobContext, views: Sequence[_SlotView], creating: Sequence[_SlotView] = ()
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


# --- small helpers -----------------------------------------------------------------


def _carried(job: _Job, restarts: int) -> Obj:
    """The status fields every path keeps."""
    status: Obj = {"runtimeId": job.runtime_id, "restartCount": restarts}
    if job.generation is not None:
        status["observedGeneration"] = job.generation
    start = _valid_time(job.prev.get("startTime"))
    if start:
        status["startTime"] = start
    if job.kind is not None:
        status |= job.kind.status_fields(job.raw, job.prev, job.stamp)
    return status


def _outcomes(pods: Iterable[Obj], container: str) -> list[PodOutcome]:
    return [pod_outcome(pod, container) for pod in pods]


def _create(obj: Obj) -> list[Action]:
    what = f"{obj['kind'].lower()} {obj['metadata']['name']}"
    return [Create(obj), Event(EventType.NORMAL, Reason.CREATE, f"Created {what}")]


def _delete(obj: Obj, api_kind: tuple[str, str], why: str) -> list[Action]:
    delete = delete_of(obj, *api_kind)
    message = f"Deleted {api_kind[1].lower()} {delete.name}: {why}"
    return [delete, Event(EventType.NORMAL, Reason.DELETE, message)]


def _later(moment: datetime, seconds: float) -> datetime:
    """moment + seconds, saturating: a timer beyond year 9999 never fires."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def _valid_time(value: object) -> str | None:
    return value if isinstance(value, str) and parse_time(value) is not None else None
