"""spec.runPolicy.podFailurePolicy: what a pod that failed, or was
disrupted, means for its job (docs/kinds.md, "What ends a job").

A pod is judged once it has failed (outcomes.pod_outcome: its main container
exited non-zero, or the pod failed without an exit code) or while it
carries the condition DisruptionTarget=True (evicted, preempted, its node
drained or tainted). The first rule that matches decides: the job's own
rules in their order (a rule with replicaTypes only for those roles), then
the defaults, the seeds' exit-code classes written as rules:

  1. onPodConditions DisruptionTarget=True: Ignore;
  2. restartPolicy Never: FailJob;
  3. the deciding role under restartPolicy ExitCode, exit 1-127: FailJob;
  4. anything else: Count.

FailJob fails the job at once; Count recreates the pod and counts a restart
against backoffLimit; Ignore recreates it without counting. A pod whose
main container exited 1-127 under a Count or FailJob rule has failed for
good: the success policy asks after those.

read_rules reads the rules leniently (any input gives rules; a job whose
rules are unusable is failed as InvalidSpec by rules_problems first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dlk8s.job.objects import Obj, as_dict, as_list, as_str, dig, is_int, is_text, show
from dlk8s.job.outcomes import FAILED, SUCCEEDED, Decision, PodOutcome, decide
from dlk8s.job.vocabulary import DISRUPTION_TARGET

RULES_PATH: Final = "spec.runPolicy.podFailurePolicy.rules"
MAX_RULES: Final = 20  # as a batch Job's podFailurePolicy
MAX_CONDITIONS: Final = 20
MAX_EXIT_CODE: Final = 255


class Action:
    FAIL_JOB: Final = "FailJob"
    IGNORE: Final = "Ignore"
    COUNT: Final = "Count"
    ALLOWED: Final = (FAIL_JOB, IGNORE, COUNT)


class Operator:
    IN: Final = "In"
    NOT_IN: Final = "NotIn"
    ALLOWED: Final = (IN, NOT_IN)


CONDITION_STATUSES: Final = ("True", "False", "Unknown")


@dataclass(frozen=True)
class ExitCodes:
    """onExitCodes: a container's exit code in (or not in) a set."""

    container: str | None  # None: the kind's main container
    operator: str  # In | NotIn
    values: frozenset[int]

    def match(self, pod: Obj, main: str) -> bool:
        # A container that succeeded never matches, as in a batch Job.
        code = exit_code(pod, self.container or main)
        if code is None or code == 0:
            return False
        return (code in self.values) == (self.operator == Operator.IN)


@dataclass(frozen=True)
class Rule:
    """One rule of spec.runPolicy.podFailurePolicy.rules."""

    index: int  # its place in the list: messages name it
    action: str  # Action
    roles: frozenset[str] | None  # replicaTypes; None: every role
    exit_codes: ExitCodes | None  # exactly one of these two is set
    conditions: tuple[tuple[str, str], ...]  # onPodConditions: (type, status) pairs

    def match(self, pod: Obj, role: str, main: str) -> bool:
        if self.roles is not None and role not in self.roles:
            return False
        if self.exit_codes is not None:
            return self.exit_codes.match(pod, main)
        held = {(as_str(c.get("type")), as_str(c.get("status"))) for c in pod_conditions(pod)}
        return any(pattern in held for pattern in self.conditions)


@dataclass(frozen=True)
class Judgement:
    """What a failed or disrupted pod means for its job."""

    action: str  # Action
    rule: int | None  # the index of the job's rule that matched; None: a default rule
    what: str  # how the pod ended, e.g. "container tensorflow exited with code 42"
    exit_code: int | None  # its main container's, if it has ended
    exit_reason: str | None  # the kubelet's word for that end, e.g. Error or OOMKilled
    finished_at: str | None  # when its main container ended, as the kubelet wrote it
    # DisruptionTarget's (reason, message) when the pod was disrupted.
    disruption: tuple[str, str] | None

    @property
    def failed_for_good(self) -> bool:
        """Exit 1-127 under a rule that does not forgive it."""
        counted = self.action in (Action.COUNT, Action.FAIL_JOB)
        return counted and self.exit_code is not None and 1 <= self.exit_code <= 127

    @property
    def why(self) -> str:
        if self.rule is None:
            return f"the default rules ({self.action})"
        return f"{RULES_PATH}[{self.rule}] ({self.action})"


def judge(
    pod: Obj,
    outcome: PodOutcome,
    rules: tuple[Rule, ...],
    main: str,
    role: str,
    restart_policy: str,
    deciding: bool,
) -> Judgement | None:
    """The judgement of a pod (present, or its last state once gone) by the
    job's rules and then the defaults; None for a pod that has neither
    failed nor been disrupted (pending, running, or succeeded)."""
    disrupted = disruption(pod)
    if outcome.phase == SUCCEEDED or (outcome.phase != FAILED and disrupted is None):
        return None
    code = outcome.exit_code if outcome.phase == FAILED else None
    end = as_dict(terminated(pod, main))
    what = outcome.detail if outcome.phase == FAILED else f"disrupted ({_words(disrupted)})"

    def judged(action: str, rule: int | None) -> Judgement:
        reason, finished = as_str(end.get("reason")) or None, as_str(end.get("finishedAt")) or None
        return Judgement(action, rule, what, code, reason, finished, disrupted)

    for rule in rules:
        if rule.match(pod, role, main):
            return judged(rule.action, rule.index)
    if disrupted is not None:
        return judged(Action.IGNORE, None)
    # The seeds' exit-code classes, as outcomes.decide has them.
    failing = decide(outcome, restart_policy, deciding) == Decision.FAIL_JOB
    return judged(Action.FAIL_JOB if failing else Action.COUNT, None)


def _words(disrupted: tuple[str, str] | None) -> str:
    reason, message = disrupted or ("", "")
    return ": ".join(w for w in (reason, message) if w) or DISRUPTION_TARGET


def pod_conditions(pod: Obj) -> list[Obj]:
    return [c for c in as_list(dig(pod, "status", "conditions")) if isinstance(c, dict)]


def disruption(pod: Obj) -> tuple[str, str] | None:
    """DisruptionTarget's reason and message, if the pod carries it as True."""
    for condition in pod_conditions(pod):
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return as_str(condition.get("reason")), as_str(condition.get("message"))
    return None


def terminated(pod: Obj, container: str) -> Obj | None:
    for status in as_list(dig(pod, "status", "containerStatuses")):
        if isinstance(status, dict) and status.get("name") == container:
            state = dig(status, "state", "terminated")
            return state if isinstance(state, dict) else None
    return None


def exit_code(pod: Obj, container: str) -> int | None:
    code = dig(terminated(pod, container), "exitCode")
    return code if is_int(code) else None


def worth_remembering(pod: Obj) -> bool:
    """Whether a deleted pod's last state may still decide something: it had
    failed, a container of it had ended, or it was disrupted. The rest
    (running pods a cleanup or a suspension deleted) need no tombstone."""
    if dig(pod, "status", "phase") == FAILED or disruption(pod) is not None:
        return True
    return any(
        isinstance(dig(s, "state", "terminated"), dict)
        for s in as_list(dig(pod, "status", "containerStatuses"))
    )


# --- reading and checking the rules ------------------------------------------------------------


def read_rules(policy: object) -> tuple[Rule, ...]:
    """The usable rules of spec.runPolicy.podFailurePolicy, in order."""
    rules = []
    for index, raw in enumerate(as_list(as_dict(policy).get("rules"))[:MAX_RULES]):
        rule = _read_rule(index, raw)
        if rule is not None:
            rules.append(rule)
    return tuple(rules)


def _read_rule(index: int, raw: object) -> Rule | None:
    if not isinstance(raw, dict) or raw.get("action") not in Action.ALLOWED:
        return None
    roles = raw.get("replicaTypes")
    role_set = frozenset(r for r in as_list(roles) if isinstance(r, str)) if roles else None
    codes = raw.get("onExitCodes")
    if isinstance(codes, dict) and codes.get("operator") in Operator.ALLOWED:
        container = codes.get("containerName")
        values = frozenset(v for v in as_list(codes.get("values")) if is_int(v))
        exits = ExitCodes(container if is_text(container) else None, codes["operator"], values)
        return Rule(index, raw["action"], role_set, exits, ())
    patterns = tuple(
        (c["type"], c.get("status", "True"))
        for c in as_list(raw.get("onPodConditions"))
        if isinstance(c, dict) and is_text(c.get("type"))
    )
    return Rule(index, raw["action"], role_set, None, patterns) if patterns else None


def rules_problems(path: str, policy: object, roles: tuple[str, ...] | None) -> list[str]:
    """What is wrong with spec.runPolicy.podFailurePolicy (at `path`) for a
    kind of these roles (None: any): what the CRD's schema and CEL rules say."""
    if policy is None:
        return []
    if not isinstance(policy, dict):
        return [f"{path}: must be an object"]
    rules = policy.get("rules")
    if not isinstance(rules, list):
        return [f"{path}.rules: must be a list"]
    problems = [f"{path}.rules: at most {MAX_RULES} rules"] if len(rules) > MAX_RULES else []
    for index, rule in enumerate(rules):
        problems += _rule_problems(f"{path}.rules[{index}]", rule, roles)
    return problems


def _rule_problems(path: str, rule: object, roles: tuple[str, ...] | None) -> list[str]:
    if not isinstance(rule, dict):
        return [f"{path}: must be an object"]
    problems = []
    if rule.get("action") not in Action.ALLOWED:
        allowed = ", ".join(Action.ALLOWED)
        problems.append(f"{path}.action: must be one of {allowed} (got {show(rule.get('action'))})")
    problems += _roles_problems(f"{path}.replicaTypes", rule.get("replicaTypes"), roles)
    codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
    if (codes is None) == (conditions is None):
        problems.append(f"{path}: needs exactly one of onExitCodes and onPodConditions")
    if codes is not None:
        problems += _exit_codes_problems(f"{path}.onExitCodes", codes)
    if conditions is not None:
        problems += _conditions_problems(f"{path}.onPodConditions", conditions)
    return problems


def _roles_problems(path: str, value: object, roles: tuple[str, ...] | None) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not value:
        return [f"{path}: must be a non-empty list"]
    if not all(is_text(r) for r in value):
        return [f"{path}: must hold roles (non-empty strings)"]
    wrong = [r for r in value if roles is not None and r not in roles]
    if wrong:
        return [f"{path}: {show(wrong[0])} is not a role of this kind ({', '.join(roles or ())})"]
    return []


def _exit_codes_problems(path: str, codes: object) -> list[str]:
    if not isinstance(codes, dict):
        return [f"{path}: must be an object"]
    problems = []
    container = codes.get("containerName")
    if container is not None and not is_text(container):
        problems.append(f"{path}.containerName: must be a non-empty string")
    if codes.get("operator") not in Operator.ALLOWED:
        problems.append(f"{path}.operator: must be In or NotIn (got {show(codes.get('operator'))})")
    values = codes.get("values")
    if not isinstance(values, list) or not values:
        return [*problems, f"{path}.values: must be a non-empty list of exit codes"]
    if not all(is_int(v) and 0 <= v <= MAX_EXIT_CODE for v in values):
        problems.append(f"{path}.values: every exit code must be an integer from 0 to 255")
    elif len(set(values)) < len(values):
        problems.append(f"{path}.values: must not repeat an exit code")
    if codes.get("operator") == Operator.IN and 0 in values:
        problems.append(f"{path}.values: may not hold 0 with operator In (exit 0 is a success)")
    return problems


def _conditions_problems(path: str, conditions: object) -> list[str]:
    if not isinstance(conditions, list) or not conditions:
        return [f"{path}: must be a non-empty list"]
    if len(conditions) > MAX_CONDITIONS:
        return [f"{path}: at most {MAX_CONDITIONS} conditions"]
    problems = []
    for index, condition in enumerate(conditions):
        where = f"{path}[{index}]"
        if not isinstance(condition, dict) or not is_text(condition.get("type")):
            problems.append(f"{where}.type: must be a non-empty string")
        elif condition.get("status", "True") not in CONDITION_STATUSES:
            problems.append(f"{where}.status: must be True, False or Unknown")
    return problems
