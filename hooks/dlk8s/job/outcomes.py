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
    # A pending pod a container of which waits on what only a person can
    # fix (a missing Secret, an image that cannot be pulled): detail says
    # what (waiting_cause).
    not_starting: bool = False

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
        detail = _ended(container, code, terminated)
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
    if phase in (None, PENDING):
        cause = waiting_cause(pod)
        if cause:
            return PodOutcome(PENDING, detail=cause, not_starting=True)
    if phase in _POD_PHASES:
        return PodOutcome(phase, detail=f"pod {phase.lower()}")
    return PodOutcome(PENDING, detail="pod pending")


# How the kubelet says a container could not be started at all: the runtime
# refused it (an executable not found, a mount that failed).
_NOT_STARTED: Final = frozenset({"StartError", "ContainerCannotRun"})
# The kubelet's words for an end the exit code already tells.
_PLAIN_ENDS: Final = frozenset({"", "Error", "Completed"})
# A runtime's message keeps its cause at the end ("... exec: \"python\":
# executable file not found in $PATH: unknown"): this much of that end.
MESSAGE_CHARS: Final = 240


def _ended(container: str, code: object, terminated: Obj) -> str:
    reason = terminated.get("reason")
    reason = reason if is_text(reason) else ""
    if reason in _NOT_STARTED:
        message = terminated.get("message")
        said = f": {_tail(message)}" if is_text(message) else ""
        return f"container {container} could not start ({reason}, exit code {code}){said}"
    if reason not in _PLAIN_ENDS:
        return f"container {container} exited with code {code} ({reason})"
    return f"container {container} exited with code {code}"


def _tail(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= MESSAGE_CHARS else "..." + message[-MESSAGE_CHARS:]


# Waiting reasons that say only that a container is on its way.
ON_ITS_WAY: Final = frozenset({"", "ContainerCreating", "PodInitializing"})


def waiting_cause(pod: Obj) -> str:
    """What keeps a pending pod's containers from starting, in the kubelet's
    words ("container tensorflow is waiting: ImagePullBackOff: ..."), or ""
    while they are only on their way. Init containers (sidecars among them)
    first: the others wait for them."""
    status = as_dict(pod.get("status"))
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in as_list(status.get(key)):
            waiting = as_dict(dig(entry, "state", "waiting"))
            reason = waiting.get("reason")
            if not is_text(reason) or reason in ON_ITS_WAY:
                continue
            message = waiting.get("message")
            said = f": {_tail(message)}" if is_text(message) else ""
            return f"container {as_dict(entry).get('name')} is waiting: {reason}{said}"
    return ""


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
