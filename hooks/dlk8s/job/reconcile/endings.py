"""What the status remembers of how pods ended, across passes and operator restarts.

- status.failedReplicas: the replicas whose pod failed for good (its main
  container exited 1-127 under a Count or FailJob rule), one entry per
  replica, until a pod of that replica succeeds. A failed pod is deleted
  and recreated, so only the status can tell the success policy later
  that it failed.
- status.uncountedRestarts: the pods recreated without counting a restart
  (disrupted, or forgiven by an Ignore rule), each by its uid, with why.
  Such a pod is left out of replicaStatuses while a pass sees it, so its
  disappearance counts nothing (restarts.py); one that vanished before any
  pass saw it is excused from the count here, once, when the runtime's
  tombstone shows it disrupted or forgiven (its uid then goes in the list,
  so the same pod is never excused twice). The entries of pods since
  replaced are kept as history, the last HISTORY of them.

Both are rebuilt by every pass of an active job from the list written
last time and the pods as they are: a pass repeated on the same world
writes the same lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from dlk8s.job.actions import Action, Event
from dlk8s.job.failurepolicy import Judgement
from dlk8s.job.jobmodel import JobContext
from dlk8s.job.objects import Obj, as_dict, as_list, is_int
from dlk8s.job.outcomes import SUCCEEDED, Decision
from dlk8s.job.reconcile.slots import SlotView
from dlk8s.job.vocabulary import EventType, Reason

FAILED_REPLICAS: Final = "failedReplicas"
UNCOUNTED_RESTARTS: Final = "uncountedRestarts"
# Entries of pods since replaced that uncountedRestarts keeps, the latest.
HISTORY: Final = 10
# At most this many replicas are remembered as failed: the status of a job
# of thousands of crashing replicas must stay far below etcd's object limit.
MAX_FAILED: Final = 1000


@dataclass(frozen=True)
class Memory:
    """What a pass remembers, and what remembering it changes."""

    fields: Obj  # the status's failedReplicas and uncountedRestarts (absent when empty)
    failed: list[Obj]  # failedReplicas, in slot order
    recorded: frozenset[str]  # uids the last status listed: left out of its counts
    excused: Mapping[str, int]  # per role, pods gone that the last status counted, forgiven
    events: list[Action]  # one per pod newly recreated without counting


def remember(ctx: JobContext, views: Sequence[SlotView]) -> Memory:
    """The memory this pass writes (see the module docstring)."""
    failed = _failed_replicas(ctx, views)
    previous = [e for e in as_list(ctx.job.prev.get(UNCOUNTED_RESTARTS)) if _uid(e)]
    recorded = frozenset(_uid(e) for e in previous)
    fresh: list[Obj] = []
    events: list[Action] = []
    excused: dict[str, int] = {}
    for view in views:
        judgement = view.judgement
        # A pod listed already was left out of the last counts, or excused.
        if view.decision != Decision.REPLACE or judgement is None or view.uid in recorded:
            continue
        if not view.uid:  # never listed, so never excused for good: not at all
            continue
        fresh.append(_uncounted(view, judgement, ctx.job.stamp))
        events.append(_event(view, judgement))
        if view.pod is None:
            excused[view.slot.role] = excused.get(view.slot.role, 0) + 1
    uncounted = _keep(previous + fresh, views)
    fields = {FAILED_REPLICAS: failed, UNCOUNTED_RESTARTS: uncounted}
    present = {k: v for k, v in fields.items() if v}
    return Memory(present, failed, recorded, excused, events)


def _uid(entry: object) -> str:
    uid = as_dict(entry).get("uid")
    return uid if isinstance(uid, str) else ""


def _failed_replicas(ctx: JobContext, views: Sequence[SlotView]) -> list[Obj]:
    """The last list, less the replicas whose pod has succeeded since, plus
    those whose pod failed for good now; only replicas the spec still has."""
    known: dict[tuple[str, int], Obj] = {}
    for entry in as_list(ctx.job.prev.get(FAILED_REPLICAS)):
        role, index = as_dict(entry).get("replicaType"), as_dict(entry).get("index")
        if isinstance(role, str) and is_int(index):
            known[(role, index)] = entry
    failed = []
    for view in views:
        key = (view.slot.role, view.slot.index)
        if view.outcome is not None and view.outcome.phase == SUCCEEDED:
            continue
        if view.judgement is not None and view.judgement.failed_for_good:
            failed.append(_failure(view, view.judgement))
        elif key in known:
            failed.append(known[key])
    return failed[:MAX_FAILED]


def _failure(view: SlotView, judgement: Judgement) -> Obj:
    entry: Obj = {
        "replicaType": view.slot.role,
        "index": view.slot.index,
        "pod": view.pod_name,
        "exitCode": judgement.exit_code,
    }
    if judgement.exit_reason:
        entry["reason"] = judgement.exit_reason
    if judgement.finished_at:
        entry["time"] = judgement.finished_at
    return entry


def _uncounted(view: SlotView, judgement: Judgement, now: str) -> Obj:
    if judgement.disruption is not None:
        reason, message = judgement.disruption
    else:
        reason, message = Reason.POD_FAILURE_POLICY, f"{judgement.what}, matching {judgement.why}"
    return {
        "replicaType": view.slot.role,
        "index": view.slot.index,
        "pod": view.pod_name,
        "uid": view.uid,
        "reason": reason,
        "message": message,
        "time": now,
    }


def _event(view: SlotView, judgement: Judgement) -> Event:
    who = f"{view.label} (pod {view.pod_name})"
    after = "; recreating it without counting a restart"
    if judgement.disruption is not None:
        reason, message = judgement.disruption
        words = ": ".join(w for w in (reason, message) if w)
        return Event(
            EventType.WARNING, Reason.POD_DISRUPTED, f"{who} was disrupted: {words}{after}"
        )
    message = f"{who} failed: {judgement.what}, matching {judgement.why}{after}"
    return Event(EventType.WARNING, Reason.POD_FAILURE_IGNORED, message)


def _keep(entries: list[Obj], views: Sequence[SlotView]) -> list[Obj]:
    """Every entry whose pod still fills or last left its slot, and the
    latest HISTORY of the others (pods replaced since, slots gone)."""
    current: dict[tuple[object, object], str] = {(v.slot.role, v.slot.index): v.uid for v in views}
    live, history = [], []
    for entry in entries:
        key = (entry.get("replicaType"), entry.get("index"))
        if current.get(key) in (entry.get("uid"), ""):
            live.append(entry)
        else:
            history.append(entry)
    kept = {id(e) for e in live + history[-HISTORY:]}
    return [e for e in entries if id(e) in kept]
