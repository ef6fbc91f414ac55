"""What we wrote that the watch has not shown yet: our own writes, overlaid.

A write returns the object as the API server stored it, while the cache
still holds the version before it until the watch delivers the write. A
pass that read the cache then would decide on that past (the controller
would write a status it already wrote, the autoscaler scale a job it just
scaled), so the written object stands in for the cached one until the cache
holds a version at least as new. resourceVersions are etcd revisions here,
so that is a comparison of integers.

The controller also asks whether a job's event is only the echo of its own
status write, which it batches rather than runs at once
(``runtime.controller``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from dlk8s.job.objects import Obj


class OwnWrites:
    """Objects as our writes returned them, by uid, until the cache catches up."""

    def __init__(self) -> None:
        # Read by the workers (or the autoscaler's pass), written by them and
        # by the informers' delete handlers.
        self._lock = threading.Lock()
        # What each write returned, until the cache holds a version as new.
        self._written: dict[str, Obj] = {}
        # The resourceVersion of each object's last write, until its event
        # comes (consumed by is_echo; the autoscaler never asks, and
        # keep_only drops it with the job).
        self._echoes: dict[str, str] = {}

    def wrote(self, uid: str, obj: Obj) -> None:
        """Record what a write returned (or what of it the cache would keep)."""
        with self._lock:
            self._written[uid] = obj
            self._echoes[uid] = _meta(obj).get("resourceVersion", "")

    def current(self, cached: Obj) -> Obj:
        """The cached object, or what we wrote if the cache is behind it."""
        uid = _meta(cached).get("uid", "")
        with self._lock:
            written = self._written.get(uid)
            if written is None:
                return cached
            if _newer(cached, written):
                del self._written[uid]
                return cached
            return written

    def is_echo(self, meta: Mapping[str, Any]) -> bool:
        """Whether an object's event only shows back our last write of it;
        answered once per write."""
        uid = meta.get("uid", "")
        with self._lock:
            version = self._echoes.get(uid)
            if version is None or version != meta.get("resourceVersion"):
                return False
            del self._echoes[uid]
            return True

    def forget(self, uid: str) -> None:
        """The object is gone: nothing of it will show any more."""
        with self._lock:
            self._written.pop(uid, None)
            self._echoes.pop(uid, None)

    def keep_only(self, uids: Iterable[str]) -> None:
        """Forget every object but these (those deleted before the watch
        showed our write leave nothing behind)."""
        kept = set(uids)
        with self._lock:
            for gone in (self._written.keys() | self._echoes.keys()) - kept:
                self._written.pop(gone, None)
                self._echoes.pop(gone, None)

    def __contains__(self, uid: object) -> bool:
        with self._lock:
            return uid in self._written


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _newer(a: Obj, b: Obj) -> bool:
    """Whether a's resourceVersion is at least b's; an object without one
    (never from the API server) counts as current."""
    try:
        return int(a["metadata"]["resourceVersion"]) >= int(b["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return True
