"""A job's conditions: read leniently, set without needless changes, in a fixed order."""

from __future__ import annotations

from dlk8s.job.conditions import (
    clean_conditions,
    clear_condition,
    finished_conditions,
    set_condition,
)


def test_a_condition_transition_time_moves_only_when_its_status_flips() -> None:
    conditions = set_condition([], "Running", True, "Running", "m1", "T1")
    assert conditions == [
        {
            "type": "Running",
            "status": "True",
            "reason": "Running",
            "message": "m1",
            "lastTransitionTime": "T1",
            "lastUpdateTime": "T1",
        }
    ]
    assert set_condition(conditions, "Running", True, "Running", "m1", "T2") is conditions
    changed = set_condition(conditions, "Running", True, "Running", "m2", "T3")
    assert (changed[0]["lastTransitionTime"], changed[0]["lastUpdateTime"]) == ("T1", "T3")
    flipped = set_condition(changed, "Running", False, "Restarting", "m3", "T4")
    assert (flipped[0]["lastTransitionTime"], flipped[0]["status"]) == ("T4", "False")


def test_clear_condition_does_not_invent_conditions() -> None:
    assert clear_condition([], "Restarting", "Recovered", "m", "T") == []


def test_conditions_keep_a_fixed_order() -> None:
    conditions = set_condition([], "Failed", True, "X", "m", "T")
    conditions = set_condition(conditions, "Created", True, "Y", "m", "T")
    conditions = set_condition(conditions, "Running", False, "Z", "m", "T")
    assert [c["type"] for c in conditions] == ["Created", "Running", "Failed"]


def test_clean_conditions_drops_garbage_and_duplicates() -> None:
    raw = [
        None,
        {"type": "Running", "status": "True"},
        {"status": "x"},
        {"type": "Running"},
        {"type": 3},
    ]
    assert clean_conditions(raw) == [{"type": "Running", "status": "True"}]
    assert clean_conditions({"not": "a list"}) == []


def test_a_finished_job_sets_its_verdict_and_clears_only_what_it_had() -> None:
    running = set_condition([], "Running", True, "Running", "up", "T1")
    failed = finished_conditions(running, False, "ReplicaFailed", "worker 0 failed", "T2")
    assert [(c["type"], c["status"], c["reason"]) for c in failed] == [
        ("Running", "False", "ReplicaFailed"),
        ("Failed", "True", "ReplicaFailed"),
    ]
    assert failed[0]["message"] == "The job has finished"
    succeeded = finished_conditions([], True, "Succeeded", "master 0 succeeded", "T2")
    assert [(c["type"], c["message"]) for c in succeeded] == [("Succeeded", "master 0 succeeded")]
