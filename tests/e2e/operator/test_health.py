"""/healthz fails within a probe period of a dead informer (issue 14).

The controller and its informers watch a real kube-apiserver; the health
endpoint is the operator's own (runtime.health over runtime.serving). One
informer's thread is made to die the way no `except Exception` catches, by
a handler that raises a BaseException on an object the test creates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s.job.config import parse_config
from dlk8s.runtime.client import Kube
from dlk8s.runtime.controller import Controller
from dlk8s.runtime.health import Health
from dlk8s.runtime.informer import ADDED
from dlk8s.runtime.serving import ProbeServer
from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install

from ...unit.support.health import probe
from ..helpers import wait_until

# The chart's livenessProbe.periodSeconds.
PROBE_PERIOD = 20


class Poison(BaseException):
    """Not an Exception: what would end an informer's thread for good."""


@pytest.fixture
def watching(
    cluster: LocalCluster, namespace: str, install: Install
) -> Iterator[tuple[Controller, ProbeServer]]:
    """A controller of the test's namespace (the chart installed the CRDs)."""
    kube = Kube(cluster.api_client())
    controller = Controller.watching(kube, parse_config({}), namespace=namespace, workers=1)
    server = ProbeServer("127.0.0.1:0", *_probes(Health(threading.Event(), controller)))
    server.start()
    try:
        yield controller, server
    finally:
        controller.stop(timeout=5)
        server.stop()


def _probes(health: Health) -> tuple[Any, Any]:
    return health.ready, health.checks


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_healthz_fails_within_a_probe_period_of_a_dead_informer(
    cluster: LocalCluster, namespace: str, watching: tuple[Controller, ProbeServer]
) -> None:
    controller, server = watching
    [configmaps] = [i for i in controller.informers if i.name.startswith("configmaps")]

    def poisoned(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "poison":
            raise Poison

    configmaps.add_event_handler(ADDED, poisoned)
    assert probe(server, "/readyz")[0] == 503  # not before the caches have synced
    threading.Thread(target=controller.start, daemon=True).start()
    wait_until(lambda: probe(server, "/readyz")[0] == 200, 30, "ready")
    assert probe(server, "/healthz") == (200, "ok\n")
    cluster.kubectl(
        "create", "configmap", "poison", "-n", namespace, "--from-literal=k=v",
    )  # fmt: skip
    cluster.kubectl("label", "configmap", "poison", "-n", namespace, "dlk8s.io/job-name=j")
    died = time.monotonic()
    _, body = wait_until(
        lambda: (answer := probe(server, "/healthz"))[0] == 503 and answer,
        PROBE_PERIOD,
        "/healthz to fail",
    )
    print(f"\n/healthz failed {time.monotonic() - died:.1f}s after the informer died")
    # What failed, not which namespace's: that is in the check's reasons (the log).
    assert "[-]informers failed: reason withheld" in body
    assert namespace not in body
    stopped = f"the informer of configmaps in {namespace} has stopped"
    assert stopped in controller.checks()["informers"]
