"""/healthz and /readyz mean something (issue 14, defect 3): a dead informer
thread or a wedged worker fails /healthz; /readyz waits for synced caches,
counts a standby as ready, and turns false while stopping.

The endpoints are served for real (runtime.serving.ProbeServer on
127.0.0.1); the controller runs over fakes of our own client wrapper.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s.runtime.apiresources import JOB_RESOURCES, resource_for
from dlk8s.runtime.client import Listing
from dlk8s.runtime.controller import Controller, JobKey
from dlk8s.runtime.health import Health
from dlk8s.runtime.informer import ADDED, Cache, Informer
from dlk8s.runtime.serving import ProbeServer

from ..support.fakes import RecordingKube, ScriptedListWatch, ScriptedStream, event, pod
from ..support.health import failing, probe
from ..support.worlds import CONFIG, tfjob

PODS = resource_for("v1", "Pod")


@pytest.fixture
def served() -> Iterator[Any]:
    servers: list[ProbeServer] = []

    def serve(health: Health) -> ProbeServer:
        server = ProbeServer("127.0.0.1:0", health.ready, health.checks)
        server.start()
        servers.append(server)
        return server

    yield serve
    for server in servers:
        server.stop()


class Poison(BaseException):
    """What kills an informer's thread: not an Exception, so nothing catches it."""


# The thread's death is what the test is about; pytest would report it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_healthz_fails_once_an_informer_thread_has_died(served: Any) -> None:
    listing = Listing([], "1")
    source = ScriptedListWatch([listing, ScriptedStream([event(ADDED, pod("poison", "2"))])])
    informer = Informer(source, PODS)

    def die(obj: dict[str, Any]) -> None:
        raise Poison

    informer.add_event_handler(ADDED, die)
    controller = Controller(RecordingKube(), CONFIG, {}, [informer], workers=1)
    server = served(Health(threading.Event(), controller))
    try:
        controller.start()
        deadline = time.monotonic() + 10
        while informer.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        code, body = probe(server, "/healthz")
        assert code == 503
        assert "[-]informers failed: reason withheld" in body
        assert "pods" not in body  # what failed, not which: the detail goes to the log
        assert "the informer of pods has stopped" in failing(controller.checks())
    finally:
        controller.stop(timeout=2)


class BlockingKube(RecordingKube):
    """Creates hang until released: a wedged call."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.entered.set()
        self.release.wait(30)
        return super().create(obj)


def test_healthz_fails_while_a_pass_runs_far_too_long(served: Any) -> None:
    kube = BlockingKube()
    caches = {kind: Cache() for kind in JOB_RESOURCES}
    job = tfjob()
    job["metadata"]["resourceVersion"] = "1"
    caches["TFJob"].put("ns/example-job", job)
    controller = Controller(kube, CONFIG, caches, workers=1, stuck_after=0.3)
    server = served(Health(threading.Event(), controller))
    controller.start()
    try:
        assert probe(server, "/healthz")[0] == 200
        controller.queue.add(JobKey("TFJob", "ns", "example-job"))
        assert kube.entered.wait(5)
        time.sleep(0.5)
        code, body = probe(server, "/healthz")
        assert code == 503
        assert "[-]passes failed: reason withheld" in body
        assert "example-job" not in body
        stuck = failing(controller.checks())
        assert any("a pass of TFJob/ns/example-job has run for" in p for p in stuck)
        kube.release.set()
        deadline = time.monotonic() + 5
        while probe(server, "/healthz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert probe(server, "/healthz")[0] == 200
    finally:
        kube.release.set()
        controller.stop(timeout=2)


def test_healthz_fails_once_a_worker_has_exited(served: Any) -> None:
    controller = Controller(RecordingKube(), CONFIG, {}, [], workers=1)
    server = served(Health(threading.Event(), controller))
    controller.start()
    controller.queue.shut_down()  # the worker returns, while nobody stopped the controller
    deadline = time.monotonic() + 5
    while probe(server, "/healthz")[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    code, body = probe(server, "/healthz")
    assert code == 503
    assert "[-]workers failed: reason withheld\n" in body
    assert "[+]informers ok\n" in body
    assert "worker-0 has exited" in failing(controller.checks())


class FakeController:
    def __init__(self) -> None:
        self.synced = False

    def checks(self) -> dict[str, list[str]]:
        return {"informers": ["the informer of pods has stopped"]}


class FakeElection:
    def __init__(self, standing_by: bool) -> None:
        self.standing_by = standing_by

    def problems(self) -> list[str]:
        return []


def test_readyz_waits_for_the_caches_and_turns_false_when_stopping() -> None:
    stop = threading.Event()
    controller = FakeController()
    health = Health(stop, controller)
    assert not health.ready()
    controller.synced = True
    assert health.ready()
    stop.set()
    assert not health.ready()


def test_a_standby_is_ready_and_healthy_without_running_informers() -> None:
    health = Health(threading.Event(), FakeController(), FakeElection(standing_by=True))
    assert health.ready()
    assert failing(health.checks()) == []
    leader = Health(threading.Event(), FakeController(), FakeElection(standing_by=False))
    assert failing(leader.checks()) == ["the informer of pods has stopped"]
