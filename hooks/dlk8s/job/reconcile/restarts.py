"""Restart accounting, without state beyond the status we already write.

A restart is counted when a pod of the job is gone, i.e. when a role has
fewer pods than the previous status counted (replicaStatuses, same
generation, not just after a suspension). A failed pod is first deleted
(nothing counted), and counted on the pass that sees it gone, which is also
the pass that creates its replacement. The pods a pass creates are counted in
the status it writes (as Pending), so a replacement seen by the next pass
cannot stand in for another pod that vanished meanwhile. Counting from the
difference with the previous status makes it idempotent: a pass repeated on
the same world, or a failed status write, counts the same pods again rather
than more pods (the controller's expectations keep a pass from running
before the caches show the creates of the last one). Each new pod carries
the job's restart count in the annotation dlk8s.io/restart-count, and the
count is never below the highest of those: if the operator dies after
creating a replacement but before writing the status, the count is
recovered from the pod instead of being lost.

A pod that goes without counting (disrupted, or forgiven by an Ignore rule
of podFailurePolicy) is left out of the counts of every status written
while a pass sees it, so its disappearance counts nothing; one that
vanished before a pass saw it is excused by its tombstone, once
(endings.py). Either way its uid is in status.uncountedRestarts, and a pod
listed there is not taken for one the last status counted. What an
operator restart loses: the tombstones. A pod evicted and gone while no
operator ran, or in the moment between its last pass and the restart, is
counted as lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from dlk8s.job.actions import Action, Event, delete_of
from dlk8s.job.children import POD
from dlk8s.job.failurepolicy import pod_conditions
from dlk8s.job.jobmodel import JobContext
from dlk8s.job.objects import later, parse_time
from dlk8s.job.outcomes import Decision, restart_delay
from dlk8s.job.reconcile.endings import Memory
from dlk8s.job.reconcile.slots import SlotView
from dlk8s.job.vocabulary import DISRUPTION_TARGET, ConditionType, EventType, Reason


def lost_pods(ctx: JobContext, views: Sequence[SlotView], memory: Memory) -> int:
    """Pods gone since the previous status counted them (see the module doc)."""
    job = ctx.job
    if (
        job.prev.get("observedGeneration") != job.generation
        or ConditionType.SUSPENDED in job.true_conditions
        or ConditionType.QUEUED in job.true_conditions
    ):
        return 0
    lost = 0
    for replica in ctx.replicas:
        present = sum(
            1
            for v in views
            if v.slot.replica is replica and v.pod is not None and v.uid not in memory.recorded
        )
        # Capped at today's count: pods removed by scaling down are not lost.
        counted = min(job.counted.get(replica.role, 0), replica.replicas)
        lost += max(0, counted - present - memory.excused.get(replica.role, 0))
    return lost


# Pods deleted to be recreated, counting a restart or not.
_RECREATED = (Decision.RESTART, Decision.REPLACE)
# Disruptions whose disruptor deletes the pod itself, by name: the taint
# manager (NoExecute), the Eviction API, kube-scheduler's preemption, the pod
# garbage collector. Were the operator to delete the pod first and create its
# replacement under the same name, the disruptor's own delete (the taint
# manager's has no UID precondition) could take the replacement, which would
# then count as a lost restart: `make chaos` saw it. So the operator leaves
# such a pod to its disruptor, and deletes it itself only after this grace.
DELETED_BY_DISRUPTOR: Final = frozenset(
    {"DeletionByTaintManager", "EvictionByEvictionAPI", "PreemptionByScheduler", "DeletionByPodGC"}
)
DISRUPTOR_GRACE: Final = 15.0


def restart_actions(
    views: Sequence[SlotView], restarts: int, now: datetime
) -> tuple[list[Action], list[float]]:
    """Delete pods to be restarted once their back-off has passed; their
    replacements are created when the deletion has been observed."""
    actions: list[Action] = []
    waits: list[float] = []
    for view in views:
        if view.decision not in _RECREATED or view.terminating or view.pod is None:
            continue
        finished = view.outcome.finished_at if view.outcome else None
        due = later(finished, restart_delay(restarts)) if finished else now
        if view.decision == Decision.REPLACE:
            due = max(due, _disruptor_due(view, now))
        if due > now:
            waits.append((due - now).total_seconds())
            continue
        counted = view.decision == Decision.RESTART
        what = "Restarting" if counted else "Recreating, without counting a restart,"
        message = f"{what} {view.label}: {view.detail}; deleting pod {view.pod_name}"
        reason = Reason.RESTARTING if counted else Reason.RECREATING
        actions.append(delete_of(view.pod.obj, *POD, Event(EventType.WARNING, reason, message)))
    return actions, waits


def _disruptor_due(view: SlotView, now: datetime) -> datetime:
    """When the operator may delete a disrupted pod itself: now, unless its
    disruptor deletes it (then DISRUPTOR_GRACE after it was disrupted)."""
    judgement, pod = view.judgement, view.pod
    if judgement is None or judgement.disruption is None or pod is None:
        return now
    if judgement.disruption[0] not in DELETED_BY_DISRUPTOR:
        return now
    for condition in pod_conditions(pod.obj):
        if condition.get("type") == DISRUPTION_TARGET:
            since = parse_time(condition.get("lastTransitionTime"))
            return later(since, DISRUPTOR_GRACE) if since else now
    return now
