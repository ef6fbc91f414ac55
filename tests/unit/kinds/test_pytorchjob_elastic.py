"""An elastic PyTorchJob sized as the autoscaler (or a user) asks: the WORKER
count from the annotation dlk8s.io/workers, kept within elasticPolicy's
bounds, new WORKERs behind the admission gate until the job has a count,
and nothing in any pod's environment moving with the count.

Expected values come from docs/kinds.md (the annotations, the
"Scaled from A to B workers: <reason>" status line, highest indices go
first), never from an output.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dlk8s.job.actions import Patch
from dlk8s.job.config import Admission, parse_config

from ..support.paddle import PaddleWorld
from ..support.worlds import creates, deletes, events, replica_job, started

UID = "9a7c0e11-0000-4000-8000-00000000b002"
CONFIG = parse_config({})


def ptjob(roles: dict[str, int], low: int = 1, high: int = 4) -> dict[str, Any]:
    pytorch = {"name": "pytorch", "image": "torch:2"}
    policy = {"minReplicas": low, "maxReplicas": high}
    return replica_job(
        "PyTorchJob",
        roles,
        role_field="pytorchReplicaType",
        main=pytorch,
        uid=UID,
        elasticPolicy=policy,
    )


class TorchWorld(PaddleWorld):
    """The reconcile world with pod patches applied (PaddleWorld's), and the
    autoscaler's annotations of an elastic PyTorchJob."""

    def scale(self, count: object, reason: str | None = None) -> None:
        """The count annotation, as anyone who may edit the job writes it."""
        annotations = self.job["metadata"].setdefault("annotations", {})
        annotations["dlk8s.io/workers"] = str(count)
        if reason is not None:
            annotations["dlk8s.io/workers-reason"] = reason

    def autoscale(self, count: int, reason: str) -> None:
        """The count, as the autoscaler of the operator's process gives it."""
        assert self.config.admission is not None
        self.config.admission.given.add(self.job["metadata"]["uid"])
        self.scale(count, reason)


def running(job: dict[str, Any], config: Any = CONFIG) -> TorchWorld:
    return started(TorchWorld(job, config=config))


def workers(world: TorchWorld) -> list[str]:
    return [name for name in world.pods() if "-worker-" in name]


def env(pod: dict[str, Any]) -> list[dict[str, Any]]:
    [main] = [c for c in pod["spec"]["containers"] if c["name"] == "pytorch"]
    env: list[dict[str, Any]] = main.get("env", [])
    return env


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates", [])]


# --- the count ----------------------------------------------------------------------


def test_the_annotation_sets_the_worker_count_and_the_status_says_why() -> None:
    world = running(ptjob({"WORKER": 2}))
    assert world.job["status"]["workers"] == 2  # the entry's replicas, until asked
    world.scale(3, "3: room on the nodes")
    result = world.step()
    assert creates(result, "Pod") == ["j-worker-2"]
    assert deletes(result) == []
    assert ("Normal", "WorkersScaled") in events(result)
    assert result.status["workers"] == 3
    assert result.status["lastScaleReason"] == "Scaled from 2 to 3 workers: room on the nodes"
    world.run()
    world.settle()

    world.scale(1)
    result = world.step()
    assert deletes(result, "Pod") == ["j-worker-1", "j-worker-2"]  # highest first
    assert result.status["lastScaleReason"] == (
        "Scaled from 3 to 1 workers: set by the dlk8s.io/workers annotation"
    )
    world.settle()
    assert workers(world) == ["j-worker-0"]
    assert (world.job["status"]["restartCount"], world.job["status"]["state"]) == (0, "Running")


def test_the_count_stays_within_the_bounds_and_the_annotation_wins_over_replicas() -> None:
    world = running(ptjob({"MASTER": 1, "WORKER": 2}, low=2, high=5))
    for asked, expected in (("100", 5), ("1", 2), ("4", 4), ("lots", 2), ("3", 3)):
        world.scale(asked)
        world.settle()
        world.run()
        world.settle()
        assert len(workers(world)) == expected, asked
        assert world.job["status"]["workers"] == expected, asked
    # Once the autoscaler has given a count, the entry's replicas no longer move it.
    world.job["spec"]["replicaSpecs"][1]["replicas"] = 5
    world.settle()
    assert len(workers(world)) == 3
    assert world.pods()[0] == "j-master-0"


def test_a_static_job_ignores_the_annotation() -> None:
    job = ptjob({"MASTER": 1, "WORKER": 2})
    del job["spec"]["elasticPolicy"]
    world = running(job)
    world.scale(4)
    world.settle()
    assert workers(world) == ["j-worker-0", "j-worker-1"]
    assert world.job["status"]["workers"] == 2
    assert "lastScaleReason" not in world.job["status"]


def test_nothing_in_a_pod_goes_stale_when_the_autoscaler_moves_the_count() -> None:
    world = running(ptjob({"MASTER": 1, "WORKER": 1}))
    uids = {name: world.pod(name)["metadata"]["uid"] for name in world.pods()}
    before = {name: env(world.pod(name)) for name in world.pods()}
    world.scale(4, "4: room on the nodes")
    result = world.step()
    assert creates(result, "Pod") == ["j-worker-1", "j-worker-2", "j-worker-3"]
    # Nothing of a pod that stays is patched or recreated: no count is in it.
    assert [a for a in result.actions if isinstance(a, Patch)] == []
    world.run()
    world.settle()
    # The new pods are told exactly what the others were.
    for name in ("j-worker-1", "j-worker-2", "j-worker-3"):
        assert env(world.pod(name)) == before["j-worker-0"], name
    world.scale(2)
    world.settle()
    assert workers(world) == ["j-worker-0", "j-worker-1"]
    for name in ("j-master-0", "j-worker-0"):
        assert world.pod(name)["metadata"]["uid"] == uids[name], name
        assert env(world.pod(name)) == before[name], name


# --- the admission gate -------------------------------------------------------------------


def while_nodes_are_kept(job: dict[str, Any]) -> TorchWorld:
    """The job, in a process whose autoscaler keeps nodes for a starving job."""
    admission = Admission()
    admission.closed = True
    return TorchWorld(job, config=replace(CONFIG, admission=admission))


def test_workers_wait_behind_the_gate_only_while_the_autoscaler_keeps_nodes() -> None:
    world = while_nodes_are_kept(ptjob({"MASTER": 1, "WORKER": 2}))
    world.settle()
    # The MASTER is not the autoscaler's to hold back; the WORKERs are.
    assert {n: gates(world.pod(n)) for n in world.pods()} == {
        "j-master-0": [],
        "j-worker-0": ["dlk8s.io/admission"],
        "j-worker-1": ["dlk8s.io/admission"],
    }
    # A gate someone else added is not ours to lift.
    world.pod("j-worker-1")["spec"]["schedulingGates"].insert(0, {"name": "other"})
    world.settle()
    assert gates(world.pod("j-worker-0")) == ["dlk8s.io/admission"]
    world.autoscale(2, "2: admitted at 2 workers")
    world.settle()
    assert {n: gates(world.pod(n)) for n in workers(world)} == {
        "j-worker-0": [],
        "j-worker-1": ["other"],
    }
    # Admitted, the job's new WORKERs are never gated again.
    world.autoscale(3, "3: room for more")
    world.settle()
    assert gates(world.pod("j-worker-2")) == []


def test_no_gate_while_nodes_are_not_kept_or_for_a_job_that_cannot_move() -> None:
    admission = Admission()
    config = replace(CONFIG, admission=admission)
    world = TorchWorld(ptjob({"WORKER": 2}), config=config)
    world.settle()
    assert [gates(world.pod(n)) for n in workers(world)] == [[], []]
    admission.closed = True
    fixed = TorchWorld(ptjob({"WORKER": 2}, low=2, high=2), config=config)
    fixed.settle()
    assert [gates(fixed.pod(n)) for n in workers(fixed)] == [[], []]
    admitted = TorchWorld(ptjob({"WORKER": 2}), config=config)
    admitted.autoscale(2, "2: admitted at 2 workers")
    admitted.settle()
    assert [gates(admitted.pod(n)) for n in workers(admitted)] == [[], []]


def test_a_job_in_a_kueue_queue_is_neither_gated_nor_left_gated() -> None:
    """Kueue sizes a queued job, and the autoscaler never admits it."""
    world = while_nodes_are_kept(ptjob({"WORKER": 2}))
    world.settle()
    assert [gates(world.pod(n)) for n in workers(world)] == [["dlk8s.io/admission"]] * 2
    # (a queue named later: what the operator's default LocalQueue does)
    world.job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "team"
    world.settle()
    assert [gates(world.pod(n)) for n in workers(world)] == [[], []]


def test_a_count_set_by_hand_lifts_no_gate() -> None:
    world = while_nodes_are_kept(ptjob({"WORKER": 2}))
    world.scale(2, "2: admitted at 2 workers")  # a user's, worded as the autoscaler's
    world.settle()
    assert [gates(world.pod(n)) for n in workers(world)] == [["dlk8s.io/admission"]] * 2


def test_without_the_autoscaler_a_gate_left_from_a_run_with_it_is_lifted() -> None:
    closed = Admission()
    closed.closed = True
    world = TorchWorld(ptjob({"WORKER": 2}), config=replace(CONFIG, admission=closed))
    world.settle()
    assert gates(world.pod("j-worker-0")) == ["dlk8s.io/admission"]
    world.config = CONFIG  # restarted with --no-autoscaler
    world.settle()
    assert [gates(world.pod(n)) for n in workers(world)] == [[], []]
