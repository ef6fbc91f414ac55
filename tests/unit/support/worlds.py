"""A small in-memory world that plays the I/O side for the pure reconcile.

It executes the actions (creates get a uid and start Pending, deletes honour
the uid precondition, and merge patches a uid in them), writes the status,
and lets a test move pods through their phases. Shared by the reconcile
tests of every kind.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from dlk8s.job.actions import Create, Delete, DeleteJob, Event, Patch
from dlk8s.job.config import parse_config
from dlk8s.job.reconcile import Observed, Result, reconcile
from dlk8s.job.reconcile.finished import CLEANUP_GRACE_SECONDS
from dlk8s.job.reconcile.verdicts import SETTLE_SECONDS

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-03-01T12:00:00Z"
UID = "7f3c2a9e-0000-4000-8000-000000000001"
CONFIG = parse_config(
    {"tfImage": "tensorflow/tensorflow:2.16.1"}, grpc_server_script="print('ps')\n"
)
PODS = ["example-job-master-0", "example-job-worker-0", "example-job-ps-0", "example-job-ps-1"]
CONFIGMAP = "example-job-ps-grpc-server"
_uids = itertools.count(1)
_addresses = itertools.count(2)


def address() -> str:
    """A pod address of its own: the pod has been given its sandbox."""
    n = next(_addresses)
    return f"10.1.{n // 250}.{n % 250 + 1}"


def tfjob(**spec: Any) -> dict[str, Any]:
    """The seed's example job (1 MASTER, 1 WORKER, 2 default PS)."""
    container = {"name": "tensorflow", "image": "gcr.io/tf-on-k8s-dogfood/tf_sample:dc944ff"}
    template = {"spec": {"containers": [container], "restartPolicy": "OnFailure"}}
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": "example-job", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {
            "replicaSpecs": [
                {"replicas": 1, "tfReplicaType": "MASTER", "template": copy.deepcopy(template)},
                {"replicas": 1, "tfReplicaType": "WORKER", "template": copy.deepcopy(template)},
                {"replicas": 2, "tfReplicaType": "PS"},
            ],
            **spec,
        },
    }


@dataclass
class World:
    job: dict[str, Any]
    now: datetime = NOW
    config: Any = CONFIG
    children: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    job_deleted: bool = False

    def observed(self) -> Observed:
        def of(kind: str) -> list[dict[str, Any]]:
            return [copy.deepcopy(o) for (k, _), o in sorted(self.children.items()) if k == kind]

        return Observed(
            of("Pod"),
            of("Service"),
            of("ConfigMap"),
            of("Deployment"),
            networkpolicies=of("NetworkPolicy"),
        )

    def reconcile(self) -> Result:
        return reconcile(copy.deepcopy(self.job), self.observed(), self.config, self.now)

    def apply(self, result: Result, graceful: bool = False) -> None:
        for action in result.actions:
            if isinstance(action, Create):
                self._create(copy.deepcopy(action.obj))
            elif isinstance(action, Delete):
                self._delete(action, graceful)
            elif isinstance(action, Patch) and (action.kind, action.name) in self.children:
                self._patch(action)
            elif isinstance(action, DeleteJob):
                self.job_deleted = True
        self.job["status"] = copy.deepcopy(result.status)

    def step(self, graceful: bool = False) -> Result:
        result = self.reconcile()
        self.apply(result, graceful)
        return result

    def settle(self, steps: int = 6) -> None:
        """Step until a pass changes nothing (and fail if it never does)."""
        for _ in range(steps):
            result = self.reconcile()
            if not result.actions and result.status == self.job.get("status"):
                return
            self.apply(result)
        pytest.fail("the job did not settle")

    def _create(self, obj: dict[str, Any]) -> None:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in self.children:
            return  # AlreadyExists counts as success
        obj["metadata"]["uid"] = f"child-{next(_uids)}"
        if obj["kind"] == "Pod":
            obj["status"] = {"phase": "Pending"}
        self.children[key] = obj

    def _delete(self, action: Delete, graceful: bool) -> None:
        obj = self.children.get((action.kind, action.name))
        if obj is None or (action.uid is not None and obj["metadata"]["uid"] != action.uid):
            return  # NotFound or precondition failed
        if graceful:
            obj["metadata"]["deletionTimestamp"] = STAMP
        else:
            del self.children[(action.kind, action.name)]

    def _patch(self, action: Patch) -> None:
        """A JSON merge patch (RFC 7386); a uid in it is a precondition."""
        obj = self.children[(action.kind, action.name)]
        uid = action.patch.get("metadata", {}).get("uid")
        if uid is None or uid == obj["metadata"]["uid"]:
            merge_patch(obj, action.patch)

    # --- what the cluster does to pods --------------------------------------

    def pod(self, name: str) -> dict[str, Any]:
        return self.children[("Pod", name)]

    def pods(self) -> list[str]:
        return sorted(name for kind, name in self.children if kind == "Pod")

    def names(self, kind: str) -> list[str]:
        return sorted(name for k, name in self.children if k == kind)

    def run(self, *names: str) -> None:
        """The pods run, each with its address (the one it had, or a new one)."""
        for name in names or self.pods():
            self.pod(name)["status"] = {"phase": "Running", "podIP": self.address_of(name)}

    def address_of(self, name: str) -> str:
        return str(self.pod(name).get("status", {}).get("podIP") or address())

    def exit(
        self,
        name: str,
        code: int,
        at: datetime | None = None,
        container: str = "tensorflow",
        phase: str | None = None,
        beside: str | None = None,
    ) -> None:
        """The container has ended; `phase`: the pod's, if the kubelet has
        not settled it yet (it says Running until the sandbox is gone);
        `beside`: a sidecar that still runs, which keeps the pod Running.
        A success ended SETTLE_SECONDS before `now` unless `at` says when:
        the job has given its other pods' ends the time to be reported
        (reconcile.verdicts), which tests/unit/job/test_endings.py checks."""
        settled = self.now - timedelta(seconds=SETTLE_SECONDS if code == 0 else 0)
        terminated = {
            "exitCode": code,
            "finishedAt": (at or settled).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        statuses = [{"name": container, "state": {"terminated": terminated}}]
        if beside is not None:
            statuses.append({"name": beside, "state": {"running": {}}})
            phase = "Running"
        self.pod(name)["status"] = {
            "phase": phase or ("Succeeded" if code == 0 else "Failed"),
            "podIP": self.address_of(name),
            "containerStatuses": statuses,
        }

    def vanish(self, name: str) -> None:
        del self.children[("Pod", name)]

    def later(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def past_cleanup_grace(self) -> None:
        """The time cleanPodPolicy Running lets a job that has succeeded
        give its running pods to end by themselves has passed."""
        self.later(CLEANUP_GRACE_SECONDS)


W = TypeVar("W", bound=World)


def started(world: W) -> W:
    """The world once every pod of its job is created and running, and the
    job's status says so."""
    world.settle()
    world.run()
    world.settle()
    return world


def running_world(**spec: Any) -> World:
    return started(World(tfjob(**spec)))


def replica_job(
    kind: str,
    roles: dict[str, int],
    *,
    role_field: str,
    main: dict[str, Any],
    uid: str,
    **spec: Any,
) -> dict[str, Any]:
    """A job named j in ns with these replica counts, each with its own copy
    of the container `main`."""
    template = {"spec": {"containers": [main]}}
    specs = [
        {role_field: role, "replicas": count, "template": copy.deepcopy(template)}
        for role, count in roles.items()
    ]
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "j", "namespace": "ns", "uid": uid, "generation": 1},
        "spec": {"replicaSpecs": specs, **spec},
    }


def first_children(
    job: dict[str, Any], config: Any, now: datetime = NOW
) -> dict[tuple[str, str], dict[str, Any]]:
    """What the first pass of `job` creates, by kind and name, and the
    Services of its pods, which the pass after their addresses creates."""
    first = reconcile(copy.deepcopy(job), Observed(), config, now)
    made = {
        (a.obj["kind"], a.obj["metadata"]["name"]): a.obj
        for a in first.actions
        if isinstance(a, Create)
    }
    pods = [
        copy.deepcopy(obj) | {"status": {"phase": "Pending", "podIP": address()}}
        for (kind, _), obj in made.items()
        if kind == "Pod"
    ]
    if not pods:
        return made
    job = copy.deepcopy(job) | {"status": first.status}
    then = reconcile(
        job, Observed(pods, [o for (k, _), o in made.items() if k == "Service"]), config, now
    )
    return made | {
        (a.obj["kind"], a.obj["metadata"]["name"]): a.obj
        for a in then.actions
        if isinstance(a, Create) and a.obj["kind"] == "Service"
    }


def invalid_spec(job: dict[str, Any], config: Any) -> str:
    """What the one event of a first pass that fails `job` as InvalidSpec says."""
    result = reconcile(job, Observed(), config, NOW)
    assert (result.status["state"], result.status["reason"]) == ("Failed", "InvalidSpec")
    assert creates(result, "Pod") == []
    [event] = [a for a in result.actions if isinstance(a, Event)]
    return event.message


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def creates(result: Result, kind: str) -> list[str]:
    return sorted(
        a.obj["metadata"]["name"]
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == kind
    )


def deletes(result: Result, kind: str | None = None) -> list[str]:
    return sorted(
        a.name for a in result.actions if isinstance(a, Delete) and kind in (None, a.kind)
    )


def events(result: Result) -> list[tuple[str, str]]:
    """Every event of the pass, those a create or delete carries included."""
    found: list[Event] = []
    for action in result.actions:
        if isinstance(action, Event):
            found.append(action)
        elif isinstance(action, (Create, Delete)) and action.event is not None:
            found.append(action.event)
    return [(e.type, e.reason) for e in found]


def condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


def condition_message(status: dict[str, Any], type_: str) -> str:
    """The message of the condition `type_`, which the status must have."""
    found = condition(status, type_)
    assert found is not None, status
    message: str = found["message"]
    return message


def retried(world: World, name: str, code: int, container: str) -> None:
    """`container` of pod `name` exits with `code`, which the job retries:
    after the first back-off the pod is deleted, made again, and runs."""
    world.exit(name, code, container=container)
    world.later(10)  # the first back-off
    assert deletes(world.step(), "Pod") == [name]
    assert creates(world.step(), "Pod") == [name]
    world.run()
    world.settle()
