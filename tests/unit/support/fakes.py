"""Fakes of OUR OWN client wrapper (runtime.client.Kube), never of the
Kubernetes client library: what the runtime's unit tests drive it with.

- RecordingKube: Kube's reads and writes over a dict of objects, recording
  each call as (verb, resource, namespace, name) like client-go's fake
  clientset records actions for sample-controller's tests.
- ScriptedListWatch: Kube's list_objects and watch, answering from a script
  of listings, event streams and errors.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterator
from typing import Any

from dlk8s.runtime.apiresources import resource_for
from dlk8s.runtime.client import Listing, Scope
from dlk8s.runtime.errors import AlreadyExistsError, ApiError, NotFoundError

Call = tuple[str, str, str | None, str]  # verb, resource (plural), namespace, name


class RecordingKube:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []  # Event manifests, in the order sent
        # (verb, name) or (verb, resource, name) -> the error that call raises,
        # as the API server would
        self.failures: dict[tuple[str, ...], Exception] = {}
        self._lock = threading.Lock()  # the executor calls from a pool
        self._versions = itertools.count(100)

    def writes(self) -> list[Call]:
        """The calls that change something, events aside."""
        return [c for c in self.calls if c[0] != "get" and c[1] != "events"]

    def _call(self, verb: str, resource: str, namespace: str | None, name: str) -> None:
        with self._lock:
            self.calls.append((verb, resource, namespace, name))
        failure = self.failures.get((verb, resource, name)) or self.failures.get((verb, name))
        if failure is not None:
            raise failure

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = resource_for(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        name = meta.get("name") or meta.get("generateName", "")
        self._call("create", res.plural, meta.get("namespace"), name)
        key = (res.plural, meta.get("namespace"), name)
        with self._lock:
            if key in self.objects:
                raise AlreadyExistsError(409, "Conflict", {"reason": "AlreadyExists"})
            created = copy.deepcopy(obj)
            created["metadata"]["uid"] = f"uid-{name}"
            self.objects[key] = created
        return created

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        plural = resource_for(api_version, kind).plural
        self._call("get", plural, namespace, name)
        try:
            return copy.deepcopy(self.objects[(plural, namespace, name)])
        except KeyError:
            raise NotFoundError(404, "Not Found", {"reason": "NotFound"}) from None

    def delete(
        self, api_version: str, kind: str, namespace: str | None, name: str, uid: str | None = None
    ) -> None:
        plural = resource_for(api_version, kind).plural
        self._call("delete", plural, namespace, name)
        if self.objects.pop((plural, namespace, name), None) is None:
            raise NotFoundError(404, "Not Found", {"reason": "NotFound"})

    def patch(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        self._call("patch", resource_for(api_version, kind).plural, namespace, name)
        return {"metadata": {"name": name, "namespace": namespace}, **patch}

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        plural = resource_for(obj["apiVersion"], obj["kind"]).plural
        self._call("update", f"{plural}/status", meta.get("namespace"), meta["name"])
        updated = copy.deepcopy(obj)
        updated["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[(plural, meta.get("namespace"), meta["name"])] = updated
        return copy.deepcopy(updated)

    def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            named = copy.deepcopy(event)
            named["metadata"]["name"] = f"{event['metadata']['generateName']}{len(self.events)}"
        created = self.create(named)
        with self._lock:
            self.events.append(created)
        return created

    def count_event(self, namespace: str, name: str, count: int, last: str) -> None:
        """Counts a repeat on the Event object, as a merge patch would."""
        self._call("patch", "events", namespace, name)
        with self._lock:
            stored = self.objects.get(("events", namespace, name))
            if stored is None:
                raise NotFoundError(404, "Not Found", {"reason": "NotFound"})
            stored.update(count=count, lastTimestamp=last)
            for event in self.events:
                if event["metadata"]["name"] == name:
                    event.update(count=count, lastTimestamp=last)


def api_status(code: int, reason: str, message: str = "") -> dict[str, Any]:
    """A Status object, as the API server sends with an error."""
    return {
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


class ScriptedStream:
    """A watch response: its events, then the end (or an error mid-stream)."""

    def __init__(self, events: list[dict[str, Any]], then: Exception | None = None) -> None:
        self._events = events
        self._then = then  # raised after the events: a connection that broke
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self._events
        if self._then is not None:
            raise self._then

    def close(self) -> None:
        self.closed.set()


class BlockingStream(ScriptedStream):
    """A quiet watch: blocks in its read until closed, as a socket read would."""

    def __init__(self) -> None:
        super().__init__([])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.closed.wait(30)
        raise ConnectionError("closed under the read")
        yield {}  # pragma: no cover - makes this a generator


Answer = Listing | ScriptedStream | ApiError | Exception


class ScriptedListWatch:
    """Answers list_objects and watch calls in order from `script`; once the
    script runs out, every watch blocks quietly until closed."""

    def __init__(self, script: list[Answer]) -> None:
        self.script = list(script)
        self.requests: list[tuple[str, str | None]] = []  # ("list", None) / ("watch", version)
        self.exhausted = threading.Event()  # set when the script has been used up
        self.last_stream: ScriptedStream | None = None

    def _next(self, request: tuple[str, str | None]) -> Answer:
        self.requests.append(request)
        if not self.script:
            self.exhausted.set()
            return BlockingStream()
        return self.script.pop(0)

    def list_objects(self, scope: Scope, limit: int = 0, continue_token: str = "") -> Listing:
        answer = self._next(("list", continue_token or None))
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, Listing), f"the script answers a list with {answer!r}"
        return answer

    def watch(self, scope: Scope, resource_version: str, timeout_seconds: int) -> ScriptedStream:
        answer = self._next(("watch", resource_version))
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, ScriptedStream), f"the script answers a watch with {answer!r}"
        self.last_stream = answer
        return answer


def pod(name: str, version: str, namespace: str = "ns", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": version, **meta},
    }


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": version}}}
