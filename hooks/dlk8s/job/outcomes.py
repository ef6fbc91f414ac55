"""Job semantics shared by every kind.

- What a pod's end means: the kind's main container decides (exit 0 is
  success; under restartPolicy ExitCode 1-127 is permanent and 128-255, or a
  pod that failed without an exit code such as an eviction, is retryable).
- What to do about it (decide): finish the job, restart the replica by
  recreating its pod, or leave it. A failure is judged by podFailurePolicy
  (failurepolicy), whose default rules ask decide for the exit-code classes.
- How replicas report it: replicaStatuses (the conditions are conditions.py's).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from dlk8s.job.objects import (
    Obj,
    ReplicaStatus,
    as_dict,
    as_int,
    as_list,
    dig,
    is_int,
    is_text,
    parse_time,
)
from dlk8s.job.vocabulary import RestartPolicy

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
    status = as_dict(pod.get("status"))
    statuses = as_list(status.get("containerStatuses"))
    main = next((s for s in statuses if isinstance(s, dict) and s.get("name") == container), None)
    terminated = dig(main, "state", "terminated")
    if isinstance(terminated, dict):
        code = terminated.get("exitCode")
        code = code if is_int(code) else None
        finished_at = parse_time(terminated.get("finishedAt"))
        detail = f"container {container} exited with code {code}"
        # The main container decides, even while a sidecar keeps the pod up
        # (pods are restartPolicy Never, so it will not run again).
        if code == 0:
            return PodOutcome(SUCCEEDED, 0, finished_at, detail)
        return PodOutcome(FAILED, code, finished_at, detail)
    phase = status.get("phase")
    if phase == FAILED:
        # Failed without an exit code: evicted, or stopped from outside.
        words = [w for w in (status.get("reason"), status.get("message")) if is_text(w)]
        detail = "pod failed" + (": " + " ".join(words) if words else " without an exit code")
        return PodOutcome(FAILED, None, None, detail)
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


class Decision:
    NONE: Final = "None"  # still pending or running
    SUCCEED_JOB: Final = "SucceedJob"
    FAIL_JOB: Final = "FailJob"
    RESTART: Final = "Restart"  # recreate the pod, counting a restart
    # Recreate the pod without counting a restart: a disruption, or a
    # failure an Ignore rule of podFailurePolicy forgives (failurepolicy).
    REPLACE: Final = "Replace"
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


def replica_status(role: str, replicas: int, outcomes: Iterable[PodOutcome]) -> ReplicaStatus:
    counts = phase_counts(outcomes)
    return ReplicaStatus(
        replicaType=role, state=replica_state(counts, replicas), replicasStates=counts
    )


def counted_pods(replica_statuses: object) -> dict[str, int]:
    """How many pods of each role a previously written status counted."""
    counted: dict[str, int] = {}
    for entry in as_list(replica_statuses):
        role = as_dict(entry).get("replicaType")
        if isinstance(role, str) and role not in counted:
            states = as_dict(entry.get("replicasStates")).values()
            counted[role] = sum(max(0, as_int(n, 0)) for n in states)
    return counted
