"""Exit codes, restart decisions, replica status and conditions."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.job.policy import (
    Decision,
    ExitClass,
    PodOutcome,
    classify_exit_code,
    clean_conditions,
    clear_condition,
    decide,
    phase_counts,
    pod_outcome,
    pod_total,
    replica_state,
    restart_delay,
    set_condition,
)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0, ExitClass.SUCCESS),
        (1, ExitClass.PERMANENT),
        (64, ExitClass.PERMANENT),
        (127, ExitClass.PERMANENT),
        (128, ExitClass.RETRYABLE),
        (137, ExitClass.RETRYABLE),
        (143, ExitClass.RETRYABLE),
        (255, ExitClass.RETRYABLE),
        (None, ExitClass.RETRYABLE),
    ],
)
def test_exit_code_classes(code: int | None, expected: str) -> None:
    assert classify_exit_code(code) == expected


def terminated(code: int, phase: str = "Failed", name: str = "tensorflow") -> dict[str, Any]:
    state = {"terminated": {"exitCode": code, "finishedAt": "2026-01-01T00:00:10Z"}}
    return {"status": {"phase": phase, "containerStatuses": [{"name": name, "state": state}]}}


def test_outcome_reads_the_deciding_container() -> None:
    outcome = pod_outcome(terminated(137), "tensorflow")
    assert (outcome.phase, outcome.exit_code) == ("Failed", 137)
    assert outcome.finished_at is not None
    assert outcome.finished_at.second == 10
    assert "exited with code 137" in outcome.detail


def test_outcome_ignores_other_containers() -> None:
    outcome = pod_outcome(terminated(1, phase="Running", name="sidecar"), "tensorflow")
    assert outcome.phase == "Running"


def test_outcome_of_an_evicted_pod() -> None:
    pod = {"status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}}
    outcome = pod_outcome(pod, "tensorflow")
    assert (outcome.phase, outcome.exit_code) == ("Failed", None)
    assert outcome.detail == "pod failed: Evicted low on memory"


@pytest.mark.parametrize(
    "pod", [{}, {"status": None}, {"status": {"phase": "Weird"}}, {"status": []}]
)
def test_outcome_of_pods_without_a_usable_status_is_pending(pod: dict[str, Any]) -> None:
    assert pod_outcome(pod, "tensorflow").phase == "Pending"


SUCCEEDED = PodOutcome("Succeeded", 0)
PERMANENT = PodOutcome("Failed", 3)
RETRYABLE = PodOutcome("Failed", 137)
RUNNING = PodOutcome("Running")


@pytest.mark.parametrize(
    ("outcome", "policy", "deciding", "expected"),
    [
        (RUNNING, "ExitCode", True, Decision.NONE),
        (SUCCEEDED, "ExitCode", True, Decision.SUCCEED_JOB),
        (PERMANENT, "ExitCode", True, Decision.FAIL_JOB),
        (RETRYABLE, "ExitCode", True, Decision.RESTART),
        (PERMANENT, "OnFailure", True, Decision.RESTART),
        (RETRYABLE, "Never", True, Decision.FAIL_JOB),
        (SUCCEEDED, "Always", True, Decision.SUCCEED_JOB),
        (SUCCEEDED, "ExitCode", False, Decision.LEAVE),
        (PERMANENT, "ExitCode", False, Decision.RESTART),
        (RETRYABLE, "ExitCode", False, Decision.RESTART),
        (SUCCEEDED, "Always", False, Decision.RESTART),
        (PERMANENT, "Never", False, Decision.FAIL_JOB),
        (SUCCEEDED, "Never", False, Decision.LEAVE),
    ],
)
def test_decisions(outcome: PodOutcome, policy: str, deciding: bool, expected: str) -> None:
    assert decide(outcome, policy, deciding) == expected


def test_restart_delay_doubles_up_to_six_minutes() -> None:
    assert [restart_delay(n) for n in range(7)] == [10, 20, 40, 80, 160, 320, 360]
    assert restart_delay(10_000) == 360


def test_phase_counts_and_replica_state() -> None:
    outcomes = [RUNNING, SUCCEEDED, RUNNING, PodOutcome("Pending")]
    assert phase_counts(outcomes) == {"Pending": 1, "Running": 2, "Succeeded": 1}
    assert replica_state({"Running": 2, "Failed": 1}, 3) == "Failed"
    assert replica_state({"Succeeded": 2}, 2) == "Succeeded"
    assert replica_state({"Succeeded": 1, "Pending": 1}, 2) == "Running"
    assert replica_state({"Pending": 2}, 2) == "Unknown"
    assert replica_state({}, 0) == "Unknown"


def test_pod_total_reads_a_previous_status_leniently() -> None:
    statuses = [
        {"replicaType": "PS", "replicasStates": {"Running": 2, "Failed": 1, "Bad": "x", "Neg": -4}}
    ]
    assert pod_total(statuses, "PS") == 3
    assert pod_total(statuses, "WORKER") == 0
    assert pod_total("garbage", "PS") == 0


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
