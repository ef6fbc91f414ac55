"""What the caches keep of jobs and children (job.kept) is all that reconcile
reads: every pass of these worlds runs on children and jobs as the API server
sends them and on what the caches keep of them, and must come out the same."""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields, replace
from typing import Any

from dlk8s.job.config import Admission
from dlk8s.job.jobmodel import Observed
from dlk8s.job.reconcile import Result, reconcile
from dlk8s.runtime.kept import kept_child, kept_job

from ..support.endings import Graveyard, failure_rule, rules
from ..support.paddle import CONFIG as PADDLE_CONFIG
from ..support.paddle import PaddleWorld, edl_example
from ..support.worlds import PODS, World, started, tfjob

MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:x": {}}}]


def as_served(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server would send it: with what nobody reads."""
    obj = copy.deepcopy(obj)
    obj["metadata"] |= {"managedFields": MANAGED, "creationTimestamp": "2026-03-01T11:00:00Z"}
    if obj.get("kind") == "Pod":
        obj["spec"] = obj.get("spec") or {"containers": [{"name": "tensorflow"}]}
        obj["spec"]["nodeName"] = "kwok-node-0"
        status = obj.setdefault("status", {})
        status |= {"hostIP": "10.0.0.1", "podIP": "10.0.0.2", "qosClass": "BestEffort"}
        ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T11:00:00Z"}
        status["conditions"] = [*status.get("conditions", []), ready]
        for container in status.get("containerStatuses", []):
            container |= {"image": "tf", "ready": False, "restartCount": 0, "lastState": {}}
    if obj.get("kind") == "Service":
        obj["status"] = {"loadBalancer": {}}
    return obj


@dataclass
class Checked(World):
    """A world whose every pass is checked on kept objects too."""

    passes: int = 0

    def reconcile(self) -> Result:
        names = [f.name for f in fields(Observed) if f.name != "queueing"]
        served = Observed(*([as_served(o) for o in getattr(self.observed(), n)] for n in names))
        kept = Observed(*([kept_child(o) for o in getattr(served, n)] for n in names))
        job = as_served(self.job)
        whole = reconcile(copy.deepcopy(job), served, self.config, self.now)
        assert reconcile(kept_job(job), kept, self.config, self.now) == whole
        self.passes += 1
        return whole


@dataclass
class CheckedPaddle(Checked, PaddleWorld):
    pass


@dataclass
class CheckedGraveyard(Checked, Graveyard):
    pass


def test_a_tfjob_from_creation_through_restarts_to_its_end() -> None:
    world = started(Checked(tfjob()))
    world.exit(PODS[1], 137)  # the worker: retryable, recreated after a back-off
    world.step()
    world.later(60)
    world.step(graceful=True)  # deleted, and terminating for a while
    world.step()
    world.vanish(PODS[1])
    world.settle()
    world.run()
    world.vanish(PODS[2])  # a lost PS: recreated and counted
    world.settle()
    world.run()
    world.exit(PODS[0], 0)
    world.settle()
    assert world.job["status"]["state"] == "Succeeded"
    assert world.passes >= 10


def test_pods_that_cannot_start_are_named_from_what_the_caches_keep() -> None:
    world = Checked(tfjob())
    world.settle()
    waiting = {"reason": "CreateContainerConfigError", "message": 'secret "s" not found'}
    world.pod(PODS[0])["status"] = {
        "phase": "Pending",
        "initContainerStatuses": [{"name": "fetch", "state": {"waiting": waiting}}],
        "containerStatuses": [
            {"name": "tensorflow", "state": {"waiting": {"reason": "PodInitializing"}}}
        ],
    }
    world.settle()
    assert world.job["status"]["reason"] == "PodNotStarting"
    world.run()
    world.settle()
    ended = {"exitCode": 128, "reason": "StartError", "message": "exec: not found"}
    world.pod(PODS[1])["status"] = {
        "phase": "Failed",
        "containerStatuses": [{"name": "tensorflow", "state": {"terminated": ended}}],
    }
    world.step()
    restarting = [c for c in world.job["status"]["conditions"] if c["type"] == "Restarting"]
    assert restarting[0]["message"].endswith("(StartError, exit code 128): exec: not found")


def test_pods_that_end_before_their_phase_says_so_through_the_cleanup_grace() -> None:
    world = started(Checked(tfjob()))
    world.exit(PODS[0], 0, phase="Running")  # the master, a sidecar still running
    world.pod(PODS[0])["status"]["containerStatuses"].append(
        {"name": "sidecar", "state": {"running": {"startedAt": "2026-03-01T11:00:00Z"}}}
    )
    world.settle()
    world.exit(PODS[1], 0, phase="Running")  # the worker ends within the grace
    world.settle()
    world.past_cleanup_grace()
    world.settle()
    assert world.job["status"]["phase"] == "Done"
    assert PODS[1] in world.pods()


def test_a_master_evicted_under_restart_policy_never_fails_the_job_saying_why() -> None:
    world = Checked(tfjob())
    world.job["spec"]["replicaSpecs"][0]["restartPolicy"] = "Never"
    started(world)
    evicted = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}
    world.pod(PODS[0])["status"] = evicted
    world.settle()
    assert "Evicted" in world.job["status"]["conditions"][-1]["message"]


def test_a_tfjob_suspended_and_failed() -> None:
    world = Checked(tfjob())
    world.settle()
    world.run()
    world.job["spec"]["runPolicy"] = {"suspend": True}
    world.settle()
    world.job["spec"]["runPolicy"] = {"suspend": False}
    world.settle()
    world.run()
    world.exit(PODS[0], 1)
    world.settle()
    assert world.job["status"]["state"] == "Failed"


def test_a_paddlejob_scaled_up_and_down() -> None:
    world = CheckedPaddle(edl_example(), config=PADDLE_CONFIG)
    world.settle()
    world.run()
    world.scale(4, "room for more")
    world.settle()
    world.run()
    world.scale(2)
    world.settle()
    assert world.passes >= 6


def test_a_paddlejob_admitted_through_the_gate() -> None:
    admission = Admission()
    admission.closed = True
    world = CheckedPaddle(edl_example(), config=replace(PADDLE_CONFIG, admission=admission))
    world.settle()
    gated = world.pod("example-trainer-0")["spec"]["schedulingGates"]
    world.autoscale(2, "2: admitted at 2 trainers")
    world.settle()
    assert (gated, world.pod("example-trainer-0")["spec"]["schedulingGates"]) == (
        [{"name": "dlk8s.io/admission"}],
        [],
    )


def test_a_kept_pod_is_a_fraction_of_the_pod() -> None:
    served = as_served(
        {
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "status": {"phase": "Running"},
        }
    )
    kept = kept_child(served)
    assert kept == {
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"nodeName": "kwok-node-0"},
        "status": {"phase": "Running", "podIP": "10.0.0.2"},
    }
    assert "managedFields" not in kept_job(served)["metadata"]
    assert kept_job(served)["spec"] == served["spec"]


def test_pods_disrupted_or_forgiven_by_a_rule_through_their_tombstones() -> None:
    job = tfjob(runPolicy=rules(failure_rule("Ignore", codes=[3], roles=["WORKER"])))
    world = started(CheckedGraveyard(job))
    world.disrupt(PODS[2], then="terminate")
    world.step()
    world.vanish(PODS[2])
    world.disrupt(PODS[3])
    world.exit(PODS[1], 3)
    world.later(60)
    world.settle()
    world.run()
    world.settle()
    status = world.job["status"]
    assert (status["state"], status.get("restartCount", 0)) == ("Running", 0)
    assert len(status["uncountedRestarts"]) == 3
