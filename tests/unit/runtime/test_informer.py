"""The informer's list-and-watch logic, driven through a scripted fake of our
own Kube.list_objects/watch. tests/e2e/kinds/test_informer.py proves the same
against a real kube-apiserver."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from dlk8s.runtime.apiresources import resource_for
from dlk8s.runtime.client import Listing
from dlk8s.runtime.errors import ApiError, GoneError, TransportError
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Backoff, Informer

from ..support.fakes import (
    Answer,
    ScriptedListWatch,
    ScriptedStream,
    api_status,
    bookmark,
    event,
    pod,
)

PODS = resource_for("v1", "Pod")


class Recorder:
    """Every handler call, as (event, name, resourceVersion)."""

    def __init__(self, informer: Informer) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        for kind in (ADDED, MODIFIED, DELETED):
            informer.add_event_handler(kind, self._record(kind))

    def _record(self, kind: str) -> Any:
        def record(obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            self.seen.append((kind, meta["name"], meta.get("resourceVersion")))

        return record


def quick_backoff() -> Backoff:
    return Backoff(initial=0.01, cap=0.02, jitter=0)


def play(script: list[Answer], **options: Any) -> tuple[Informer, ScriptedListWatch, Recorder]:
    """Run the informer until its script is used up (then its watch is quiet)."""
    source = ScriptedListWatch(script)
    informer = Informer(source, PODS, backoff=quick_backoff(), **options)
    recorder = Recorder(informer)
    informer.start()
    try:
        assert source.exhausted.wait(10), f"script not used up: {source.requests}"
    finally:
        informer.stop()
    return informer, source, recorder


def test_a_watch_resumes_from_the_last_event_and_bookmark_not_from_the_list() -> None:
    informer, source, recorder = play(
        [
            Listing([], "10"),
            ScriptedStream([event(ADDED, pod("a", "11")), event(MODIFIED, pod("a", "12"))]),
            ScriptedStream([bookmark("15")]),
        ]
    )
    assert source.requests == [("list", None), ("watch", "10"), ("watch", "12"), ("watch", "15")]
    assert recorder.seen == [(ADDED, "a", "11"), (MODIFIED, "a", "12")]  # no replay
    assert informer.cache.get_by_key("ns/a")["metadata"]["resourceVersion"] == "12"


def test_a_410_in_the_stream_relists_and_tells_handlers_what_changed() -> None:
    informer, source, recorder = play(
        [
            Listing([pod("a", "5"), pod("b", "5")], "5"),
            ScriptedStream([event("ERROR", api_status(410, "Expired", "too old"))]),
            Listing([pod("b", "8"), pod("c", "8")], "8"),
        ]
    )
    assert source.requests == [("list", None), ("watch", "5"), ("list", None), ("watch", "8")]
    assert recorder.seen == [
        (ADDED, "a", "5"),
        (ADDED, "b", "5"),
        (MODIFIED, "b", "8"),
        (ADDED, "c", "8"),
        (DELETED, "a", "5"),  # gone while we were not watching: known once the list ends
    ]
    assert sorted(p["metadata"]["name"] for p in informer.cache.list()) == ["b", "c"]


def test_a_410_as_the_http_status_relists_too() -> None:
    _, source, _ = play(
        [
            Listing([], "5"),
            GoneError(410, "Gone", api_status(410, "Expired")),
            Listing([pod("a", "9")], "9"),
        ]
    )
    assert source.requests == [("list", None), ("watch", "5"), ("list", None), ("watch", "9")]


def test_errors_back_off_and_resume_from_the_same_version_with_one_log_line_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="dlk8s.runtime.informer")
    _, source, recorder = play(
        [
            Listing([pod("a", "5")], "5"),
            TransportError("connection refused"),
            ApiError(500, "Internal Server Error", api_status(500, "InternalError")),
            ScriptedStream([], then=TransportError("connection reset")),
            ScriptedStream([event(MODIFIED, pod("a", "7"))]),
        ]
    )
    assert source.requests == [("list", None), *[("watch", "5")] * 4, ("watch", "7")]
    assert recorder.seen == [(ADDED, "a", "5"), (MODIFIED, "a", "7")]
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert lines == [
        ("WARNING", "watch broken; retrying with back-off"),
        ("INFO", "watch recovered"),
    ]


def test_a_watch_that_closes_at_once_and_empty_is_a_failure_not_a_spin(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, source, _ = play([Listing([], "3"), ScriptedStream([]), ScriptedStream([])])
    assert source.requests == [("list", None), *[("watch", "3")] * 3]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "watch broken; retrying with back-off"
    ]


def test_a_failing_list_is_retried_and_nothing_is_synced_before_it_succeeds() -> None:
    source = ScriptedListWatch(
        [TransportError("refused"), TransportError("refused"), Listing([pod("a", "2")], "2")]
    )
    informer = Informer(source, PODS, backoff=Backoff(initial=0.2, cap=0.2, jitter=0))
    informer.start()
    try:
        assert not informer.has_synced()
        assert informer.wait_synced(5)
        assert source.requests[:3] == [("list", None)] * 3
    finally:
        informer.stop()


def test_synced_means_every_listed_object_reached_the_handlers() -> None:
    source = ScriptedListWatch([Listing([pod(f"p{i}", "5") for i in range(200)], "5")])
    informer = Informer(source, PODS)
    seen: list[str] = []

    def slow_handler(obj: dict[str, Any]) -> None:
        time.sleep(0.001)  # handlers run one by one on the informer's thread
        seen.append(obj["metadata"]["name"])

    informer.add_event_handler(ADDED, slow_handler)
    informer.start()
    try:
        assert informer.wait_synced(10)
        assert len(seen) == 200  # a controller's workers may start now
    finally:
        informer.stop()


def test_a_transform_slims_the_cache_but_handlers_get_the_whole_object() -> None:
    def slim(obj: dict[str, Any]) -> Any:
        name = obj["metadata"]["name"]
        return None if name.startswith("skip") else name.upper()

    informer, _, recorder = play(
        [
            Listing([pod("a", "5"), pod("skip-me", "5")], "5"),
            ScriptedStream([event(DELETED, pod("a", "6")), event(ADDED, pod("b", "7"))]),
        ],
        transform=slim,
    )
    assert sorted(informer.cache.list()) == ["B"]
    assert informer.cache.get_by_key("ns/skip-me") is None
    assert recorder.seen == [
        (ADDED, "a", "5"),
        (ADDED, "skip-me", "5"),
        (DELETED, "a", "6"),
        (ADDED, "b", "7"),
    ]


def test_a_relist_of_a_transformed_cache_still_reports_deletes_by_name() -> None:
    _, _, recorder = play(
        [
            Listing([pod("a", "5")], "5"),
            GoneError(410, "Gone", {}),
            Listing([], "9"),
        ],
        transform=lambda obj: 1,
    )
    assert recorder.seen == [(ADDED, "a", "5"), (DELETED, "a", None)]


def test_a_list_comes_in_pages_and_the_watch_starts_where_the_last_page_ends() -> None:
    informer, source, recorder = play(
        [
            Listing([pod("a", "3"), pod("b", "4")], "5", continue_token="next-1"),
            Listing([pod("c", "5")], "5"),
            ScriptedStream([event(ADDED, pod("d", "6"))]),
        ],
        page_size=2,
    )
    assert source.requests == [("list", None), ("list", "next-1"), ("watch", "5"), ("watch", "6")]
    assert [name for _, name, _ in recorder.seen] == ["a", "b", "c", "d"]
    assert len(informer.cache.list()) == 4


def test_a_relist_in_pages_reports_what_the_whole_list_lacks() -> None:
    _, _, recorder = play(
        [
            Listing([pod("a", "5"), pod("b", "5")], "5"),
            GoneError(410, "Gone", {}),
            Listing([pod("b", "9")], "9", continue_token="more"),
            Listing([pod("c", "9")], "9"),
        ],
        page_size=1,
    )
    assert recorder.seen[2:] == [(MODIFIED, "b", "9"), (ADDED, "c", "9"), (DELETED, "a", "5")]


def test_handlers_can_get_what_the_cache_keeps_one_copy_for_both() -> None:
    kept: list[dict[str, Any]] = []
    source = ScriptedListWatch(
        [
            Listing([pod("a", "5", labels={"x": "y"})], "5"),
            ScriptedStream([event(MODIFIED, pod("a", "6", labels={"x": "z"}))]),
            GoneError(410, "Gone", {}),
            Listing([], "9"),
        ]
    )

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": obj["metadata"]["name"], "labels": obj["metadata"]["labels"]}}

    informer = Informer(
        source, PODS, backoff=quick_backoff(), transform=slim, handlers_get_kept=True
    )
    for kind in (ADDED, MODIFIED, DELETED):
        informer.add_event_handler(kind, kept.append)
    informer.start()
    try:
        assert source.exhausted.wait(10)
    finally:
        informer.stop()
    assert [k["metadata"]["labels"]["x"] for k in kept] == ["y", "z", "z"]
    assert all("resourceVersion" not in k["metadata"] for k in kept)
    assert kept[1] is kept[2]  # the vanished object is reported as the cache kept it


def test_a_failing_handler_neither_stops_the_watch_nor_the_other_handlers() -> None:
    source = ScriptedListWatch(
        [
            Listing([], "1"),
            ScriptedStream([event(ADDED, pod("a", "2")), event(ADDED, pod("b", "3"))]),
        ]
    )
    informer = Informer(source, PODS)

    def broken(obj: dict[str, Any]) -> None:
        raise RuntimeError("bug in a handler")

    informer.add_event_handler(ADDED, broken)
    recorder = Recorder(informer)
    informer.start()
    try:
        assert source.exhausted.wait(5)
    finally:
        informer.stop()
    assert recorder.seen == [(ADDED, "a", "2"), (ADDED, "b", "3")]
    assert source.requests[-1] == ("watch", "3")


def test_stop_returns_at_once_from_a_quiet_watch() -> None:
    source = ScriptedListWatch([Listing([], "1")])
    informer = Informer(source, PODS)
    informer.start()
    assert source.exhausted.wait(5)  # now blocked in the read of a quiet watch
    # The scripted watch never ends by itself: the thread is gone only if
    # stop closed the stream under the blocked read.
    informer.stop(timeout=5)
    assert "informer-pods" not in [t.name for t in threading.enumerate()]


def test_backoff_doubles_to_its_cap_and_starts_over_after_a_healthy_while() -> None:
    now = [0.0]
    backoff = Backoff(jitter=0, clock=lambda: now[0])
    waits = []
    for _ in range(8):
        waits.append(backoff.next())
        now[0] += 1
    assert waits == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    now[0] += 121  # two healthy minutes
    assert backoff.next() == 0.8


def test_backoff_jitter_spreads_waits_up_to_double_within_the_cap() -> None:
    assert Backoff(rand=lambda: 0.5).next() == pytest.approx(1.2)
    high = Backoff(rand=lambda: 1.0)
    assert [round(high.next(), 1) for _ in range(6)][-2:] == [25.6, 30.0]
