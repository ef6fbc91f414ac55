"""What reconcile asks the I/O side to do, as plain data.

A create or a delete carries the event that tells the user of it, posted
only once it succeeded (create_actions, delete_actions).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlk8s.job.objects import Obj, as_dict, as_list, as_str, dig
from dlk8s.job.vocabulary import TRACKING_FINALIZER, EventType, Reason


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event; `involved` None means the job."""

    type: str  # dlk8s.job.vocabulary.EventType
    reason: str
    message: str
    involved: Obj | None = None


@dataclass(frozen=True)
class Create:
    """Create `obj`, a complete manifest; AlreadyExists counts as success.

    `event` is posted only once the create succeeded: an event that says
    "Created pod x" for a pod the API server refused is the lie users of
    every predecessor complained about.
    """

    obj: Obj
    event: Event | None = None
    # Keys of a Secret's stringData that the I/O side fills with fresh random
    # values as it creates it (a password no pure function could make). Such
    # a Secret is created once and never read back: the operator may create
    # Secrets but not read them, so one of that name counts as created.
    fresh: tuple[str, ...] = ()


@dataclass(frozen=True)
class Delete:
    """Delete one object; `uid` is a precondition so a newer object of the same
    name (created after we looked) is never deleted by mistake. `event` is
    posted only once the delete succeeded."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None
    event: Event | None = None
    # Applied just before the delete: our tracking finalizer off a pod
    # whose end the pass that deletes it has acted on (release_of).
    first: Patch | None = None


@dataclass(frozen=True)
class Patch:
    """A JSON merge patch of one object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    patch: Obj


@dataclass(frozen=True)
class ReplaceStatus:
    """PUT `obj`'s status subresource, read-modify-write: `obj` is the whole
    object as the cache showed it (its resourceVersion included) with its
    status edited, so a stale copy fails with a conflict and the pass is
    retried on a fresh one, never overwriting what another writer (Kueue)
    wrote meanwhile. `event` is posted once it succeeded."""

    obj: Obj
    event: Event | None = None


@dataclass(frozen=True)
class DeleteJob:
    """Delete the job itself (ttlSecondsAfterFinished expired)."""


Action = Create | Delete | Patch | ReplaceStatus | DeleteJob | Event


def delete_of(obj: Obj, api_version: str, kind: str, event: Event | None = None) -> Delete:
    """The Delete of an object we observed, guarded by its uid, and the event
    to post once it is deleted.

    apiVersion and kind are passed in: items of a list response lack them.
    """
    meta = as_dict(obj.get("metadata"))
    uid = meta.get("uid")
    return Delete(
        api_version=api_version,
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=uid if isinstance(uid, str) else None,
        event=event,
        first=release_of(obj) if kind == "Pod" and tracked(obj) else None,
    )


def tracked(pod: Obj) -> bool:
    """Whether the pod carries our tracking finalizer (job.reconcile.tracking)."""
    return TRACKING_FINALIZER in as_list(dig(pod, "metadata", "finalizers"))


def release_of(pod: Obj) -> Patch:
    """A merge patch of the pod's finalizers without ours. Its resourceVersion
    makes it fail (Conflict) if another writer changed them meanwhile: the
    pod's event runs the pass again, which patches the newer list."""
    meta = as_dict(pod.get("metadata"))
    rest = [f for f in as_list(meta.get("finalizers")) if f != TRACKING_FINALIZER]
    patch: Obj = {"finalizers": rest or None}
    if isinstance(meta.get("resourceVersion"), str):
        patch["resourceVersion"] = meta["resourceVersion"]
    return Patch(
        "v1", "Pod", as_str(meta.get("namespace")), as_str(meta.get("name")), {"metadata": patch}
    )


def create_actions(obj: Obj, fresh: tuple[str, ...] = ()) -> list[Action]:
    """The create and the event that tells of it, posted only if it succeeds."""
    what = f"{obj['kind'].lower()} {obj['metadata']['name']}"
    return [Create(obj, Event(EventType.NORMAL, Reason.CREATE, f"Created {what}"), fresh)]


def delete_actions(obj: Obj, api_kind: tuple[str, str], why: str) -> list[Action]:
    name = as_str(as_dict(obj.get("metadata")).get("name"))
    message = f"Deleted {api_kind[1].lower()} {name}: {why}"
    return [delete_of(obj, *api_kind, Event(EventType.NORMAL, Reason.DELETE, message))]


# An Event's message is cut at this length (event_manifest), so a merged one
# ends with a count rather than mid-message.
MAX_EVENT_MESSAGE = 1024


def merge_events(events: list[Event], limit: int = MAX_EVENT_MESSAGE) -> list[Event]:
    """One Event per (type, reason, involved object) of a pass, in first-seen order.

    A pass that creates a job's 8 children reports them in one "Create" event
    naming each, instead of 8 API calls (and for a job of 500 workers, one
    instead of 1000): each message is kept whole, joined with "; "; past
    `limit`, the rest is counted ("... and 970 more (1002 in all)").
    """
    groups: dict[tuple[str, str, str], list[Event]] = {}
    for event in events:
        about = "" if event.involved is None else repr(_identity(event.involved))
        groups.setdefault((event.type, event.reason, about), []).append(event)
    merged = []
    for group in groups.values():
        if len(group) == 1:
            merged.append(group[0])
            continue
        kept: list[str] = []
        length = 0
        for i, event in enumerate(group):
            rest = len(group) - i - 1
            suffix = f"; and {rest} more ({len(group)} in all)" if rest else ""
            step = len(event.message) + (2 if kept else 0)
            if kept and length + step + len(suffix) > limit:
                kept.append(f"and {len(group) - i} more ({len(group)} in all)")
                break
            kept.append(event.message)
            length += step
        first = group[0]
        merged.append(Event(first.type, first.reason, "; ".join(kept), first.involved))
    return merged


def _identity(obj: Obj) -> tuple[object, ...]:
    meta = as_dict(obj.get("metadata"))
    return (obj.get("kind"), meta.get("namespace"), meta.get("name"), meta.get("uid"))
