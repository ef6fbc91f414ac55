"""A broken watch resumes from the last event it delivered, not from the list."""

from __future__ import annotations

import json
import threading
from typing import Any

from dlk8s.kube import Kube, Resource


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
