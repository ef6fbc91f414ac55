"""Pods whose containers cannot start: named in the job's status and events,
and not recreated for ever (issue 49).

A container the runtime cannot start (an executable not found) ends at once
with the kubelet's reason StartError and exit code 128: a retryable failure,
recreated after its back-off and counted against backoffLimit, which is 6
when the job leaves it out. A container that waits on what only a person can
fix (a missing Secret, an image that cannot be pulled) keeps its pod
Pending: nothing is recreated, and the job says why it is not running.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dlk8s.job.actions import Create, Delete, Event
from dlk8s.job.outcomes import MESSAGE_CHARS, pod_outcome, waiting_cause
from dlk8s.job.reconcile.view import Result

from ..support.endings import Graveyard
from ..support.worlds import NOW, World, condition, creates, deletes, events, started, tfjob

MASTER, WORKER = "example-job-master-0", "example-job-worker-0"
# What containerd and runc tell the kubelet when a command is not in the image.
RUNC = (
    "failed to create containerd task: failed to create shim task: OCI runtime create"
    ' failed: runc create failed: unable to start container process: exec: "python":'
    " executable file not found in $PATH: unknown"
)


def start_error(world: World, name: str, seconds_ago: float = 0) -> None:
    """The pod's container never started: the kubelet's StartError."""
    ended = (world.now - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {
        "exitCode": 128,
        "reason": "StartError",
        "message": RUNC,
        "startedAt": "1970-01-01T00:00:00Z",
        "finishedAt": ended,
    }
    world.pod(name)["status"] = {
        "phase": "Failed",
        "containerStatuses": [{"name": "tensorflow", "state": {"terminated": terminated}}],
    }


def said(result: Result, reason: str) -> list[str]:
    """The messages of the pass's events of `reason`, those a delete carries included."""
    found = [a.event if isinstance(a, (Create, Delete)) else a for a in result.actions]
    return [e.message for e in found if isinstance(e, Event) and e.reason == reason]


def waiting(world: World, name: str, reason: str, message: str = "") -> None:
    state: dict[str, Any] = {"reason": reason} | ({"message": message} if message else {})
    world.pod(name)["status"] = {
        "phase": "Pending",
        "containerStatuses": [{"name": "tensorflow", "state": {"waiting": state}}],
    }


def test_the_cause_of_a_start_error_is_the_runtime_s_message() -> None:
    world = started(World(tfjob()))
    start_error(world, MASTER)
    outcome = pod_outcome(world.pod(MASTER), "tensorflow")
    assert (outcome.phase, outcome.exit_code) == ("Failed", 128)
    assert outcome.detail == (
        f"container tensorflow could not start (StartError, exit code 128): {RUNC}"
    )


def test_a_long_runtime_message_keeps_its_end_where_the_cause_is() -> None:
    world = started(World(tfjob()))
    start_error(world, MASTER)
    wordy = "wrapped: " * 40 + 'exec: "python": executable file not found in $PATH'
    terminated = world.pod(MASTER)["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated["message"] = wordy
    said = pod_outcome(world.pod(MASTER), "tensorflow").detail.split("128): ", 1)[1]
    assert said == "..." + wordy[-MESSAGE_CHARS:]
    assert len(wordy) > MESSAGE_CHARS


def test_a_container_that_cannot_start_is_named_in_the_status_and_each_event() -> None:
    world = started(Graveyard(tfjob()))
    start_error(world, MASTER)

    result = world.step()  # its back-off first: 10 s
    assert result.requeue_after == pytest.approx(10)
    assert (result.status["phase"], result.status["reason"]) == ("Creating", "Restarting")
    restarting = condition(result.status, "Restarting")
    assert restarting is not None
    cause = restarting["message"]
    assert cause.startswith(f"Recreating MASTER 0 (pod {MASTER}): container tensorflow")
    assert "could not start (StartError, exit code 128)" in cause
    assert cause.endswith("executable file not found in $PATH: unknown")

    world.later(10)
    result = world.step()
    assert deletes(result, "Pod") == [MASTER]
    [restarting] = said(result, "Restarting")
    assert restarting.startswith("Restarting MASTER 0: container tensorflow could not start")
    assert restarting.endswith(f"; deleting pod {MASTER}")

    result = world.step()  # gone: recreated, counted, and not taken for a lost pod
    assert creates(result, "Pod") == [MASTER]
    assert result.status["restartCount"] == 1
    assert said(result, "Recreating") == ["Recreating 1 pod(s) that failed (restarts: 1)"]
    assert ("Warning", "Recreating") not in events(result)
    # While the new pod comes up, the status still says why it was recreated.
    assert condition(result.status, "Restarting")["message"] == cause  # type: ignore[index]


def test_a_pod_gone_without_a_trace_is_still_called_deleted_or_lost() -> None:
    world = started(Graveyard(tfjob()))
    world.vanish(WORKER)
    world.amnesia()  # no tombstone: the operator cannot tell why it went
    result = world.step()
    assert creates(result, "Pod") == [WORKER]
    assert said(result, "Recreating") == ["Recreating 1 pod(s) deleted or lost (restarts: 1)"]
    assert ("Warning", "Recreating") in events(result)


def test_without_a_backoff_limit_the_sixth_restart_is_the_last() -> None:
    job = tfjob()
    assert "runPolicy" not in job["spec"]
    world = started(World(job))
    world.job["status"]["restartCount"] = 6
    start_error(world, MASTER, seconds_ago=3600)
    result = world.step()
    assert (result.status["state"], result.status["reason"]) == ("Failed", "BackoffLimitExceeded")
    failed = condition(result.status, "Failed")
    assert failed is not None
    assert failed["message"].startswith(
        f"MASTER 0 (pod {MASTER}) failed: container tensorflow could not start (StartError"
    )
    assert failed["message"].endswith("1 more pod restart(s) needed after 6, but backoffLimit is 6")


def test_five_restarts_without_a_limit_still_recreate_the_pod() -> None:
    world = started(World(tfjob()))
    world.job["status"]["restartCount"] = 5
    start_error(world, MASTER, seconds_ago=3600)
    result = world.step()
    assert result.status["state"] == "Running"
    assert deletes(result, "Pod") == [MASTER]


def test_a_pod_waiting_on_a_missing_secret_says_so_once() -> None:
    world = World(tfjob())
    world.settle()
    world.run("example-job-ps-0", "example-job-ps-1", WORKER)
    missing = 'secret "creds" not found'
    waiting(world, MASTER, "CreateContainerConfigError", missing)

    result = world.step()
    assert (result.status["phase"], result.status["reason"]) == ("Creating", "PodNotStarting")
    message = (
        f"MASTER 0 (pod {MASTER}) is not starting: container tensorflow is waiting:"
        f" CreateContainerConfigError: {missing}"
    )
    running = condition(result.status, "Running")
    assert running is not None
    assert (running["status"], running["reason"], running["message"]) == (
        "False",
        "PodNotStarting",
        message,
    )
    assert said(result, "PodNotStarting") == [message]
    assert ("Warning", "PodNotStarting") in events(result)
    assert creates(result, "Pod") == []
    assert deletes(result, "Pod") == []
    world.apply(result)
    again = world.step()  # the same cause: no second event, no new status
    assert said(again, "PodNotStarting") == []
    assert again.status == result.status

    world.run(MASTER)  # someone made the Secret: the kubelet starts it
    result = world.step()
    assert (result.status["phase"], result.status["reason"]) == ("Running", "Running")
    assert condition(result.status, "Running")["status"] == "True"  # type: ignore[index]


def test_a_stuck_pod_beside_a_running_master_leaves_the_job_running() -> None:
    world = World(tfjob())
    world.settle()
    world.run(MASTER)
    waiting(world, WORKER, "ImagePullBackOff", 'Back-off pulling image "nope"')
    result = world.step()
    assert (result.status["phase"], result.status["reason"]) == ("Running", "Running")
    assert said(result, "PodNotStarting") == []


def test_a_new_cause_is_announced_again() -> None:
    world = World(tfjob())
    world.settle()
    waiting(world, MASTER, "ErrImagePull", "pull access denied")
    world.step()
    waiting(world, MASTER, "ImagePullBackOff", 'Back-off pulling image "nope"')
    result = world.step()
    [notice] = said(result, "PodNotStarting")
    assert notice.endswith('is waiting: ImagePullBackOff: Back-off pulling image "nope"')


@pytest.mark.parametrize("reason", ["ContainerCreating", "PodInitializing"])
def test_a_container_on_its_way_is_no_cause(reason: str) -> None:
    world = World(tfjob())
    world.settle()
    waiting(world, MASTER, reason)
    result = world.step()
    assert result.status["reason"] == "Creating"
    assert ("Warning", "PodNotStarting") not in events(result)


def test_an_init_container_s_cause_comes_first() -> None:
    pod = {
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "fetch", "state": {"waiting": {"reason": "ErrImagePull"}}}
            ],
            "containerStatuses": [
                {"name": "tensorflow", "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        }
    }
    assert waiting_cause(pod) == "container fetch is waiting: ErrImagePull"


@pytest.mark.parametrize(
    ("reason", "detail"),
    [
        ("OOMKilled", "container tensorflow exited with code 137 (OOMKilled)"),
        ("Error", "container tensorflow exited with code 137"),
        (None, "container tensorflow exited with code 137"),
    ],
)
def test_the_kubelet_s_reason_is_added_when_it_says_more_than_the_code(
    reason: str | None, detail: str
) -> None:
    terminated: dict[str, Any] = {"exitCode": 137, "finishedAt": NOW.isoformat()}
    if reason:
        terminated["reason"] = reason
    pod = {
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "tensorflow", "state": {"terminated": terminated}}],
        }
    }
    assert pod_outcome(pod, "tensorflow").detail == detail
