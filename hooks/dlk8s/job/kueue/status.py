"""The status edits Kueue leaves to an integration that creates its own
Workloads (KUEUE.md's pitfalls): the reservation cleared after an
eviction so that the quota frees, PodsReady as the pods run, Finished
once the job is done."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime

from dlk8s.job.jobmodel import ChildView
from dlk8s.job.kueue.workload import (
    ADMITTED,
    EVICTED,
    FINISHED,
    MAX_MESSAGE,
    PODS_READY,
    QUOTA_RESERVED,
    REQUEUED,
    REQUEUED_AT_ONCE,
    WorkloadView,
    read_workload,
)
from dlk8s.job.objects import Obj, as_list, dig, is_int, parse_time


def workload_condition(
    conditions: list[Obj],
    type_: str,
    value: bool,
    edit: tuple[str, str, str, object],
) -> list[Obj]:
    """metav1's SetStatusCondition on a Workload's conditions, with the
    contract of conditions.set_condition: a new list with `type_` set, the
    same list when it says so already; the transition time moves only when
    the status flips. `edit` is (reason, message, now, observed generation)."""
    reason, message, now, generation = edit
    old = next((c for c in conditions if c.get("type") == type_), None)
    text = "True" if value else "False"
    new: Obj = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "lastTransitionTime": now
        if old is None or old.get("status") != text
        else old.get("lastTransitionTime", now),
    }
    if is_int(generation):
        new["observedGeneration"] = generation
    if old is not None and all(old.get(k) == v for k, v in new.items()):
        return conditions
    return [new if c is old else c for c in conditions] + ([] if old else [new])


def _set(status: Obj, type_: str, value: bool, edit: tuple[str, str, str, object]) -> bool:
    """`status` given the condition in place (the copy its caller made);
    whether anything changed."""
    conditions = [c for c in as_list(status.get("conditions")) if isinstance(c, dict)]
    edited = workload_condition(conditions, type_, value, edit)
    if edited is conditions:
        return False
    status["conditions"] = edited
    return True


def released(workload: WorkloadView, now: datetime, stamp: str) -> Obj:
    """The Workload after its evicted job's pods are gone: the quota given
    back and the Workload queued again (or held, for reasons Kueue itself
    requeues later), as jobframework does (KUEUE.md §4)."""
    obj = copy.deepcopy(workload.obj)
    status = obj.setdefault("status", {})
    generation = dig(obj, "metadata", "generation")
    reason, message = workload.reason(EVICTED), workload.message(EVICTED)
    requeue = reason in REQUEUED_AT_ONCE
    _set(status, REQUEUED, requeue, (reason or "Evicted", message, stamp, generation))
    _set(status, QUOTA_RESERVED, False, ("Pending", message, stamp, generation))
    status.pop("admission", None)
    if workload.true(ADMITTED):
        since = parse_time(workload.conditions[ADMITTED].get("lastTransitionTime"))
        ran = int((now - since).total_seconds()) if since else 0
        past = status.get("accumulatedPastExecutionTimeSeconds")
        status["accumulatedPastExecutionTimeSeconds"] = (past if is_int(past) else 0) + max(0, ran)
    no_reservation = ("NoReservation", "The workload has no reservation", stamp, generation)
    _set(status, ADMITTED, False, no_reservation)
    return obj


def pods_ready(workload: WorkloadView, ready: bool, stamp: str) -> Obj | None:
    """The Workload with PodsReady as jobframework keeps it: True once every
    pod runs (or is done), False before (WaitForStart) and after one went
    (WaitForRecovery); None when it says so already."""
    if ready:
        edit = (PODS_READY, True, "Started", "All pods are running or done")
    elif workload.true(PODS_READY) or workload.reason(PODS_READY) == "WaitForRecovery":
        edit = (PODS_READY, False, "WaitForRecovery", "A pod is being recreated")
    else:
        edit = (PODS_READY, False, "WaitForStart", "Not all pods are running yet")
    return with_conditions(workload, [edit], stamp)


def with_conditions(
    workload: WorkloadView, edits: Sequence[tuple[str, bool, str, str]], stamp: str
) -> Obj | None:
    """The Workload with these (type, status, reason, message) conditions
    set; None when it has them already."""
    obj = copy.deepcopy(workload.obj)
    status = obj.setdefault("status", {})
    generation = dig(obj, "metadata", "generation")
    changed = False
    for type_, value, reason, message in edits:
        changed = _set(status, type_, value, (reason, message, stamp, generation)) or changed
    return obj if changed else None


def finished(
    workloads: Sequence[ChildView], succeeded: bool, message: str, stamp: str
) -> list[Obj]:
    """A finished job's Workloads marked Finished: the quota they hold
    frees at once, before the cleanup or the TTL."""
    reason = "Succeeded" if succeeded else "Failed"
    edited = []
    for child in workloads:
        workload = read_workload(child)
        if workload.terminating or workload.true(FINISHED):
            continue
        update = with_conditions(workload, [(FINISHED, True, reason, message)], stamp)
        if update is not None:
            edited.append(update)
    return edited
