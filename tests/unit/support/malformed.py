"""Malformed inputs for reconcile: every field of a job replaced by junk.

`mutations` yields a job with one field replaced or removed; `check` asserts
what must hold of any result. Used by the robustness tests of every kind.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from dlk8s.job.actions import Create, Delete, Event
from dlk8s.job.config import parse_config
from dlk8s.job.reconcile import Observed, Result, reconcile

NOW = datetime(2026, 3, 1, tzinfo=UTC)
CONFIG = parse_config(
    {
        "accelerators": {
            "nvidia.com/gpu": {"volumes": [{"name": "n", "mountPath": "/n", "hostPath": "/h"}]}
        }
    },
    grpc_server_script="print()",
)
JUNK: list[Any] = [
    None,
    0,
    -1,
    2.5,
    True,
    "",
    "x",
    "MASTER",
    [],
    [None],
    {},
    {"a": None},
    10**12,
    "9" * 30,
]
PHASES = {"Creating", "Running", "CleanUp", "Failed", "Done"}
STATES = {"Running", "Succeeded", "Failed"}


def rich_job() -> dict[str, Any]:
    tensorflow = {
        "name": "tensorflow",
        "image": "tf",
        "env": [{"name": "A", "value": "1"}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"cpu": "1"}},
    }
    template = {
        "metadata": {"labels": {"team": "a"}, "annotations": {"n": "x"}},
        "spec": {"containers": [tensorflow], "volumes": [{"name": "data", "emptyDir": {}}]},
    }
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "generation": 2},
        "spec": {
            "replicaSpecs": [
                {"tfReplicaType": "MASTER", "replicas": 1, "tfPort": 2222, "template": template},
                {
                    "tfReplicaType": "WORKER",
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": template,
                },
                {"tfReplicaType": "PS", "replicas": 1},
            ],
            "tfImage": "tf:2",
            "tensorboard": {
                "logDir": "/logs",
                "volumes": [{"name": "v"}],
                "volumeMounts": [{"name": "v", "mountPath": "/logs"}],
                "serviceType": "ClusterIP",
            },
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "ttlSecondsAfterFinished": 10,
                "activeDeadlineSeconds": 100,
                "backoffLimit": 3,
                "suspend": False,
                "successPolicy": "AllWorkers",
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "FailJob",
                            "replicaTypes": ["WORKER"],
                            "onExitCodes": {
                                "containerName": "tensorflow",
                                "operator": "In",
                                "values": [42],
                            },
                        },
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        },
                    ]
                },
            },
        },
    }


def running(job: dict[str, Any]) -> tuple[dict[str, Any], Observed]:
    """The job after its first passes: a status and Running children."""
    first = reconcile(job, Observed(), CONFIG, NOW)
    objs = [copy.deepcopy(a.obj) for a in first.actions if isinstance(a, Create)]
    for i, obj in enumerate(objs):
        obj["metadata"]["uid"] = f"c-{i}"
        if obj["kind"] == "Pod":
            obj["status"] = {"phase": "Running"}
    job = copy.deepcopy(job) | {"status": first.status}

    def of(kind: str) -> list[dict[str, Any]]:
        return [o for o in objs if o["kind"] == kind]

    observed = Observed(of("Pod"), of("Service"), of("ConfigMap"), of("Deployment"))
    return job | {"status": reconcile(job, observed, CONFIG, NOW).status}, observed


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, (*prefix, index))


def mutations(obj: Any, values: Sequence[Any] = JUNK) -> Iterator[Any]:
    """obj with one field replaced by one of `values`, or removed."""
    for path in paths(obj):
        if not path:
            continue
        for value in [*values, "<remove>"]:
            mutated = copy.deepcopy(obj)
            parent = mutated
            for key in path[:-1]:
                parent = parent[key]
            if value == "<remove>":
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            yield mutated


def check_every_mutation(job: dict[str, Any], config: Any, now: datetime) -> int:
    """`check` the first pass of every mutation of a new job; how many there were."""
    count = 0
    for mutated in mutations(job):
        check(reconcile(mutated, Observed(), config, now), mutated)
        count += 1
    return count


def check_every_running_mutation(
    job: dict[str, Any], observed: Observed, config: Any, now: datetime
) -> None:
    """`check` a pass of the running job, its metadata or spec mutated, each way."""
    for mutated in mutations({"metadata": job["metadata"], "spec": job["spec"]}):
        check(reconcile(job | mutated, observed, config, now), job | mutated)


def check(result: Result, job: Any) -> None:
    assert isinstance(result, Result)
    reasons = [a.reason for a in result.actions if isinstance(a, Event)]
    assert "InternalError" not in reasons
    status = result.status
    json.dumps(status)  # plain data only
    assert status["state"] in STATES
    assert status["phase"] in PHASES
    created = [a.obj for a in result.actions if isinstance(a, Create)]
    if status.get("reason") == "InvalidSpec":
        assert status["state"] == "Failed"
        assert created == []
        assert "InvalidSpec" in reasons
    for obj in created:
        json.dumps(obj)
        meta = obj["metadata"]
        assert meta["name"]
        assert meta["namespace"] == job["metadata"]["namespace"]
        assert meta["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    for delete in (a for a in result.actions if isinstance(a, Delete)):
        assert delete.uid  # only objects we observed, guarded by their uid


# Values a manifest field may hold in place of its own, for the
# manifests' readers (not reconcile: `mutations` walks those exhaustively).
MANIFEST_JUNK: list[Any] = [None, 0, -1, True, "x", "", [], {}]
MANIFEST_JUNK += [[None], {"a": None}, 1.5, "200x", "-1"]


def random_mutation(base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """`base` with one to four fields, at any depth, replaced by junk."""
    obj = copy.deepcopy(base)
    for _ in range(rng.randint(1, 4)):
        parent: dict[str, Any] = obj
        key = rng.choice(list(parent))
        while isinstance(parent[key], dict) and parent[key] and rng.random() < 0.7:
            parent = parent[key]
            key = rng.choice(list(parent))
        parent[key] = rng.choice(MANIFEST_JUNK)
    return obj
