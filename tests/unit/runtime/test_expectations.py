"""A job waits for the caches to show its last changes, but not forever."""

from __future__ import annotations

from dlk8s.job.actions import Create, Delete, Event
from dlk8s.runtime.executor import expected_change
from dlk8s.runtime.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_job_waits_until_every_change_is_observed() -> None:
    clock = Clock()
    exp = Expectations(ttl=30, clock=clock)
    exp.expect("job", {("pods", "j-worker-0"), ("uid", "old-pod")})
    assert exp.wait_left("job") == 30
    exp.observe("job", ("pods", "j-worker-0"))
    assert exp.wait_left("job") > 0
    exp.observe("job", ("uid", "old-pod"))
    assert exp.wait_left("job") == 0


def test_cancelled_change_is_not_waited_for() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("job", {("pods", "exists-already")})
    exp.cancel("job", ("pods", "exists-already"))
    assert exp.wait_left("job") == 0


def test_expectations_expire() -> None:
    clock = Clock()
    exp = Expectations(ttl=30, clock=clock)
    exp.expect("job", {("pods", "lost-event")})
    clock.now += 29
    assert exp.wait_left("job") == 1
    clock.now += 1
    assert exp.wait_left("job") == 0
    assert exp.wait_left("job") == 0


def test_other_jobs_are_not_held() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("a", {("pods", "a-0")})
    assert exp.wait_left("b") == 0


def test_what_each_action_waits_for() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j-ps-0"}}
    assert expected_change(Create(pod)) == ("pods", "j-ps-0")
    assert expected_change(Delete("v1", "Service", "ns", "j-ps-0", "u1")) == ("uid", "u1")
    # No uid: it cannot be told apart from a newer object of the same name.
    assert expected_change(Delete("v1", "Pod", "ns", "j-ps-0", None)) is None
    # Events are not watched.
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}}
    assert expected_change(Create(event)) is None
    assert expected_change(Event("Normal", "Created", "made it")) is None
