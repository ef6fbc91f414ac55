"""What every path of reconcile shares: the job as read, the verdict, the result.

JobView reads a job leniently (any input gives one), SlotView pairs a slot of
the spec with the pod that fills it, and the small builders of actions keep
every create and delete paired with the event that tells the user about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dlk8s.job import naming
from dlk8s.job.actions import Action, Create, Event, delete_of
from dlk8s.job.api import (
    EventType,
    JobContext,
    Kind,
    Obj,
    Reason,
    RunPolicy,
    Slot,
    as_dict,
    as_str,
    format_time,
    is_int,
    parse_time,
    run_policy,
)
from dlk8s.job.children import is_terminating
from dlk8s.job.kinds import lookup
from dlk8s.job.policy import Decision, PodOutcome, clean_conditions, pod_outcome


@dataclass(frozen=True)
class Result:
    actions: list[Action]
    status: Obj  # the complete desired .status
    requeue_after: float | None  # seconds until a timer needs another pass


@dataclass(frozen=True)
class JobView:
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


def read_job(raw: Obj, now: datetime) -> JobView:
    meta = as_dict(raw.get("metadata"))
    prev = as_dict(raw.get("status"))
    generation = meta.get("generation")
    if not is_int(generation) or generation < 0:
        generation = None
    return JobView(
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
class Verdict:
    state: str
    reason: str
    message: str


@dataclass(frozen=True)
class SlotView:
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


def deciders_of(ctx: JobContext, views: Sequence[SlotView]) -> list[SlotView]:
    return [v for v in views if v.slot.role == ctx.deciding_role]


def is_up(view: SlotView) -> bool:
    """Running, or already done (a decider that waits for its peers)."""
    return view.outcome is not None and view.outcome.phase in ("Running", "Succeeded")


def detail(view: SlotView) -> str:
    return view.outcome.detail if view.outcome else "no pod"


def outcomes(pods: Iterable[Obj], container: str) -> list[PodOutcome]:
    return [pod_outcome(pod, container) for pod in pods]


def create_actions(obj: Obj) -> list[Action]:
    """The create and the event that tells of it, posted only if it succeeds."""
    what = f"{obj['kind'].lower()} {obj['metadata']['name']}"
    return [Create(obj, Event(EventType.NORMAL, Reason.CREATE, f"Created {what}"))]


def delete_actions(obj: Obj, api_kind: tuple[str, str], why: str) -> list[Action]:
    name = as_str(as_dict(obj.get("metadata")).get("name"))
    message = f"Deleted {api_kind[1].lower()} {name}: {why}"
    return [delete_of(obj, *api_kind, Event(EventType.NORMAL, Reason.DELETE, message))]


def later(moment: datetime, seconds: float) -> datetime:
    """moment + seconds, saturating: a timer beyond year 9999 never fires."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def valid_time(value: object) -> str | None:
    return value if isinstance(value, str) and parse_time(value) is not None else None
