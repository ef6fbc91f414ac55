"""Which status writes wait: changes of pod counts only, for at most a batch window."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.statuswrites import StatusWrites, counts_only


def status(states: list[dict[str, int]], phase: str = "Running", state: str = "Running") -> Any:
    return {
        "phase": phase,
        "state": state,
        "conditions": [{"type": "Created", "status": "True"}],
        "replicaStatuses": [
            {"replicaType": role, "state": "Running", "replicasStates": counts}
            for role, counts in zip(("MASTER", "WORKER"), states, strict=False)
        ],
    }


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_counts_only() -> None:
    before = status([{"Running": 1}, {"Pending": 2}])
    assert counts_only(before, status([{"Running": 1}, {"Pending": 1, "Running": 1}]))
    # A pod more or less changes what restart counting reads: not counts only.
    assert not counts_only(before, status([{"Running": 1}, {"Pending": 1}]))
    assert not counts_only(before, status([{"Running": 1}, {"Pending": 3}]))
    assert not counts_only(before, status([{"Running": 1}, {"Running": 2}], phase="Creating"))
    assert not counts_only({}, status([{"Running": 1}, {"Running": 2}]))
    assert not counts_only(before, status([{"Running": 1}]))


def test_a_change_of_counts_waits_for_the_batch_window_from_when_it_was_first_held() -> None:
    clock = Clock()
    writes = StatusWrites(batch=1.0, clock=clock)
    old = status([{"Running": 1}, {"Pending": 2}])
    new = status([{"Running": 1}, {"Pending": 1, "Running": 1}])
    assert writes.hold("uid", old, new) == 1.0
    clock.now += 0.4
    assert writes.hold("uid", old, new) == pytest.approx(0.6)
    clock.now += 0.6
    assert writes.hold("uid", old, new) == 0.0
    writes.written("uid")
    assert writes.hold("uid", old, new) == 1.0  # a new window


def test_other_changes_are_written_at_once() -> None:
    writes = StatusWrites(batch=1.0, clock=Clock())
    old = status([{"Running": 1}, {"Pending": 2}], phase="Creating")
    assert writes.hold("uid", old, status([{"Running": 1}, {"Running": 2}])) == 0.0
    finished = status([{"Succeeded": 1}, {"Running": 2}], phase="CleanUp", state="Succeeded")
    assert writes.hold("uid", old, finished) == 0.0
