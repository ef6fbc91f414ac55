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
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dlk8s.job.actions import Action, Event, delete_of
from dlk8s.job.api import (
    ANNOTATION_RESTART_COUNT,
    ConditionType,
    EventType,
    JobContext,
    Obj,
    Reason,
    as_int,
    dig,
)
from dlk8s.job.children import POD
from dlk8s.job.policy import Decision, is_true, pod_total, restart_delay
from dlk8s.job.reconcile.view import JobView, SlotView, detail, later


def restart_count(prev: Obj, pods: Sequence[Obj]) -> int:
    counts = [max(0, as_int(prev.get("restartCount"), 0))]
    for pod in pods:
        value = dig(pod, "metadata", "annotations", ANNOTATION_RESTART_COUNT)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
            counts.append(int(value))
    return max(counts)


def lost_pods(ctx: JobContext, job: JobView, views: Sequence[SlotView]) -> int:
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


def restart_actions(
    views: Sequence[SlotView], restarts: int, now: datetime
) -> tuple[list[Action], list[float]]:
    """Delete pods to be restarted once their back-off has passed; their
    replacements are created when the deletion has been observed."""
    actions: list[Action] = []
    waits: list[float] = []
    for view in views:
        if view.decision != Decision.RESTART or view.terminating or view.pod is None:
            continue
        finished = view.outcome.finished_at if view.outcome else None
        due = later(finished, restart_delay(restarts)) if finished else now
        if due > now:
            waits.append((due - now).total_seconds())
            continue
        message = f"Restarting {view.label}: {detail(view)}; deleting pod {view.slot.name}"
        actions.append(
            delete_of(view.pod, *POD, Event(EventType.WARNING, Reason.RESTARTING, message))
        )
    return actions, waits
