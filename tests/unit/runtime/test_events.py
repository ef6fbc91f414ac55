"""A repeated event is counted on one Event object, as client-go's
EventCorrelator does, not posted anew for each retry (issue 14)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from dlk8s.job.actions import Event
from dlk8s.runtime.events import EventRecorder

from ..support.fakes import RecordingKube
from ..support.worlds import tfjob

JOB = tfjob()
REFUSED = Event("Warning", "FailedCreate", 'pods "example-job-master-0" is forbidden: ...')


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=5)
        return self.now


def test_a_repeat_is_counted_on_the_first_event() -> None:
    kube = RecordingKube()
    recorder = EventRecorder(kube, Clock())
    for _ in range(4):
        recorder.record(JOB, REFUSED)
    [posted] = kube.events
    assert posted["count"] == 4
    assert posted["firstTimestamp"] == "2026-03-01T12:00:05Z"
    assert posted["lastTimestamp"] == "2026-03-01T12:00:20Z"
    assert [c[0] for c in kube.calls] == ["create", "patch", "patch", "patch"]


def test_another_message_or_reason_is_another_event() -> None:
    kube = RecordingKube()
    recorder = EventRecorder(kube, Clock())
    recorder.record(JOB, REFUSED)
    recorder.record(JOB, Event("Warning", "FailedCreate", "exceeded quota: compute"))
    recorder.record(JOB, Event("Normal", "SuccessfulCreate", REFUSED.message))
    assert [e["count"] for e in kube.events] == [1, 1, 1]


def test_an_event_the_api_server_expired_is_posted_again() -> None:
    kube = RecordingKube()
    recorder = EventRecorder(kube, Clock())
    recorder.record(JOB, REFUSED)
    name = kube.events[0]["metadata"]["name"]
    del kube.objects[("events", "ns", name)]  # the event TTL ran out
    recorder.record(JOB, REFUSED)
    recorder.record(JOB, REFUSED)
    assert [e["count"] for e in kube.events] == [1, 2]


def test_only_the_newest_events_are_remembered() -> None:
    kube = RecordingKube()
    recorder = EventRecorder(kube, Clock(), remembered=2)
    for message in ("a", "b", "c", "a"):
        recorder.record(JOB, Event("Warning", "FailedCreate", message))
    assert [e["message"] for e in kube.events] == ["a", "b", "c", "a"]


def test_a_failure_to_post_never_fails_the_caller() -> None:
    kube = RecordingKube()
    kube.failures[("create", "example-job.0")] = ConnectionError("down")
    EventRecorder(kube, Clock()).record(JOB, REFUSED)
    assert kube.events == []


class SlowKube(RecordingKube):
    """Our wrapper's POST of an Event taking a while, as over a busy API server."""

    def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.2)
        return super().create_event(event)


def test_a_repeat_sent_while_the_first_is_being_posted_is_counted_on_it() -> None:
    """Two passes of a job a few ms apart met the same refusal: the second
    event must wait for the first POST, not make a second Event."""
    kube = SlowKube()
    recorder = EventRecorder(kube, Clock())
    threads = [threading.Thread(target=recorder.record, args=(JOB, REFUSED)) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.02)
    for thread in threads:
        thread.join()
    [posted] = kube.events
    assert posted["count"] == 2
    assert [c[0] for c in kube.calls] == ["create", "patch"]
