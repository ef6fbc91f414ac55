"""The one module that talks to the Kubernetes API; the rest sees plain dicts.

Requests go through the official client's ApiClient (auth, TLS, token refresh)
but skip its typed models: objects travel as the JSON the API server sends,
which is what the pure reconcilers take, and decoding them into models and
back would be most of the operator's CPU at scale. For the same reason JSON
is encoded and decoded with orjson, on requests and on watch streams alike:
under a burst of jobs, decoding watch events and encoding creates were the
operator's largest costs (bench/results: the profile of scenario 1).

A failed request raises the type of its failure (``runtime.errors``); the
informers (``runtime.informer``) list and watch through ``list_objects`` and
``watch`` here, so no private part of the client is touched. This is the
lowest module of the runtime but for ``errors``, ``apiresources`` and
``metrics``: it imports no other.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import urllib3
from kubernetes import client, config

from dlk8s.job.objects import Obj
from dlk8s.runtime import metrics
from dlk8s.runtime.apiresources import Resource, resource_for
from dlk8s.runtime.errors import FencedError, TransportError, api_error
from dlk8s.runtime.serverclock import ServerClock

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
# Creates and updates fail on a field the API server does not know (see create).
STRICT = (("fieldValidation", "Strict"),)


@dataclass(frozen=True)
class Selectors:
    label: str | None = None  # only objects with these labels
    field: str | None = None  # e.g. pods that have not terminated


@dataclass(frozen=True)
class Scope:
    """What one list or watch asks for (an informer asks for the same in both)."""

    resource: Resource  # the objects' kind, and the path to them
    namespace: str | None = None  # None: every namespace
    selectors: Selectors = field(default_factory=Selectors)  # only the objects these select


@dataclass(frozen=True)
class Listing:
    items: list[Obj]
    resource_version: str  # where a watch that follows this list starts
    continue_token: str = ""  # set when more pages follow: ask for the next with it


def load_api_client(kubeconfig: str | None = None, pool_size: int = 64) -> client.ApiClient:
    """From a kubeconfig (path, or $KUBECONFIG), else the in-cluster ServiceAccount."""
    cfg = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException:
            config.load_kube_config(client_configuration=cfg)
    # Creates for one job go out in parallel; the pool must not serialize them.
    cfg.connection_pool_maxsize = pool_size
    # No second attempt on a refused connection: urllib3 would make three at
    # once, so an API server that is down would see four per request, and
    # the back-off of the informers and of the work queue is what paces the
    # retries. A read on a pooled connection the server closed is repeated
    # once (urllib3 does so only for idempotent methods).
    cfg.retries = urllib3.Retry(total=1, connect=0, read=1, redirect=0, status=0)
    return client.ApiClient(cfg)


class Kube:
    """Requests as plain dicts; a failure raises its type from runtime.errors."""

    def __init__(
        self, api_client: client.ApiClient, may_write: Callable[[], bool] | None = None
    ) -> None:
        self.api_client = api_client  # auth, TLS, token refresh and the connection pool
        # Asked before every request that is not a GET: the leader election's
        # fence (runtime.leader), so that a leader paused past its lease does
        # not write once it runs again. None: no election, every write goes.
        self.may_write = may_write
        # The API server's clock, from its answers' Date: reconcile's `now`.
        self.server_clock = ServerClock()

    # -- raw requests ----------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = JSON,
        stream: bool = False,
        timeout: float | tuple[float, float] | None = 30,
        resource: str = "",
        verb: str | None = None,
    ) -> Any:
        """One API call. Returns the decoded JSON, or the live response when streaming.

        Counted in dlk8s_api_requests_total by `verb` (the RBAC verb in upper
        case, from the method unless given: LIST is a GET of a collection) and
        `resource` (plural, with the subresource), which is what the RBAC test
        compares with what the chart grants."""
        # The ApiClient supplies the URL and the auth headers (refreshing the
        # token); the body goes out as bytes we encoded, on its connection pool.
        _, url, headers, _, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in query if v is not None],
            header_params={"Accept": JSON, "Content-Type": content_type},
            auth_settings=["BearerToken"],
        )
        verb = verb or _verb(method, stream)
        # As late as can be before the request: a pause between this check
        # and the send is the one window the fence leaves open.
        if method != "GET" and self.may_write is not None and not self.may_write():
            metrics.API_ERRORS.labels(verb, resource, "fenced").inc()
            raise FencedError(f"{verb} {path}: not sent, the leader lease may have passed on")
        metrics.API_REQUESTS.labels(verb, resource).inc()
        clock = self.server_clock
        sent = clock.local()
        try:
            raw = self.api_client.rest_client.pool_manager.request(
                method,
                url,
                body=None if body is None else orjson.dumps(body),
                headers=headers,
                timeout=_timeout(timeout),
                preload_content=not stream,
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            metrics.API_ERRORS.labels(verb, resource, "transport").inc()
            raise TransportError(f"{verb} {path}: {err}") from err
        if clock.wants_sample():
            clock.observe(raw.headers.get("Date"), sent, clock.local())
            metrics.CLOCK_OFFSET.set(clock.offset)
        if not 200 <= raw.status <= 299:
            data = raw.data if not stream else raw.read()
            metrics.API_ERRORS.labels(verb, resource, str(raw.status)).inc()
            raise api_error(raw.status, raw.reason or "", _decode(data))
        if stream:
            return raw
        return _decode(raw.data)

    # -- list and watch (what runtime.informer builds on) -----------------------

    def list_objects(self, scope: Scope, limit: int = 0, continue_token: str = "") -> Listing:
        query = [
            *_selecting(scope.selectors),
            ("limit", limit or None),
            ("continue", continue_token or None),
        ]
        res = scope.resource
        body = self.request(
            "GET",
            res.path(scope.namespace),
            query=query,
            timeout=120,
            resource=res.plural,
            verb="LIST",
        )
        meta = body.get("metadata") or {}
        version = meta.get("resourceVersion") or ""
        return Listing(body.get("items") or [], str(version), str(meta.get("continue") or ""))

    def watch(self, scope: Scope, resource_version: str, timeout_seconds: int) -> WatchStream:
        query = [
            *_selecting(scope.selectors),
            ("resourceVersion", resource_version),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        # The server ends the watch after timeoutSeconds; a read that waits
        # well past that (bookmarks come every minute) means a dead connection.
        response = self.request(
            "GET",
            scope.resource.path(scope.namespace),
            query=query,
            stream=True,
            timeout=(10, timeout_seconds + 60),
            resource=scope.resource.plural,
        )
        return WatchStream(response)

    # -- reads and writes ------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create; raises AlreadyExistsError, NamespaceTerminatingError, ... (runtime.errors).

        With strict field validation: a field the API server does not know
        (a misspelled `resource:` in a pod template) fails the create with
        BadRequestError naming it, instead of being dropped with a warning
        header nobody reads.
        """
        res = resource_for(obj["apiVersion"], obj["kind"])
        namespace = obj.get("metadata", {}).get("namespace")
        return self._object("POST", res.path(namespace), res.plural, query=STRICT, body=obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; a stale resourceVersion fails with ConflictError."""
        res = resource_for(obj["apiVersion"], obj["kind"])
        path = res.path(obj["metadata"].get("namespace"), obj["metadata"]["name"])
        return self._object("PUT", path, res.plural, query=STRICT, body=obj)

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        uid: str | None = None,
        propagation: str = "Background",
    ) -> None:
        """Delete; NotFoundError when gone, Conflict when `uid` names an object replaced since."""
        res = resource_for(api_version, kind)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if uid:
            options["preconditions"] = {"uid": uid}
        self.request("DELETE", res.path(namespace, name), body=options, resource=res.plural)

    def patch(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        res = resource_for(api_version, kind)
        path = res.path(namespace, name)
        return self._object("PATCH", path, res.plural, body=patch, content_type=MERGE_PATCH)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the status subresource; a stale resourceVersion fails with Conflict."""
        res = resource_for(obj["apiVersion"], obj["kind"])
        path = res.path(obj["metadata"].get("namespace"), obj["metadata"]["name"], "status")
        return self._object("PUT", path, f"{res.plural}/status", body=obj)

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object; NotFoundError when there is none."""
        res = resource_for(api_version, kind)
        return self._object("GET", res.path(namespace, name), res.plural)

    def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.create(event)

    def _object(self, method: str, path: str, resource: str, **options: Any) -> Obj:
        """A request answered with one object (see request for the options)."""
        answer: Obj = self.request(method, path, resource=resource, **options)
        return answer

    def count_event(self, namespace: str, name: str, count: int, last: str) -> None:
        """Count a repeat on an Event posted before (what client-go's
        EventCorrelator does); NotFoundError once the API server expired it."""
        self.patch("v1", "Event", namespace, name, {"count": count, "lastTimestamp": last})


class WatchStream:
    """The events of one watch response, decoded with orjson, line by line."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self._lines():
                yield self._decode(line)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise TransportError(f"watch stream broke: {err!r}") from err

    def _lines(self) -> Iterator[bytes]:
        # One event per line, in chunks that may split a line (or hold many);
        # parts are joined once a line ends, not once per chunk.
        parts: list[bytes] = []
        for chunk in self._response.stream(amt=None, decode_content=False):
            parts.append(chunk)
            if b"\n" not in chunk:
                continue
            *lines, rest = b"".join(parts).split(b"\n")
            parts = [rest] if rest else []
            yield from (line for line in lines if line.strip())
        if parts and b"".join(parts).strip():
            yield b"".join(parts)

    @staticmethod
    def _decode(line: bytes) -> dict[str, Any]:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            # Skipping it would lose an event for good; a new watch from the
            # last version delivered sends it again.
            raise TransportError(f"undecodable watch event: {line[:200]!r}") from err
        if not isinstance(event, dict):
            raise TransportError(f"watch event is not an object: {line[:200]!r}")
        return event

    def close(self) -> None:
        """Shut the socket first: a read blocked in another thread returns at once."""
        # ValueError, RuntimeError: already released or closed, nothing blocks on it.
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self._response.shutdown()
        self._response.close()


def _selecting(selectors: Selectors) -> list[tuple[str, Any]]:
    return [("labelSelector", selectors.label), ("fieldSelector", selectors.field)]


def _timeout(timeout: float | tuple[float, float] | None) -> urllib3.Timeout | None:
    if timeout is None:
        return None
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def _verb(method: str, stream: bool) -> str:
    if stream:
        return "WATCH"
    return {"GET": "GET", "POST": "CREATE", "PUT": "UPDATE", "PATCH": "PATCH"}.get(method, method)


def _decode(data: bytes | str | None) -> dict[str, Any]:
    if not data:
        return {}
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {"message": data.decode(errors="replace") if isinstance(data, bytes) else data}
    return decoded if isinstance(decoded, dict) else {"items": decoded}
