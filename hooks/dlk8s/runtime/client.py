"""The one module that talks to the Kubernetes API; the rest sees plain dicts.

Requests go through the official client's ApiClient (auth, TLS, token refresh)
but skip its typed models: objects travel as the JSON the API server sends,
which is what the pure reconcilers take, and decoding them into models and
back would be most of the operator's CPU at scale. For the same reason JSON
is encoded and decoded with orjson, on requests and on watch streams alike:
under a burst of jobs, decoding watch events and encoding creates were the
operator's largest costs (bench/results: the profile of scenario 1).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.informer import ADDED, BOOKMARK, DELETED, MODIFIED, SharedInformer
from kubernetes.informer import informer as informer_module
from kubernetes.informer.cache import ObjectCache
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from dlk8s.runtime import metrics

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


_BUILTIN = [
    Resource("v1", "Pod", "pods"),
    Resource("v1", "Service", "services"),
    Resource("v1", "ConfigMap", "configmaps"),
    Resource("v1", "Event", "events"),
    Resource("v1", "Node", "nodes", namespaced=False),
    Resource("apps/v1", "Deployment", "deployments"),
]
_RESOURCES: dict[tuple[str, str], Resource] = {(r.api_version, r.kind): r for r in _BUILTIN}


def register(resource: Resource) -> Resource:
    _RESOURCES[(resource.api_version, resource.kind)] = resource
    return resource


def resource_for(api_version: str, kind: str) -> Resource:
    try:
        return _RESOURCES[(api_version, kind)]
    except KeyError:
        raise ValueError(f"no resource registered for {api_version} {kind}") from None


class ApiError(Exception):
    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = body or {}
        super().__init__(f"{status} {reason}: {self.body.get('message', '')}")

    @property
    def api_reason(self) -> str:
        return str(self.body.get("reason", ""))

    @property
    def namespace_terminating(self) -> bool:
        causes = (self.body.get("details") or {}).get("causes") or []
        return self.status == 403 and any(c.get("type") == "NamespaceTerminating" for c in causes)


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
    return client.ApiClient(cfg)


class Kube:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

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
    ) -> Any:
        """One API call. Returns the decoded JSON, or the live response when streaming."""
        # The ApiClient supplies the URL and the auth headers (refreshing the
        # token); the body goes out as bytes we encoded, on its connection pool.
        _, url, headers, _, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in query if v is not None],
            header_params={"Accept": JSON, "Content-Type": content_type},
            auth_settings=["BearerToken"],
        )
        verb = _verb(method, stream)
        metrics.API_REQUESTS.labels(verb, resource).inc()
        try:
            raw = self.api_client.rest_client.pool_manager.request(
                method,
                url,
                body=None if body is None else orjson.dumps(body),
                headers=headers,
                timeout=_timeout(timeout),
                preload_content=not stream,
            )
        except Exception:
            metrics.API_ERRORS.labels(verb, resource, "transport").inc()
            raise
        if not 200 <= raw.status <= 299:
            data = raw.data if not stream else raw.read()
            metrics.API_ERRORS.labels(verb, resource, str(raw.status)).inc()
            raise ApiError(raw.status, raw.reason or "", _decode(data))
        if stream:
            return raw
        return _decode(raw.data)

    # -- list and watch -------------------------------------------------------------

    def informer(
        self,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Callable[[dict[str, Any]], Any] | None = None,
    ) -> SharedInformer:
        """The client's SharedInformer, fed plain dicts instead of typed models.

        With `transform`, the cache keeps transform(obj) instead of the object
        (None: not kept), for watches of many objects of which little is
        needed (the autoscaler's view of every pod); handlers still get the
        object itself.
        """
        list_func = _ListWatch(self, resource, namespace, label_selector, field_selector)
        informer = SharedInformer(
            list_func, label_selector=label_selector, field_selector=field_selector
        )
        if transform is not None:
            informer._cache = _TransformingCache(transform)
        _resume_from_last_event(informer)
        return informer

    # -- writes ------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Create; None when it already exists (names are deterministic, so it is ours)."""
        res = resource_for(obj["apiVersion"], obj["kind"])
        namespace = obj.get("metadata", {}).get("namespace")
        try:
            created: dict[str, Any] = self.request(
                "POST", res.path(namespace), body=obj, resource=res.plural
            )
            return created
        except ApiError as err:
            if err.status == 409 and err.api_reason == "AlreadyExists":
                return None
            if err.namespace_terminating:
                # The namespace and the job with it are going away: nothing to
                # retry, and retrying would only load the API server.
                return None
            raise

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        uid: str | None = None,
        propagation: str = "Background",
    ) -> bool:
        """Delete; False when already gone or replaced by another object of that name."""
        res = resource_for(api_version, kind)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", res.path(namespace, name), body=options, resource=res.plural)
            return True
        except ApiError as err:
            if err.status == 404 or (err.status == 409 and uid):
                return False
            raise

    def patch(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        res = resource_for(api_version, kind)
        patched: dict[str, Any] = self.request(
            "PATCH",
            res.path(namespace, name),
            body=patch,
            content_type=MERGE_PATCH,
            resource=res.plural,
        )
        return patched

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the status subresource; a stale resourceVersion fails with 409, never overwrites."""
        res = resource_for(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        updated: dict[str, Any] = self.request(
            "PUT",
            res.path(meta.get("namespace"), meta["name"], "status"),
            body=obj,
            resource=f"{res.plural}/status",
        )
        return updated

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        res = resource_for(api_version, kind)
        try:
            found: dict[str, Any] = self.request(
                "GET", res.path(namespace, name), resource=res.plural
            )
            return found
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        res = resource_for(api_version, kind)
        body = self.request(
            "GET",
            res.path(namespace),
            query=[("labelSelector", label_selector or None)],
            resource=res.plural,
        )
        items: list[dict[str, Any]] = body.get("items", [])
        return items

    def create_event(self, event: dict[str, Any]) -> None:
        self.create(event)

    # -- leader election -------------------------------------------------------------------

    def leader_election(
        self,
        name: str,
        namespace: str,
        identity: str,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        lease_duration: int = 15,
        renew_deadline: int = 10,
        retry_period: int = 2,
    ) -> leaderelection.LeaderElection:
        lock = LeaseLock(name, namespace, identity)
        lock.api_instance = client.CoordinationV1Api(self.api_client)
        cfg = electionconfig.Config(
            lock, lease_duration, renew_deadline, retry_period, on_started, on_stopped
        )
        return leaderelection.LeaderElection(cfg)


class _ListWatch:
    """List and watch one resource as raw JSON, in the shape SharedInformer calls.

    Without a return annotation the client's Watch leaves events as dicts.
    """

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None = None,
    ) -> None:
        self._kube = kube
        self._resource = resource
        self._namespace = namespace
        self._selector = label_selector
        self._field_selector = field_selector
        # Set when the first watch opens: the informer opens it only after it
        # has put the whole list into its cache and run every handler on it.
        # (Set when the list returns, workers could run on a half-filled
        # child index and take a restarted operator's pods for lost ones.)
        self.synced = threading.Event()

    def __call__(self, **kw: Any):  # type: ignore[no-untyped-def]
        watch = bool(kw.get("watch"))
        query = [
            ("labelSelector", kw.get("label_selector") or self._selector),
            ("fieldSelector", kw.get("field_selector") or self._field_selector),
            ("resourceVersion", kw.get("resource_version")),
            ("watch", "true" if watch else None),
            ("allowWatchBookmarks", "true" if watch else None),
            ("timeoutSeconds", kw.get("timeout_seconds")),
        ]
        path = self._resource.path(self._namespace)
        if not watch:
            body = self._kube.request(
                "GET", path, query=query, timeout=120, resource=self._resource.plural
            )
            return SimpleNamespace(
                items=body.get("items") or [],
                metadata=SimpleNamespace(
                    resource_version=body.get("metadata", {}).get("resourceVersion")
                ),
            )
        self.synced.set()
        # Watches are long-lived: only the connect has a timeout; the server
        # closes the stream after its own timeoutSeconds.
        return self._kube.request(
            "GET",
            path,
            query=query,
            stream=True,
            timeout=(10, 600),
            resource=self._resource.plural,
        )


def has_synced(informer: SharedInformer) -> bool:
    """Whether the informer's cache and handlers have seen its first full list."""
    list_watch: _ListWatch = informer._list_func
    return list_watch.synced.is_set()


def wait_synced(informer: SharedInformer, timeout: float) -> bool:
    list_watch: _ListWatch = informer._list_func
    return list_watch.synced.wait(timeout)


def _resume_from_last_event(informer: SharedInformer) -> None:
    """Have a broken watch resume from the last event it delivered.

    The client's Watch remembers the resourceVersion of each event only when
    it decodes events into models; with plain dicts it keeps the list's, so
    every reconnect (the server ends watches after its timeout, and drops
    watchers that fall behind) replays every event since the list, or fails
    with 410 and relists everything once that version is compacted. A slow
    operator that falls behind is then sent more and more of the past.
    Handlers run on the informer's thread while its Watch streams, so the
    first handler moves the Watch's resourceVersion along (bookmarks too).
    """

    def track(obj: Any) -> None:
        watch = informer._watch
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if watch is not None and version:
            watch.resource_version = version

    for event in (ADDED, MODIFIED, DELETED, BOOKMARK):
        informer.add_event_handler(event, track)


class _TransformingCache(ObjectCache):  # type: ignore[misc]
    """An informer cache that keeps transform(obj), keyed like the object."""

    def __init__(self, transform: Callable[[dict[str, Any]], Any]) -> None:
        super().__init__()
        self._transform = transform

    def _put(self, obj: dict[str, Any]) -> None:
        key, slim = self._key_func(obj), self._transform(obj)
        with self._rlock:
            if slim is None:
                self._objects.pop(key, None)
            else:
                self._objects[key] = slim

    def _replace_all(self, objects: Iterable[dict[str, Any]]) -> None:
        rebuilt = {}
        for obj in objects:
            slim = self._transform(obj)
            if slim is not None:
                rebuilt[self._key_func(obj)] = slim
        with self._rlock:
            self._objects = rebuilt


class _Watch(informer_module.Watch):  # type: ignore[misc]
    """The client's Watch, decoding events with orjson; we never ask it for models."""

    def unmarshal_event(self, data: str, return_type: Any) -> dict[str, Any] | None:
        if return_type:
            return super().unmarshal_event(data, return_type)  # type: ignore[no-any-return]
        if not data or data.isspace():
            return None
        try:
            event: dict[str, Any] = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        event["raw_object"] = event["object"]
        return event


# SharedInformer builds its Watch by this module-level name on every
# (re)connect and has no hook for it; every informer in the process is ours.
informer_module.Watch = _Watch  # type: ignore[misc]


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
