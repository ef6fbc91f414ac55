"""Whether an active job ends in this pass, and how (docs/kinds.md, "What ends a job").

In this order:
- for a kind whose deciding pods end as one group (PyTorchJob's WORKERs
  without a MASTER), those that failed after one of them had succeeded, or
  up to GROUP_SETTLE_SECONDS before, came to a group as it finished and
  are left out of what follows; a failure while others of the group still
  run waits that long for them first;
- the deciding replica has succeeded: the success policy says what that
  is, once the others' ends have had SETTLE_SECONDS to be reported (so
  that a failure names every replica that failed, too). NoFailedReplicas
  (the default): Succeeded, unless a replica failed for good and no pod of
  it has succeeded since (status.failedReplicas): then Failed, reason
  OtherReplicasFailed, naming them. DecidingReplica
  (the seeds' rule): Succeeded, whatever the others did. AllWorkers: as
  the default once every WORKER has succeeded too; until then the job
  runs on;
- a pod judged FailJob (podFailurePolicy, its defaults included): Failed,
  reason PodFailurePolicy for a rule of the job's, else ReplicaFailed;
- activeDeadlineSeconds run out: DeadlineExceeded;
- the restarts this pass needs would pass backoffLimit: BackoffLimitExceeded.
The reason's message names the pods and their exit codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from dlk8s.job.jobmodel import JobContext, JobView
from dlk8s.job.objects import Obj, as_dict, later
from dlk8s.job.outcomes import RUNNING, SUCCEEDED, Decision
from dlk8s.job.reconcile.slots import SlotView
from dlk8s.job.reconcile.view import Verdict
from dlk8s.job.vocabulary import Reason, State, SuccessPolicy

# The role successPolicy AllWorkers waits for (Kubeflow's name for it).
WORKER: Final = "WORKER"
# How long after the latest end of a pod of the job, once the deciding
# replica has succeeded, the job waits for the other pods still reported
# running: each kubelet reports each pod's end on its own, and workers
# whose crash made their scheduler end (MXNet's kvstore shuts down cleanly
# after its workers crash, the scheduler exits 0, and the workers' own exits
# come a second later, seen on the real node) are reported after it. The
# seeds' rule waits too: its verdict does not depend on the others, but its
# message names those that failed, and must not miss one that is merely
# reported late.
SETTLE_SECONDS: Final = 5.0
# How long a failed deciding pod of a group-ending kind waits for the rest
# of its group, while any of it still runs, and how long before the group's
# first success a failure still counts as coming to a finishing group: an
# agent started as the group finishes (an elastic job grown at its very
# end) finds the rendezvous closing and exits 1 a moment before the others'
# successes are reported (seen on the real node under load: the newcomer's
# exit recorded first, the others' 0 after it). A member that really
# crashed leaves its job Failed this much later.
GROUP_SETTLE_SECONDS: Final = 15.0
# A message names this many failed replicas at most, then counts the rest.
NAMED: Final = 10


def verdict(
    ctx: JobContext, views: Sequence[SlotView], lost: int, failed: Sequence[Obj]
) -> tuple[Verdict | None, list[float]]:
    """The job's outcome if this pass decides it (see the module docstring),
    and the timers that need another pass while it runs on: seconds until
    activeDeadlineSeconds runs out, and until the ends of its other pods
    have had their time to be reported."""
    left, settling = deadline_wait(ctx.job), settle_wait(ctx, views)
    holding = group_wait(ctx, views)
    timers = [t for t in (left, settling or None, holding or None) if t is not None]
    return _decide(ctx, views, lost, failed, left, settling, holding), timers


def _decide(
    ctx: JobContext,
    views: Sequence[SlotView],
    lost: int,
    failed: Sequence[Obj],
    left: float | None,
    settling: float,
    holding: float,
) -> Verdict | None:
    job = ctx.job
    deciders = [v for v in views if v.slot.role == ctx.deciding_role]
    late = late_to_the_group(ctx, deciders)
    if late:
        views = [v for v in views if all(v is not x for x in late)]
        deciders = [v for v in deciders if all(v is not x for x in late)]
        failed = [e for e in failed if not _names_one_of(e, late)]
    if deciders and all(v.decision == Decision.SUCCEED_JOB for v in deciders):
        success = _success(job, views, deciders, failed)
        if success is not None and not settling:
            return _with_late(success, late)
    for view in views:
        if view.decision == Decision.FAIL_JOB:
            if holding and view.slot.role == ctx.deciding_role:
                continue  # its group may yet finish (group_wait)
            return _failure(view)
    deadline = job.policy.active_deadline_seconds
    if deadline is not None and left == 0:
        message = f"The job has been active longer than activeDeadlineSeconds ({deadline}s)"
        return Verdict(State.FAILED, Reason.DEADLINE_EXCEEDED, message)
    limit, restarts = job.policy.backoff_limit, job.restarts
    retried = [v for v in views if v.decision == Decision.RESTART]
    needed = lost + len(retried)
    if needed and restarts + needed > limit:
        message = (
            f"{needed} more pod restart(s) needed after {restarts}, but backoffLimit is {limit}"
        )
        # Who failed, first: the job's status is where a user looks.
        failures = "; ".join(_failure(v).message for v in retried)
        message = f"{failures}; {message}" if failures else message
        return Verdict(State.FAILED, Reason.BACKOFF_LIMIT_EXCEEDED, message)
    return None


def _success(
    job: JobView, views: Sequence[SlotView], deciders: list[SlotView], failed: Sequence[Obj]
) -> Verdict | None:
    """What the deciding replica's success makes of the job; None: it waits."""
    last = max(deciders, key=_finish_order)
    what = last.label if len(deciders) == 1 else f"all {len(deciders)} {last.slot.role} pods"
    policy = job.policy.success_policy
    if policy == SuccessPolicy.DECIDING_REPLICA:
        ignored = f" (successPolicy DecidingReplica; failed: {listing(failed)})" if failed else ""
        return Verdict(
            State.SUCCEEDED, Reason.SUCCEEDED, f"{what} succeeded: {last.detail}{ignored}"
        )
    if policy == SuccessPolicy.ALL_WORKERS:
        workers = [v for v in views if v.slot.role == WORKER != last.slot.role]
        if any(v.outcome is None or v.outcome.phase != SUCCEEDED for v in workers):
            return None
        if workers:
            what += f" and all {len(workers)} {WORKER} pods"
    if failed:
        message = (
            f"{what} succeeded, but {len(failed)} other replica(s) failed for good"
            f" and no pod of theirs has succeeded since: {listing(failed)}"
        )
        return Verdict(State.FAILED, Reason.OTHER_REPLICAS_FAILED, message)
    return Verdict(State.SUCCEEDED, Reason.SUCCEEDED, f"{what} succeeded: {last.detail}")


def late_to_the_group(ctx: JobContext, deciders: Sequence[SlotView]) -> list[SlotView]:
    """Deciding pods of a kind whose deciders end as one group that failed
    (for good, or to be recreated) after one of them had succeeded, or at
    most GROUP_SETTLE_SECONDS before: an elastic job grown at its very end
    starts an agent that finds the rendezvous closing, or its host gone,
    and exits 1."""
    if not ctx.kind.ends_as_group:
        return []
    done = [
        v.outcome.finished_at
        for v in deciders
        if v.decision == Decision.SUCCEED_JOB and v.outcome and v.outcome.finished_at
    ]
    if not done:
        return []
    first = later(min(done), -GROUP_SETTLE_SECONDS)
    return [
        v
        for v in deciders
        if v.decision in (Decision.FAIL_JOB, Decision.RESTART)
        and v.outcome is not None
        and v.outcome.finished_at is not None
        and v.outcome.finished_at >= first
    ]


def _names_one_of(entry: Obj, views: Sequence[SlotView]) -> bool:
    """A status.failedReplicas entry is about one of these pods' slots."""
    found = as_dict(entry)
    return any(
        found.get("replicaType") == v.slot.role and found.get("index") == v.slot.index
        for v in views
    )


def _with_late(verdict: Verdict, late: Sequence[SlotView]) -> Verdict:
    if not late or verdict.state != State.SUCCEEDED:
        return verdict
    named = ", ".join(f"{v.label} (pod {v.pod_name}, {v.detail})" for v in late[:NAMED])
    more = f" and {len(late) - NAMED} more" if len(late) > NAMED else ""
    message = f"{verdict.message}; not counted, as they ended as the group finished: {named}{more}"
    return Verdict(verdict.state, verdict.reason, message)


def settle_wait(ctx: JobContext, views: Sequence[SlotView]) -> float:
    """Seconds the job still gives the ends of its other pods to be reported
    after its deciding replica succeeded: SETTLE_SECONDS after the latest
    end of any of its pods (0: none, or nothing to wait for)."""
    job = ctx.job
    deciders = [v for v in views if v.slot.role == ctx.deciding_role]
    if not deciders:
        return 0.0
    if not all(v.decision == Decision.SUCCEED_JOB for v in deciders):
        return 0.0
    others = [v for v in views if v.slot.role != ctx.deciding_role]
    if not any(v.outcome is not None and v.outcome.phase == RUNNING for v in others):
        return 0.0
    if not any(v.outcome and v.outcome.finished_at for v in deciders):
        return 0.0
    # From the last end reported, not the deciding one's: the crashes that
    # ended it come together, and each report reaching us restarts the
    # wait for those still to come (run 31: a SCHEDULER reported 2.4 s late,
    # one WORKER 2 s after it, the other not before the window closed).
    ended = [v.outcome.finished_at for v in views if v.outcome and v.outcome.finished_at]
    return max(0.0, (later(max(ended), SETTLE_SECONDS) - job.now).total_seconds())


def group_wait(ctx: JobContext, views: Sequence[SlotView]) -> float:
    """Seconds a failed deciding pod of a group-ending kind still waits for
    the others of its group that run (0: nothing to wait for)."""
    if not ctx.kind.ends_as_group:
        return 0.0
    deciders = [v for v in views if v.slot.role == ctx.deciding_role]
    if not any(v.outcome is not None and v.outcome.phase == RUNNING for v in deciders):
        return 0.0
    failed = [
        v.outcome.finished_at
        for v in deciders
        if v.decision == Decision.FAIL_JOB and v.outcome and v.outcome.finished_at
    ]
    if not failed:
        return 0.0
    until = later(min(failed), GROUP_SETTLE_SECONDS)
    return max(0.0, (until - ctx.job.now).total_seconds())


def listing(failed: Sequence[Obj]) -> str:
    """The failed replicas as a message names them: role, index, pod and exit code."""
    named = [
        f"{e.get('replicaType')} {e.get('index')}"
        f" (pod {e.get('pod')}, exit code {e.get('exitCode')})"
        for e in map(as_dict, failed[:NAMED])
    ]
    more = f" and {len(failed) - NAMED} more" if len(failed) > NAMED else ""
    return ", ".join(named) + more


def _failure(view: SlotView) -> Verdict:
    judgement = view.judgement
    what = judgement.what if judgement is not None else view.detail
    who = f"{view.label} (pod {view.pod_name})"
    if judgement is not None and judgement.rule is not None:
        message = f"{who} failed: {what}, matching {judgement.why}"
        return Verdict(State.FAILED, Reason.POD_FAILURE_POLICY, message)
    return Verdict(State.FAILED, Reason.REPLICA_FAILED, f"{who} failed: {what}")


def _finish_order(view: SlotView) -> tuple[datetime, int]:
    finished = view.outcome.finished_at if view.outcome else None
    return (finished or datetime.min.replace(tzinfo=UTC), view.slot.index)


def deadline_wait(job: JobView) -> float | None:
    """Seconds until activeDeadlineSeconds runs out (0 once it has)."""
    if job.deadline is None:
        return None
    return max(0.0, (job.deadline - job.now).total_seconds())
