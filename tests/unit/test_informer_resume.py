"""A broken watch resumes from the last event it delivered, not from the list."""

from __future__ import annotations

import json
import threading
from typing import Any

from dlk8s.runtime.client import Kube, Resource, has_synced, wait_synced


class FakeStream:
    """What urllib3 hands the client's Watch: chunks of JSON lines."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._lines = [json.dumps(e).encode() + b"\n" for e in events]
        self.status = 200

    def stream(self, amt: object = None, decode_content: object = None) -> Any:
        yield from self._lines

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def pod_event(kind: str, name: str, version: str) -> dict[str, Any]:
    return {
        "type": kind,
        "object": {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}},
    }


class FakeKube(Kube):
    def __init__(self) -> None:
        super().__init__(api_client=None)  # type: ignore[arg-type]
        self.watches: list[str | None] = []
        self.done = threading.Event()

    def request(self, method: str, path: str, *, query: Any = (), stream: bool = False, **kw: Any):  # type: ignore[no-untyped-def,override]
        params = dict(query)
        if not stream:
            return {"metadata": {"resourceVersion": "10"}, "items": []}
        self.watches.append(params.get("resourceVersion"))
        if len(self.watches) == 1:  # delivers two events, then the server ends it
            return FakeStream([pod_event("ADDED", "a", "11"), pod_event("MODIFIED", "a", "12")])
        if len(self.watches) == 2:
            return FakeStream(
                [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}]
            )
        self.done.set()
        threading.Event().wait(5)  # then stays quiet
        return FakeStream([])


def test_reconnects_resume_from_the_last_event_and_bookmark() -> None:
    kube = FakeKube()
    informer = kube.informer(Resource("v1", "Pod", "pods"))
    informer.start()
    try:
        assert kube.done.wait(10)
    finally:
        informer._stop_event.set()
    assert kube.watches[:3] == ["10", "12", "15"]
    assert informer.cache.get_by_key("ns/a")["metadata"]["resourceVersion"] == "12"


def test_informers_decode_watch_events_into_plain_dicts() -> None:
    from kubernetes.informer import informer as informer_module

    watch = informer_module.Watch()
    assert type(watch).__module__ == "dlk8s.runtime.client"  # the informers build ours
    sent = pod_event("MODIFIED", "a", "7")
    event = watch.unmarshal_event(json.dumps(sent), None)
    assert event == {**sent, "raw_object": sent["object"]}
    assert watch.unmarshal_event('{"type": "ADDED", "obj', None) is None
    assert watch.unmarshal_event(" ", None) is None


class ListOfMany(FakeKube):
    """Lists 200 pods, then keeps its watch quiet."""

    def request(self, method: str, path: str, *, query: Any = (), stream: bool = False, **kw: Any):  # type: ignore[no-untyped-def,override]
        if not stream:
            items = [pod_event("ADDED", f"p{i}", "5")["object"] for i in range(200)]
            return {"metadata": {"resourceVersion": "5"}, "items": items}
        self.done.wait(5)
        return FakeStream([])


def test_synced_means_every_listed_object_reached_the_handlers() -> None:
    kube = ListOfMany()
    informer = kube.informer(Resource("v1", "Pod", "pods"))
    seen: list[str] = []

    def slow_handler(obj: dict[str, Any]) -> None:
        threading.Event().wait(0.001)  # handlers run one by one on the informer's thread
        seen.append(obj["metadata"]["name"])

    informer.add_event_handler("ADDED", slow_handler)
    informer.start()
    try:
        assert wait_synced(informer, timeout=10)
        assert has_synced(informer)
        assert len(seen) == 200  # a controller's workers may start now
    finally:
        kube.done.set()
        informer._stop_event.set()
