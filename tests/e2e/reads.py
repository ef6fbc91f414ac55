"""`kubectl get … -o json`, answered in this process by a plain GET.

The tests wait by asking again and again (helpers.wait_until, four times a
second), and a kubectl process costs about a tenth of a CPU-second. Process
accounting over one `make test` on 2 cores counted over 3,000 of them and
more CPU in kubectl than in any API server: the suite's waits were most of
its load. Here the same question is one request on a kept connection.

Only the plain forms are read here: a resource (any name kubectl takes:
plural, singular, short name, kind, `plural.group`), at most one object's
name, and `-n`, `-A`, `-l`, `--field-selector`. Anything else, or a name
the API server's discovery does not know, goes to kubectl as before.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from typing import Any, NamedTuple

from dlk8s.runtime.client import Kube
from dlk8s.runtime.errors import ApiError
from dlk8s_dev.localcluster import LocalCluster

# Where `kubectl apply` keeps what it applied, for its next three-way merge.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Seconds between two discoveries for names not known: each is a request per API group.
REDISCOVER_SECONDS = 2.0
# What each flag sets; a flag not here sends the whole question to kubectl.
FLAGS = {
    "-n": "namespace",
    "--namespace": "namespace",
    "-l": "selector",
    "--selector": "selector",
    "--field-selector": "fields",
}


class Resource(NamedTuple):
    group_version: str
    plural: str
    kind: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.plural}" + (f"/{name}" if name else "")


class Query(NamedTuple):
    resource: str
    name: str | None
    namespace: str | None
    every_namespace: bool
    selector: str | None
    fields: str | None


class NotFoundError(Exception):
    """The object asked for by name is not there (kubectl's NotFound)."""


def parse(args: tuple[str, ...]) -> Query | None:
    """The question in kubectl's words; None for any form not read here."""
    positional: list[str] = []
    flags: dict[str, str] = {}
    every, rest = False, list(args)
    while rest:
        arg = rest.pop(0)
        if arg in ("-A", "--all-namespaces"):
            every = True
        elif arg in FLAGS and rest:
            flags[FLAGS[arg]] = rest.pop(0)
        elif arg.startswith("-"):
            return None
        else:
            positional.append(arg)
    if len(positional) == 1 and "/" in positional[0]:
        positional = positional[0].split("/", 1)
    if not 1 <= len(positional) <= 2 or "," in positional[0]:
        return None
    name = positional[1] if len(positional) == 2 else None
    return Query(
        positional[0], name, flags.get("namespace"), every, flags.get("selector"),
        flags.get("fields"),
    )  # fmt: skip


class Reader:
    """One cluster's API, read through the admin's token, discovery kept."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.kube = Kube(cluster.api_client())
        self._lock = threading.Lock()
        self._names: dict[str, Resource] = {}
        self._discovered = float("-inf")  # time.monotonic() of the last discovery

    def _call(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        return self.kube.request("GET", path, query=query or ())

    def _discover(self) -> dict[str, Resource]:
        names: dict[str, Resource] = {}
        versions = ["v1"] + [
            g["preferredVersion"]["groupVersion"] for g in self._call("/apis")["groups"]
        ]
        for gv in versions:
            try:
                listed = self._call("/api/v1" if gv == "v1" else f"/apis/{gv}")
            except ApiError:
                continue  # an aggregated API that is not serving: kubectl skips it too
            group = gv.split("/")[0] if "/" in gv else ""
            for r in listed["resources"]:
                if "/" in r["name"] or "get" not in r.get("verbs", []):
                    continue
                found = Resource(gv, r["name"], r["kind"], r["namespaced"])
                keys = [r["name"], r.get("singularName") or "", r["kind"].lower()]
                keys += r.get("shortNames") or []
                if group:
                    keys += [f"{k}.{group}" for k in keys if k]
                for key in keys:
                    # The core group and the first group to claim a name win, as in kubectl.
                    if key and key not in names:
                        names[key] = found
        return names

    def resource(self, name: str) -> Resource | None:
        with self._lock:
            missing = name.lower() not in self._names
            if missing and time.monotonic() - self._discovered > REDISCOVER_SECONDS:
                # A CRD installed since the last look; a wait polling a name
                # no API serves yet asks discovery again only this often.
                self._names = self._discover()
                self._discovered = time.monotonic()
            return self._names.get(name.lower())

    def get(self, query: Query, default_namespace: str = "default") -> dict[str, Any] | None:
        """The answer kubectl would print; None if the resource is unknown here."""
        resource = self.resource(query.resource)
        if resource is None:
            return None
        namespace = None if query.every_namespace else (query.namespace or default_namespace)
        params = [("labelSelector", query.selector), ("fieldSelector", query.fields)]
        try:
            found = self._call(
                resource.path(namespace, query.name), [(k, v) for k, v in params if v]
            )
        except ApiError as err:
            if err.status == 404 and query.name:
                raise NotFoundError(f"{resource.plural} {query.name!r} not found") from err
            raise
        if query.name:
            return dict(found)
        # kubectl's list: every item says what it is.
        for item in found["items"]:
            item.setdefault("apiVersion", resource.group_version)
            item.setdefault("kind", resource.kind)
        return {"apiVersion": "v1", "kind": "List", "items": found["items"], "metadata": {}}

    def create(self, manifest: dict[str, Any], namespace: str) -> bool:
        """`kubectl apply -n NAMESPACE` of an object that is not there yet, as
        kubectl makes it (strict field validation, its field manager, the
        last-applied annotation a later `kubectl apply` merges against).
        False, having changed nothing, for anything else: an object that
        exists (kubectl's three-way merge), a kind discovery does not know,
        an error (kubectl says it in its words)."""
        api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
        resource = next(
            (r for r in self._by_kind() if (r.group_version, r.kind) == (api_version, kind)), None
        )
        if resource is None:
            return False
        obj = copy.deepcopy(manifest)
        meta = obj.setdefault("metadata", {})
        if resource.namespaced:
            meta["namespace"] = meta.get("namespace") or namespace
        annotations = meta.setdefault("annotations", {})  # kubectl records {} too
        annotations[LAST_APPLIED] = json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n"
        query = [("fieldManager", "kubectl-client-side-apply"), ("fieldValidation", "Strict")]
        try:
            self.kube.request(
                "POST", resource.path(meta.get("namespace"), None), query=query, body=obj
            )
        except ApiError:
            return False
        return True

    def _by_kind(self) -> list[Resource]:
        self.resource("pods")  # discovery, if none was made yet
        with self._lock:
            return list(set(self._names.values()))


# By what a reader connects with: a cluster started again has a new token.
_READERS: dict[tuple[str, str], Reader] = {}
_READERS_LOCK = threading.Lock()


def reader(cluster: LocalCluster) -> Reader:
    with _READERS_LOCK:
        key = (cluster.server, cluster.token)
        if key not in _READERS:
            _READERS[key] = Reader(cluster)
        return _READERS[key]
