"""Which child changes run their job's pass at once (job.urgency): those that
may change the job's phase or state; a job turning Running waits a little
for its other pods; counts alone wait for the batch."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.runtime.urgency import Urgency, changes_state, when


def pod(role: str, index: int = 0, phase: str | None = "Pending", **status: Any) -> dict[str, Any]:
    labels = {"dlk8s.io/replica-type": role, "dlk8s.io/replica-index": str(index)}
    obj: dict[str, Any] = {"metadata": {"name": f"j-{role}-{index}", "labels": labels}}
    if phase is not None:
        obj["status"] = {"phase": phase, **status}
    return obj


def exited(role: str, code: int, index: int = 0, container: str = "tensorflow") -> dict[str, Any]:
    terminated = {"exitCode": code, "finishedAt": "2026-03-01T12:00:00Z"}
    return pod(
        role,
        index,
        "Succeeded" if code == 0 else "Failed",
        containerStatuses=[{"name": container, "state": {"terminated": terminated}}],
    )


def never() -> list[dict[str, Any]]:
    raise AssertionError("the siblings were not needed")


def tf(before: Any, after: Any, siblings: Any = never, group: str = "pods") -> bool:
    return changes_state("TFJob", group, before, after, siblings)


def test_a_child_deleted_or_being_deleted_is_urgent_once() -> None:
    going = pod("worker") | {"metadata": pod("worker")["metadata"] | {"deletionTimestamp": "t"}}
    assert tf(pod("worker"), None)
    assert tf(None, None) is False
    assert tf(pod("worker"), going)
    assert tf(going, going) is False
    assert changes_state("TFJob", "services", {"metadata": {"name": "s"}}, None, never)


def test_a_new_child_waits_for_the_batch() -> None:
    assert tf(None, pod("master", phase="Running")) is False
    assert changes_state("TFJob", "services", None, {"metadata": {"name": "s"}}, never) is False


def test_a_worker_starting_only_moves_counts() -> None:
    up = pod("worker", phase="Running")
    master_up = [pod("master", phase="Running"), up, pod("worker", 1)]
    assert tf(pod("worker"), up, lambda: master_up) is False
    assert tf(pod("worker"), up, lambda: [pod("master"), up]) is False
    assert tf(pod("worker", phase=None), pod("worker")) is False


def test_a_pod_given_its_address_runs_the_pass_soon_for_its_service() -> None:
    addressed = pod("worker", podIP="10.1.0.3")
    up = pod("worker", phase="Running", podIP="10.1.0.3")
    master_down = [pod("master"), up]
    assert when("TFJob", "pods", pod("worker"), addressed, never) is Urgency.SOON
    assert when("TFJob", "pods", pod("worker"), up, lambda: master_down) is Urgency.SOON
    # Had it already: only the counts move.
    assert when("TFJob", "pods", addressed, up, lambda: master_down) is Urgency.LATER
    # The last pod up of a job whose MASTER is up stays at once.
    master_up = [pod("master", phase="Running"), up]
    assert when("TFJob", "pods", pod("worker"), up, lambda: master_up) is Urgency.NOW


def test_the_master_coming_up_is_urgent() -> None:
    running = pod("master", phase="Running")
    assert tf(pod("master"), running, lambda: [running, pod("worker")])


def test_the_master_coming_up_before_its_siblings_waits_a_little_for_them() -> None:
    """One write then says Running with every pod's count (make bench's burst)."""
    running = pod("master", phase="Running")
    starting = [running, pod("worker")]
    everyone = [running, pod("worker", phase="Running")]
    assert when("TFJob", "pods", pod("master"), running, lambda: starting) is Urgency.SOON
    assert when("TFJob", "pods", pod("master"), running, lambda: everyone) is Urgency.NOW


def test_the_last_pod_up_of_a_job_whose_master_is_up_ends_the_wait() -> None:
    last = pod("worker", 1, phase="Running")
    up = [pod("master", phase="Running"), pod("worker", 0, phase="Running"), last]
    assert when("TFJob", "pods", pod("worker", 1), last, lambda: up) is Urgency.NOW
    no_master = [pod("worker", 0, phase="Running"), last]
    assert when("TFJob", "pods", pod("worker", 1), last, lambda: no_master) is Urgency.LATER
    master_down = [pod("master"), *up[1:]]
    assert when("TFJob", "pods", pod("worker", 1), last, lambda: master_down) is Urgency.LATER


def test_a_failure_is_urgent_and_a_worker_success_is_not() -> None:
    running = pod("worker", phase="Running")
    assert tf(running, exited("worker", 137))
    assert tf(running, pod("worker", phase="Failed", reason="Evicted"))
    assert tf(running, exited("worker", 0)) is False


def test_the_master_ending_is_urgent_by_its_container_even_while_the_pod_runs() -> None:
    running = pod("master", phase="Running")
    done = exited("master", 0)
    done["status"]["phase"] = "Running"  # a sidecar keeps the pod up
    assert tf(running, done, lambda: [done])


@pytest.mark.parametrize(
    ("others", "urgent"),
    [(["Running", "Succeeded"], True), (["Running", "Pending"], False)],
)
def test_the_last_trainer_up_is_urgent_not_the_others(others: list[str], urgent: bool) -> None:
    trainers = [pod("trainer", i, phase) for i, phase in enumerate(others, start=1)]
    up = pod("trainer", 0, "Running")
    siblings = [up, *trainers, pod("master", phase="Pending")]
    before = pod("trainer", 0)
    assert changes_state("PaddleJob", "pods", before, up, lambda: siblings) is urgent


def test_deciders_succeed_together_or_the_job_goes_on() -> None:
    done = [exited("trainer", 0, i, container="paddle") for i in range(2)]
    still = pod("trainer", 1, "Running")
    before = pod("trainer", 0, "Running")
    assert changes_state("PaddleJob", "pods", before, done[0], lambda: done)
    assert changes_state("PaddleJob", "pods", before, done[0], lambda: [done[0], still]) is False


def test_a_decider_no_longer_up_is_urgent() -> None:
    assert tf(pod("master", phase="Running"), pod("master", phase="Unknown"))


def test_a_job_of_an_unknown_kind_is_urgent_on_any_phase_change() -> None:
    assert changes_state("Nope", "pods", pod("worker"), pod("worker", phase="Running"), never)


def test_a_change_no_pass_reads_runs_none() -> None:
    bound = pod("worker") | {"metadata": pod("worker")["metadata"] | {"resourceVersion": "9"}}
    assert when("TFJob", "pods", pod("worker"), bound, never) is Urgency.NONE
    up = pod("worker", phase="Running")
    assert when("TFJob", "pods", pod("worker"), up, lambda: [up]) is not Urgency.NONE
    labels = pod("worker")["metadata"]["labels"]
    relabelled = pod("worker") | {"metadata": {"labels": labels | {"team": "a"}}}
    assert when("TFJob", "pods", pod("worker"), relabelled, never) is Urgency.LATER


def test_a_pod_out_of_its_slot_runs_now() -> None:
    """reconcile.stuck takes a pod stuck terminating out of its slot by its
    index label: the pass that creates its replacement is due at once."""
    labels = pod("worker")["metadata"]["labels"]
    out = {k: v for k, v in labels.items() if k != "dlk8s.io/replica-index"}
    detached = pod("worker") | {"metadata": pod("worker")["metadata"] | {"labels": out}}
    assert when("TFJob", "pods", pod("worker"), detached, never) is Urgency.NOW


def test_the_echo_of_the_job_s_own_create_runs_none_unless_its_pod_waits_behind_our_gate() -> None:
    assert when("TFJob", "pods", None, pod("worker"), never, own_create=True) is Urgency.NONE
    service = {"metadata": {"name": "s"}}
    assert when("TFJob", "services", None, service, never, own_create=True) is Urgency.NONE
    # Someone else's create, or a list's, is news to the job.
    assert when("TFJob", "pods", None, pod("worker"), never) is Urgency.LATER
    gated = pod("trainer") | {"spec": {"schedulingGates": [{"name": "dlk8s.io/admission"}]}}
    assert when("PaddleJob", "pods", None, gated, never, own_create=True) is Urgency.LATER
    others = pod("trainer") | {"spec": {"schedulingGates": [{"name": "example.com/x"}]}}
    assert when("PaddleJob", "pods", None, others, never, own_create=True) is Urgency.NONE
    workload = {"metadata": {"name": "w"}, "spec": {}}
    assert when("TFJob", "workloads", None, workload, never, own_create=True) is Urgency.LATER


def test_our_create_first_seen_in_a_list_after_it_moved_on_is_news_to_the_job() -> None:
    """A watch that expired while the pass's pods came up: the list shows
    them first Running, scheduled or ended, which that pass never saw."""
    qos = pod("master", qosClass="BestEffort")
    assert when("TFJob", "pods", None, qos, never, own_create=True) is Urgency.NONE
    running = pod("master", phase="Running", podIP="10.244.0.5")
    assert when("TFJob", "pods", None, running, never, own_create=True) is Urgency.LATER
    scheduled = pod("worker") | {"spec": {"nodeName": "n"}}
    assert when("TFJob", "pods", None, scheduled, never, own_create=True) is Urgency.LATER
    failed = exited("worker", 1)
    assert when("TFJob", "pods", None, failed, never, own_create=True) is Urgency.LATER
