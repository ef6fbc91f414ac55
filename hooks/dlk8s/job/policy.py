"""Job semantics shared by every kind.

- What a pod's end means: the kind's main container decides (exit 0 is
  success; under restartPolicy ExitCode 1-127 is permanent and 128-255, or a
  pod that failed without an exit code such as an eviction, is retryable).
- What to do about it (decide): finish the job, restart the replica by
  recreating its pod, or leave it.
- How replicas and the job report it: replicaStatuses and conditions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from dlk8s.job.api import (
    CONDITION_ORDER,
    Obj,
    RestartPolicy,
    as_dict,
    as_int,
    as_list,
    dig,
    parse_time,
)

SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
RUNNING: Final = "Running"
PENDING: Final = "Pending"
UNKNOWN: Final = "Unknown"
_POD_PHASES: Final = (PENDING, RUNNING, SUCCEEDED, FAILED, UNKNOWN)

# Back-off before a failed pod is recreated: 10s, 20s, 40s, ... capped at
# six minutes, the Kubernetes Job controller's numbers.
BACKOFF_BASE_SECONDS: Final = 10.0
BACKOFF_MAX_SECONDS: Final = 360.0


class ExitClass:
    SUCCESS: Final = "Success"
    PERMANENT: Final = "Permanent"
    RETRYABLE: Final = "Retryable"


def classify_exit_code(code: int | None) -> str:
    """0 succeeds, 1-127 is the program's own failure (retrying will not
    help), 128+ means killed by a signal (OOM, preemption): worth retrying.
    No code at all means the pod was stopped from outside (eviction)."""
    if code == 0:
        return ExitClass.SUCCESS
    if code is not None and 1 <= code <= 127:
        return ExitClass.PERMANENT
    return ExitClass.RETRYABLE


@dataclass(frozen=True)
class PodOutcome:
    """Where one pod stands, judged by the kind's main container."""

    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    exit_code: int | None = None
    finished_at: datetime | None = None
    detail: str = ""

    @property
    def finished(self) -> bool:
        return self.phase in (SUCCEEDED, FAILED)


def pod_outcome(pod: Obj, container: str) -> PodOutcome:
    phase = dig(pod, "status", "phase")
    terminated = _terminated(pod, container)
    if terminated is not None:
        code = terminated.get("exitCode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        finished_at = parse_time(terminated.get("finishedAt"))
        detail = f"container {container} exited with code {code}"
        # The main container decides, even while a sidecar keeps the pod up
        # (pods are restartPolicy Never, so it will not run again).
        if code == 0:
            return PodOutcome(SUCCEEDED, 0, finished_at, detail)
        return PodOutcome(FAILED, code, finished_at, detail)
    if phase == FAILED:
        return PodOutcome(FAILED, None, None, _pod_failure(pod))
    if phase in _POD_PHASES:
        return PodOutcome(phase, detail=f"pod {phase.lower()}")
    return PodOutcome(PENDING, detail="pod pending")


def has_stopped(pod: Obj) -> bool:
    """Whether nothing runs in the pod any more. Since Kubernetes 1.27 the
    kubelet reports every container terminated while the phase still says
    Running, until it has torn the pod's sandbox down: the containers, not
    the phase, say it first."""
    if dig(pod, "status", "phase") in (SUCCEEDED, FAILED):
        return True
    statuses = [s for s in as_list(dig(pod, "status", "containerStatuses")) if isinstance(s, dict)]
    return bool(statuses) and all(isinstance(dig(s, "state", "terminated"), dict) for s in statuses)


def _terminated(pod: Obj, container: str) -> Obj | None:
    for status in as_list(dig(pod, "status", "containerStatuses")):
        if isinstance(status, dict) and status.get("name") == container:
            terminated = dig(status, "state", "terminated")
            return terminated if isinstance(terminated, dict) else None
    return None


def _pod_failure(pod: Obj) -> str:
    reason = dig(pod, "status", "reason")
    message = dig(pod, "status", "message")
    words = [w for w in (reason, message) if isinstance(w, str) and w]
    return "pod failed" + (": " + " ".join(words) if words else " without an exit code")


class Decision:
    NONE: Final = "None"  # still pending or running
    SUCCEED_JOB: Final = "SucceedJob"
    FAIL_JOB: Final = "FailJob"
    RESTART: Final = "Restart"
    LEAVE: Final = "Leave"


def decide(outcome: PodOutcome, restart_policy: str, deciding: bool) -> str:
    """What a finished pod means for its job.

    The deciding replica's success is the job's success. Its failure ends the
    job unless the policy retries it. Other replicas are recreated when they
    fail (and, under Always, when they succeed), except under Never, where a
    failure is final and so is the job's.
    """
    if not outcome.finished:
        return Decision.NONE
    if outcome.phase == SUCCEEDED:
        if deciding:
            return Decision.SUCCEED_JOB
        return Decision.RESTART if restart_policy == RestartPolicy.ALWAYS else Decision.LEAVE
    if restart_policy == RestartPolicy.NEVER:
        return Decision.FAIL_JOB
    permanent = classify_exit_code(outcome.exit_code) == ExitClass.PERMANENT
    if deciding and restart_policy == RestartPolicy.EXIT_CODE and permanent:
        return Decision.FAIL_JOB
    return Decision.RESTART


def restart_delay(restart_count: int) -> float:
    doublings = min(max(restart_count, 0), 16)
    return min(BACKOFF_BASE_SECONDS * (1 << doublings), BACKOFF_MAX_SECONDS)


# --- replica statuses --------------------------------------------------------


def phase_counts(outcomes: Iterable[PodOutcome]) -> dict[str, int]:
    """Pods by phase; only phases that occur, as the seed reported them."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.phase] = counts.get(outcome.phase, 0) + 1
    return {phase: counts[phase] for phase in _POD_PHASES if phase in counts}


def replica_state(counts: dict[str, int], replicas: int) -> str:
    if counts.get(FAILED):
        return FAILED
    if replicas > 0 and counts.get(SUCCEEDED, 0) >= replicas:
        return SUCCEEDED
    if counts.get(RUNNING) or counts.get(SUCCEEDED):
        return RUNNING
    return UNKNOWN


def replica_status(role: str, replicas: int, outcomes: Iterable[PodOutcome]) -> Obj:
    counts = phase_counts(outcomes)
    return {"replicaType": role, "state": replica_state(counts, replicas), "replicasStates": counts}


def pod_total(replica_statuses: object, role: str) -> int:
    """How many pods of `role` a previously written status counted."""
    for entry in as_list(replica_statuses):
        if isinstance(entry, dict) and entry.get("replicaType") == role:
            return sum(max(0, as_int(n, 0)) for n in as_dict(entry.get("replicasStates")).values())
    return 0


# --- conditions --------------------------------------------------------------


def clean_conditions(value: object) -> list[Obj]:
    """Conditions of a previous status that are usable, one per type."""
    seen: dict[str, Obj] = {}
    for item in as_list(value):
        if (
            isinstance(item, dict)
            and isinstance(item.get("type"), str)
            and item["type"] not in seen
        ):
            seen[item["type"]] = dict(item)
    return _ordered(list(seen.values()))


def is_true(conditions: list[Obj], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def has_condition(conditions: list[Obj], type_: str) -> bool:
    return any(c.get("type") == type_ for c in conditions)


def set_condition(
    conditions: list[Obj], type_: str, status: bool, reason: str, message: str, now: str
) -> list[Obj]:
    """The list with `type_` set; times move only when something changed, and
    lastTransitionTime only when the status flips, so an unchanged job keeps
    an identical list (and no status write)."""
    value = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == type_), None)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
        value,
        reason,
        message,
    ):
        return conditions
    transition = (
        now if old is None or old.get("status") != value else old.get("lastTransitionTime", now)
    )
    new = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
        "lastUpdateTime": now,
    }
    return _ordered([c for c in conditions if c.get("type") != type_] + [new])


def clear_condition(
    conditions: list[Obj], type_: str, reason: str, message: str, now: str
) -> list[Obj]:
    """Set `type_` to False, but only if it was ever set: a job that never
    restarted shows no Restarting condition at all."""
    if not has_condition(conditions, type_):
        return conditions
    return set_condition(conditions, type_, False, reason, message, now)


def _ordered(conditions: list[Obj]) -> list[Obj]:
    rank = {type_: i for i, type_ in enumerate(CONDITION_ORDER)}
    return sorted(conditions, key=lambda c: rank.get(c["type"], len(rank)))
