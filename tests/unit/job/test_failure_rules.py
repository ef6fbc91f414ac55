"""spec.runPolicy.podFailurePolicy and successPolicy as the operator reads
and checks them (the CRD says the same: tests/e2e/kinds/test_crd_validation.py),
and what the caches keep for them."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.job.failurepolicy import Action, judge, read_rules, worth_remembering
from dlk8s.job.outcomes import pod_outcome
from dlk8s.job.validation import run_policy_problems
from dlk8s.runtime.kept import kept_child

from ..support.endings import failure_rule

ROLES = ("MASTER", "WORKER", "PS")
RULES = "spec.runPolicy.podFailurePolicy.rules"


def problems(run_policy: dict[str, Any], roles: tuple[str, ...] = ROLES) -> list[str]:
    return run_policy_problems({"spec": {"runPolicy": run_policy}}, roles)


def policy(*items: Any) -> dict[str, Any]:
    return {"podFailurePolicy": {"rules": list(items)}}


def test_sound_rules_and_policies_pass() -> None:
    assert problems({"successPolicy": "AllWorkers"}) == []
    assert problems({"successPolicy": "DecidingReplica"}) == []
    assert problems(policy(
        failure_rule("FailJob", codes=[42], roles=["WORKER"]),
        failure_rule("Ignore", conditions=["DisruptionTarget"]),
        failure_rule("Count", not_in=[0, 1], container="tensorflow"),
    )) == []  # fmt: skip


@pytest.mark.parametrize(
    ("run_policy", "expected"),
    [
        ({"successPolicy": "Workers"}, "spec.runPolicy.successPolicy: must be one of"),
        (policy({"action": "Retry", "onExitCodes": {"operator": "In", "values": [1]}}),
         f"{RULES}[0].action: must be one of FailJob, Ignore, Count (got 'Retry')"),
        (policy({"action": "Count"}),
         f"{RULES}[0]: needs exactly one of onExitCodes and onPodConditions"),
        (policy(failure_rule("Count", codes=[1], conditions=["Ready"])),
         f"{RULES}[0]: needs exactly one of onExitCodes and onPodConditions"),
        (policy(failure_rule("Count", codes=[256])),
         f"{RULES}[0].onExitCodes.values: every exit code must be an integer from 0 to 255"),
        (policy(failure_rule("Count", codes=[0, 1])),
         f"{RULES}[0].onExitCodes.values: may not hold 0 with operator In"),
        (policy(failure_rule("Count", codes=[3, 3])),
         f"{RULES}[0].onExitCodes.values: must not repeat an exit code"),
        (policy(failure_rule("Count", codes=[])),
         f"{RULES}[0].onExitCodes.values: must be a non-empty list of exit codes"),
        (policy({"action": "Count", "onExitCodes": {"operator": "Is", "values": [1]}}),
         f"{RULES}[0].onExitCodes.operator: must be In or NotIn (got 'Is')"),
        (policy(failure_rule("Ignore", codes=[1], roles=["CHIEF"])),
         f"{RULES}[0].replicaTypes: 'CHIEF' is not a role of this kind (MASTER, WORKER, PS)"),
        (policy({"action": "Ignore", "onPodConditions": [{"type": "X", "status": "Maybe"}]}),
         f"{RULES}[0].onPodConditions[0].status: must be True, False or Unknown"),
        (policy({"action": "Ignore", "onPodConditions": [{"status": "True"}]}),
         f"{RULES}[0].onPodConditions[0].type: must be a non-empty string"),
        (policy(*[failure_rule("Count", codes=[1])] * 21), f"{RULES}: at most 20 rules"),
        ({"podFailurePolicy": {"rules": "all"}}, f"{RULES}: must be a list"),
    ],
)  # fmt: skip
def test_a_rule_that_makes_no_sense_is_named(run_policy: dict[str, Any], expected: str) -> None:
    found = problems(run_policy)
    assert any(p.startswith(expected) for p in found), found


def test_all_workers_needs_a_worker_role() -> None:
    assert problems({"successPolicy": "AllWorkers"}, ("MASTER", "PSERVER", "TRAINER")) == [
        "spec.runPolicy.successPolicy: AllWorkers needs a WORKER role; this kind has none"
    ]


def test_reading_skips_what_is_unusable_and_keeps_the_order() -> None:
    read = read_rules({"rules": [
        "junk",
        {"action": "Ignore"},
        failure_rule("FailJob", codes=[42, "x"], roles=["WORKER"]),
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
    ]})  # fmt: skip
    assert [(r.index, r.action) for r in read] == [(2, "FailJob"), (3, "Ignore")]
    assert read[0].exit_codes is not None
    assert read[0].exit_codes.values == {42}
    assert read[0].roles == {"WORKER"}
    assert read[1].conditions == (("DisruptionTarget", "True"),)  # status defaults to True
    assert read_rules(None) == read_rules({"rules": 7}) == ()


def pod(code: int | None = None, phase: str = "Running", **condition: str) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if code is not None:
        end = {"exitCode": code, "reason": "Error", "finishedAt": "2026-03-01T12:00:00Z"}
        status["containerStatuses"] = [{"name": "tensorflow", "state": {"terminated": end}}]
    if condition:
        status["conditions"] = [{"status": "True", **condition}]
    return {"status": status}


def judged(obj: dict[str, Any], *items: dict[str, Any], deciding: bool = False) -> Any:
    outcome = pod_outcome(obj, "tensorflow")
    rules = read_rules({"rules": list(items)})
    return judge(obj, outcome, rules, "tensorflow", "WORKER", "ExitCode", deciding)


def test_the_defaults_are_the_seeds_classes_and_disruptions_are_forgiven() -> None:
    assert judged(pod(phase="Running")) is None
    assert judged(pod(0, phase="Succeeded")) is None
    assert judged(pod(1, phase="Failed"), deciding=True).action == Action.FAIL_JOB
    assert judged(pod(1, phase="Failed")).action == Action.COUNT
    assert judged(pod(137, phase="Failed"), deciding=True).action == Action.COUNT
    evicted = judged(pod(phase="Running", type="DisruptionTarget", reason="PreemptionByScheduler"))
    assert (evicted.action, evicted.rule, evicted.disruption) == (
        Action.IGNORE,
        None,
        ("PreemptionByScheduler", ""),
    )
    assert evicted.what == "disrupted (PreemptionByScheduler)"
    assert not evicted.failed_for_good


def test_failed_for_good_is_exit_1_to_127_under_count_or_fail_job() -> None:
    counted = judged(pod(1, phase="Failed"))
    assert counted.failed_for_good
    assert counted.exit_reason == "Error"
    assert not judged(pod(1, phase="Failed"), failure_rule("Ignore", codes=[1])).failed_for_good
    assert not judged(pod(143, phase="Failed")).failed_for_good
    assert judged(pod(2, phase="Failed"), failure_rule("FailJob", codes=[2])).failed_for_good


def test_a_condition_rule_needs_the_status_it_names() -> None:
    rule = {"action": "FailJob", "onPodConditions": [{"type": "ConfigIssue", "status": "False"}]}
    failed = pod(1, phase="Failed", type="ConfigIssue")  # the condition is True
    assert judged(failed, rule).rule is None


def test_the_caches_keep_the_conditions_a_rule_may_read() -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "t"}
    target = {"type": "DisruptionTarget", "status": "True", "reason": "R", "message": "M"}
    running = {"status": {"phase": "Running", "conditions": [ready, target]}}
    assert kept_child(running)["status"]["conditions"] == [target]
    failed = pod(1, phase="Failed")
    failed["status"]["conditions"] = [ready]
    assert kept_child(failed)["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert "conditions" not in kept_child({"status": {"phase": "Pending", "conditions": [ready]}})


def test_a_tombstone_is_kept_of_pods_whose_end_may_matter() -> None:
    assert worth_remembering(pod(1, phase="Failed"))
    assert worth_remembering(pod(0, phase="Succeeded"))
    assert worth_remembering(pod(phase="Running", type="DisruptionTarget"))
    assert not worth_remembering(pod(phase="Running"))
    assert not worth_remembering({})
