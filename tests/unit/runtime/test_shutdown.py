"""SIGTERM while a new leader is still starting: the shutdown may pass the
controller before its start() is done, so whatever start() has left to do
must not happen after it; and the shutdown keeps one deadline however many
watches hang.

Over fakes of our own client wrapper (list calls that never answer)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s.autoscaler.loop import AutoscalerLoop
from dlk8s.runtime.apiresources import resource_for
from dlk8s.runtime.client import Kube, Listing
from dlk8s.runtime.controller import Controller
from dlk8s.runtime.informer import Informer

from ..support.worlds import CONFIG

PODS = resource_for("v1", "Pod")


class HangingListWatch:
    """A list call that does not answer until released: caches never sync."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.listing = threading.Event()  # a list call is under way

    def list_objects(self, *args: Any, **kwargs: Any) -> Listing:
        self.listing.set()
        self.release.wait(30)
        raise ConnectionError("released")

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never listed, never watched")


@pytest.fixture
def hanging() -> Iterator[HangingListWatch]:
    source = HangingListWatch()
    yield source
    source.release.set()  # the informer threads end


def test_a_controller_stopped_while_its_caches_sync_starts_no_worker(
    hanging: HangingListWatch,
) -> None:
    controller = Controller(Kube(api_client=None), CONFIG, {}, [Informer(hanging, PODS)])  # type: ignore[arg-type]
    starting = threading.Thread(target=controller.start, daemon=True)
    starting.start()
    assert hanging.listing.wait(5)
    controller.stop(timeout=0.5)
    starting.join(5)
    assert not starting.is_alive()  # start() gave up waiting for the caches
    assert not controller.synced
    assert [t for t in threading.enumerate() if t.name.startswith("worker-")] == []


def test_a_controller_stopped_before_it_starts_watches_nothing(hanging: HangingListWatch) -> None:
    informer = Informer(hanging, PODS)
    controller = Controller(Kube(api_client=None), CONFIG, {}, [informer])  # type: ignore[arg-type]
    controller.stop(timeout=0.5)
    starting = threading.Thread(target=controller.start, daemon=True)
    starting.start()
    starting.join(5)
    assert not starting.is_alive()
    assert not hanging.listing.is_set()
    assert not controller.synced


def test_an_autoscaler_stops_within_one_deadline_however_many_watches_hang(
    hanging: HangingListWatch,
) -> None:
    loop = AutoscalerLoop(Kube(api_client=None), jobs=lambda: [])  # type: ignore[arg-type]
    loop._nodes = Informer(hanging, resource_for("v1", "Node"))
    loop._pods = Informer(hanging, PODS)
    given: list[float] = []
    for informer in (loop._nodes, loop._pods):
        informer.stop = _recording(informer.stop, given)  # type: ignore[method-assign]
    loop.start()
    assert hanging.listing.wait(5)
    loop.stop(timeout=1.0)
    # Each watch waits out what it is given: with one deadline, the second
    # gets only what the first left of it (a timeout apiece would give 2 s).
    assert len(given) == 2
    assert sum(given) <= 1.0, given


def _recording(stop: Any, given: list[float]) -> Any:
    def recorded(timeout: float = 5) -> None:
        given.append(timeout)
        stop(timeout)

    return recorded
