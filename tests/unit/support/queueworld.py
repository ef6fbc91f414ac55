"""A world with Kueue installed, for the tests of queued jobs
(tests/unit/job/test_queued.py) and of jobs MultiKueue dispatches
(test_multikueue.py): the world (worlds.py) holds the job's Workloads and
applies what the operator writes of them (status replacements, merge
patches), and a test plays Kueue by editing a Workload's status as Kueue's
controllers do.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from dlk8s.job.actions import Create, Patch, ReplaceStatus
from dlk8s.job.childnames import short_hash
from dlk8s.job.jobmodel import Observed, QueueFacts
from dlk8s.job.reconcile import Result

from .worlds import STAMP, UID, World, tfjob

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOAD = f"tfjob-example-job-{short_hash(UID, 5)}"
GPU_FLAVOR: dict[str, Any] = {
    "metadata": {"name": "gpu-a"},
    "spec": {
        "nodeLabels": {"pool": "a"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}
FACTS = QueueFacts(flavors={"gpu-a": GPU_FLAVOR})
MASTER_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}}
WORKER_RESOURCES = {"limits": {"nvidia.com/gpu": 1}}


def queued_tfjob(queue: str | None = "q", **spec: Any) -> dict[str, Any]:
    """The seed's example job, its MASTER and WORKER asking for resources."""
    job = tfjob(**spec)
    if queue is not None:
        job["metadata"]["labels"] = {QUEUE_LABEL: queue}
    master, worker = job["spec"]["replicaSpecs"][:2]
    master["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(MASTER_RESOURCES)
    worker["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(WORKER_RESOURCES)
    return job


@dataclass
class QueueWorld(World):
    """The world with Kueue installed: the job's Workloads among its children."""

    facts: QueueFacts | None = field(default_factory=lambda: FACTS)

    def observed(self) -> Observed:
        plain = super().observed()
        workloads = [copy.deepcopy(o) for (k, _), o in self.children.items() if k == "Workload"]
        return replace(plain, workloads=workloads, queueing=self.facts)

    def apply(self, result: Result, graceful: bool = False) -> None:
        super().apply(result, graceful)
        for action in result.actions:
            if isinstance(action, ReplaceStatus):
                name = action.obj["metadata"]["name"]
                self.children[("Workload", name)]["status"] = copy.deepcopy(action.obj["status"])
            elif isinstance(action, Patch) and action.kind == "Workload":
                target = self.children[("Workload", action.name)]
                for part, value in action.patch.items():
                    target.setdefault(part, {}).update(value)
            elif isinstance(action, Patch) and action.kind == self.job["kind"]:
                for field, value in action.patch["metadata"].items():
                    self.job["metadata"].setdefault(field, {}).update(value)

    # --- what Kueue does to the Workload ---------------------------------------

    def workload(self) -> dict[str, Any]:
        """The job's one Workload."""
        [found] = [o for (k, _), o in self.children.items() if k == "Workload"]
        return found

    def set_conditions(self, *conditions: tuple[str, str, str]) -> None:
        """Kueue sets these (type, status, reason) conditions, at NOW."""
        status = self.workload().setdefault("status", {})
        kept = [
            c
            for c in status.get("conditions", [])
            if c["type"] not in {t for t, _, _ in conditions}
        ]
        status["conditions"] = kept + [
            {
                "type": t,
                "status": s,
                "reason": r,
                "message": f"{t} by Kueue",
                "lastTransitionTime": STAMP,
            }
            for t, s, r in conditions
        ]

    def admit(self, counts: dict[str, int] | None = None, flavor: str = "gpu-a") -> None:
        """Kueue reserves quota in ClusterQueue cq and admits every podSet
        (at `counts`, else its count) on `flavor`."""
        pod_sets = self.workload()["spec"]["podSets"]
        self.workload()["status"]["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": ps["name"],
                    "flavors": {"nvidia.com/gpu": flavor, "cpu": flavor},
                    "count": (counts or {}).get(ps["name"], ps["count"]),
                }
                for ps in pod_sets
            ],
        }
        self.set_conditions(
            ("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")
        )


def workload_condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    found = next((c for c in obj["status"].get("conditions", []) if c["type"] == type_), None)
    assert found is not None, obj["status"]
    return found


def workload_creates(result: Result) -> list[dict[str, Any]]:
    return [a.obj for a in result.actions if isinstance(a, Create) and a.obj["kind"] == "Workload"]


def status_writes(result: Result) -> list[dict[str, Any]]:
    return [a.obj for a in result.actions if isinstance(a, ReplaceStatus)]


def queued_world(job: dict[str, Any] | None = None, facts: QueueFacts | None = FACTS) -> QueueWorld:
    """A queued job after its first pass: its Workload created, pending."""
    world = QueueWorld(job or queued_tfjob(), facts=facts)
    world.step()
    world.workload()["status"] = {}
    return world


def admitted_world(job: dict[str, Any] | None = None) -> QueueWorld:
    """A queued job admitted, its pods created and running."""
    world = queued_world(job)
    world.admit()
    world.step()
    world.run()
    world.step()
    return world


def pods_of(result: Result) -> dict[str, dict[str, Any]]:
    return {
        a.obj["metadata"]["name"]: a.obj
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == "Pod"
    }
