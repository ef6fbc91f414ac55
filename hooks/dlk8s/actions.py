"""What reconcile asks the I/O side to do, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Create:
    """Create `obj`, a complete manifest; AlreadyExists counts as success."""

    obj: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    """Delete one object; `uid` is a precondition so a newer object of the same
    name (created after we looked) is never deleted by mistake."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None


@dataclass(frozen=True)
class Patch:
    """A JSON merge patch of one object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    patch: dict[str, Any]


@dataclass(frozen=True)
class DeleteJob:
    """Delete the job itself (ttlSecondsAfterFinished expired)."""


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event; `involved` None means the job."""

    type: EventType
    reason: str
    message: str
    involved: dict[str, Any] | None = None


Action = Create | Delete | Patch | DeleteJob | Event


def delete_of(obj: dict[str, Any], api_version: str, kind: str) -> Delete:
    """The Delete of an object we observed, guarded by its uid.

    apiVersion and kind are passed in: items of a list response lack them.
    """
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    uid = meta.get("uid")
    return Delete(
        api_version=api_version,
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=uid if isinstance(uid, str) else None,
    )
