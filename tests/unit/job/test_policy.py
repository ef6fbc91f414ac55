"""Exit codes, restart decisions and replica status."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.job.outcomes import (
    Decision,
    ExitClass,
    PodOutcome,
    classify_exit_code,
    counted_pods,
    decide,
    phase_counts,
    pod_outcome,
    replica_state,
    restart_delay,
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


def test_counted_pods_reads_a_previous_status_leniently() -> None:
    statuses = [
        None,
        {"replicaType": ["PS"], "replicasStates": {"Running": 7}},
        {"replicaType": "PS", "replicasStates": {"Running": 2, "Failed": 1, "Bad": "x", "Neg": -4}},
        {"replicaType": "PS", "replicasStates": {"Running": 5}},  # the first entry of a role counts
        {"replicaType": "WORKER", "replicasStates": "garbage"},
    ]
    assert counted_pods(statuses) == {"PS": 3, "WORKER": 0}
    assert counted_pods("garbage") == {}
