"""runtime.client's fence: a write the election does not allow is never sent.

The client is the real one (the kubernetes package's ApiClient), pointed at
a port of 127.0.0.1 where nothing listens: a request that is sent fails with
TransportError, one that is fenced with FencedError before any connection."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from dlk8s.runtime.client import Kube
from dlk8s.runtime.errors import FencedError, TransportError

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}


@pytest.fixture
def kube() -> Iterator[Callable[[Callable[[], bool] | None], Kube]]:
    """Kubes whose API server is a port held bound but not listening: every
    connection to it is refused, and no other process can take it meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{held.getsockname()[1]}"

        def make(may_write: Callable[[], bool] | None) -> Kube:
            return Kube(client.ApiClient(cfg), may_write=may_write)

        yield make


Make = Callable[[Callable[[], bool] | None], Kube]


@pytest.mark.parametrize(
    "write",
    [
        lambda k: k.create(POD),
        lambda k: k.delete("v1", "Pod", "ns", "p"),
        lambda k: k.patch("v1", "Pod", "ns", "p", {"metadata": {"labels": {}}}),
    ],
    ids=["create", "delete", "patch"],
)
def test_a_fenced_write_is_not_sent(kube: Make, write: Callable[[Kube], object]) -> None:
    with pytest.raises(FencedError):
        write(kube(lambda: False))
    with pytest.raises(TransportError) as sent:
        write(kube(lambda: True))
    assert not isinstance(sent.value, FencedError)


def test_reads_go_out_while_writes_are_fenced(kube: Make) -> None:
    with pytest.raises(TransportError) as read:
        kube(lambda: False).get("v1", "Pod", "ns", "p")
    assert not isinstance(read.value, FencedError)


def test_without_an_election_every_write_goes_out(kube: Make) -> None:
    with pytest.raises(TransportError) as sent:
        kube(None).create(POD)
    assert not isinstance(sent.value, FencedError)
