"""The runtime's client and informer against a real kube-apiserver: the error
types it answers with, a watch that resumes without replaying, and a relist
after 410 Gone."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from dlk8s.runtime.apiresources import Resource, resource_for
from dlk8s.runtime.client import Kube, Scope, Selectors, WatchStream
from dlk8s.runtime.errors import (
    AlreadyExistsError,
    ConflictError,
    NamespaceTerminatingError,
    NotFoundError,
)
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Informer
from dlk8s_dev.localcluster import LocalCluster

from ..helpers import get_json, wait_until

CONFIGMAPS = resource_for("v1", "ConfigMap")
LABEL = "dlk8s.io/informer-test"


def configmap(namespace: str, name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "yes"}, **meta},
        "data": {"k": "v"},
    }


def watches() -> float:
    """Watch requests of configmaps this process has sent."""
    labels = {"verb": "WATCH", "resource": "configmaps"}
    return REGISTRY.get_sample_value("dlk8s_api_requests_total", labels) or 0.0


@pytest.fixture
def kube(cluster: LocalCluster) -> Kube:
    return Kube(cluster.api_client())


class Seen:
    """Handler calls as (event, name)."""

    def __init__(self, informer: Informer) -> None:
        self.calls: list[tuple[str, str]] = []
        for kind in (ADDED, MODIFIED, DELETED):
            informer.add_event_handler(kind, self._record(kind))

    def _record(self, kind: str) -> Any:
        return lambda obj: self.calls.append((kind, obj["metadata"]["name"]))


@contextmanager
def started(informer: Informer) -> Iterator[Informer]:
    before = set(threading.enumerate())
    informer.start()
    try:
        assert informer.wait_synced(30)
        yield informer
    finally:
        # A quiet watch's read blocks for minutes: the thread is gone within
        # stop's own wait only if stop closed the stream under it.
        informer.stop(timeout=30)
        left = [t.name for t in set(threading.enumerate()) - before]
        assert not [n for n in left if n.startswith("informer-")], "stop hung on a quiet watch"


def test_each_failure_comes_back_as_its_type(kube: Kube, namespace: str) -> None:
    created = kube.create(configmap(namespace, "a"))
    with pytest.raises(AlreadyExistsError):
        kube.create(configmap(namespace, "a"))
    with pytest.raises(ConflictError):
        kube.delete("v1", "ConfigMap", namespace, "a", uid="not-its-uid")
    kube.delete("v1", "ConfigMap", namespace, "a", uid=created["metadata"]["uid"])
    with pytest.raises(NotFoundError):
        kube.get("v1", "ConfigMap", namespace, "a")
    with pytest.raises(NotFoundError):
        kube.delete("v1", "ConfigMap", namespace, "a")


def test_a_create_in_a_namespace_being_deleted_is_namespace_terminating(
    kube: Kube, cluster: LocalCluster, namespace: str
) -> None:
    # A finalizer keeps the namespace in Terminating while the test looks.
    kube.create(configmap(namespace, "held", finalizers=["dlk8s.io/test-hold"]))
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    try:
        wait_until(
            lambda: get_json(cluster, "namespace", namespace)["status"]["phase"] == "Terminating",
            30,
            "the namespace to terminate",
        )
        with pytest.raises(NamespaceTerminatingError):
            kube.create(configmap(namespace, "late"))
    finally:
        kube.patch("v1", "ConfigMap", namespace, "held", {"metadata": {"finalizers": None}})


def test_a_watch_resumes_from_the_last_event_without_replaying(kube: Kube, namespace: str) -> None:
    kube.create(configmap(namespace, "before"))
    # The server ends each watch after a second: many reconnects in a few.
    informer = Informer(kube, CONFIGMAPS, namespace, Selectors(LABEL), watch_seconds=(1, 1))
    seen = Seen(informer)
    with started(informer) as running:
        opened = watches()
        for i in range(4):
            kube.create(configmap(namespace, f"during-{i}"))
            time.sleep(1.2)
        wait_until(lambda: len(seen.calls) == 5, 15, "every create delivered")
        time.sleep(2)  # more reconnects, which must not replay anything
        assert watches() - opened >= 4
        assert running.cache.get_by_key(f"{namespace}/during-3") is not None
    assert seen.calls == [(ADDED, "before"), *[(ADDED, f"during-{i}") for i in range(4)]]


# A custom resource of the test's own: the API server starts its watch cache
# when the CRD is established, so version 1 is older than that cache's window
# and a watch from it gets 410 Gone (built-in resources, cached since the
# server started, would replay from 1 instead).
PROBES = Resource("informer-test.dlk8s.io/v1", "Probe", "probes")
PROBE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "probes.informer-test.dlk8s.io"},
    "spec": {
        "group": "informer-test.dlk8s.io",
        "scope": "Namespaced",
        "names": {"plural": "probes", "singular": "probe", "kind": "Probe"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def probes(cluster: LocalCluster, tmp_path: Path) -> Iterator[None]:
    manifest = tmp_path / "crd.json"
    manifest.write_text(json.dumps(PROBE_CRD))
    cluster.kubectl("apply", "-f", str(manifest))
    cluster.wait_established(f"crd/{PROBE_CRD['metadata']['name']}")
    yield
    cluster.kubectl("delete", "-f", str(manifest), "--wait=false")


def create_probe(kube: Kube, namespace: str, name: str) -> None:
    body = {"apiVersion": PROBES.api_version, "kind": "Probe", "metadata": {"name": name}}
    # Established is not yet served everywhere in the server: retry briefly.
    wait_until(lambda: _try(lambda: kube.request("POST", PROBES.path(namespace), body=body)), 15)


def _try(call: Any) -> bool:
    try:
        call()
    except NotFoundError:
        return False
    return True


class FirstWatchFromThePast(Kube):
    """Our client, except that its first watch asks for version 1, after a
    probe is deleted unseen."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        super().__init__(kube.api_client)
        self.namespace = namespace
        self.watched_from: list[str] = []

    def watch(self, scope: Scope, resource_version: str, timeout_seconds: int) -> WatchStream:
        if not self.watched_from:
            self.request("DELETE", PROBES.path(self.namespace, "vanishes"))
            resource_version = "1"
        self.watched_from.append(resource_version)
        return super().watch(scope, resource_version, timeout_seconds)


@pytest.mark.usefixtures("probes")
def test_a_410_relists_reports_what_changed_and_watches_on(kube: Kube, namespace: str) -> None:
    create_probe(kube, namespace, "stays")
    create_probe(kube, namespace, "vanishes")
    past = FirstWatchFromThePast(kube, namespace)
    informer = Informer(past, PROBES, namespace)
    seen = Seen(informer)
    with started(informer) as running:
        wait_until(lambda: len(past.watched_from) >= 2, 30, "a watch after the relist")
        create_probe(kube, namespace, "after")
        wait_until(lambda: (ADDED, "after") in seen.calls, 15, "the new probe")
        names = sorted(c["metadata"]["name"] for c in running.cache.list())
        assert names == ["after", "stays"]
    assert past.watched_from[0] == "1"
    assert int(past.watched_from[1]) > 1  # the relist's version
    assert seen.calls == [
        *[(ADDED, "stays"), (ADDED, "vanishes")],  # the list
        # the relist after 410: what it lists, then what it lacks
        *[(MODIFIED, "stays"), (DELETED, "vanishes")],
        (ADDED, "after"),  # the watch from the relist's version
    ]
