"""The chaos suite's jobs: TFJobs and PyTorchJobs (static and elastic) whose
pods kwok ends after a while, MXJobs that run on, and the edits that make a
job hostile (scenarios/hostile.py) or queued (scenarios/kueue.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench.common.devtools import EXIT_CODE_ANNOTATION, RUN_DURATION_ANNOTATION

API = "dlk8s.io/v1alpha1"
MASTER, WORKER = "MASTER", "WORKER"


def pod_template(container: str, image: str, run: str | None = None) -> dict[str, Any]:
    """A pod template whose kwok pod ends with 0 after `run` of running (None: runs on)."""
    pod: dict[str, Any] = {"spec": {"containers": [{"name": container, "image": image}]}}
    if run is not None:
        annotations = {EXIT_CODE_ANNOTATION: "0", RUN_DURATION_ANNOTATION: run}
        pod["metadata"] = {"annotations": annotations}
    return pod


def tfjob(name: str, workers: int = 1, run: str | None = "20s", **spec: Any) -> dict[str, Any]:
    """A TFJob whose MASTER ends with 0 after `run` of running (None: runs on)."""
    master = pod_template("tensorflow", "tf", run)
    specs = [{"tfReplicaType": "MASTER", "replicas": 1, "template": master}]
    if workers:
        worker = pod_template("tensorflow", "tf")
        specs.append({"tfReplicaType": "WORKER", "replicas": workers, "template": worker})
    return {
        "apiVersion": API,
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": specs, **spec},
    }


def pytorchjob(
    name: str, workers: int = 1, run: str | None = "20s", elastic: bool = False
) -> dict[str, Any]:
    """A PyTorchJob whose MASTER ends with 0 after `run` of running (None: runs on).
    Elastic: no MASTER, and its WORKERs (at least two) decide together, each
    ending with 0 after `run`; replicas at maxReplicas, so that the autoscaler
    cannot grow it and only the faults move its pods."""
    role = WORKER if elastic else MASTER
    workers = max(workers, 2) if elastic else workers
    specs: list[dict[str, Any]] = [] if elastic else [{"pytorchReplicaType": MASTER, "replicas": 1}]
    if workers:
        specs.append({"pytorchReplicaType": WORKER, "replicas": workers})
    for replica in specs:
        ends = replica["pytorchReplicaType"] == role
        replica["template"] = pod_template("pytorch", "torch", run if ends else None)
    spec: dict[str, Any] = {"replicaSpecs": specs}
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": workers, "maxRestarts": 3}
    return {"apiVersion": API, "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def mixed(
    name: str, i: int, workers: int = 1, run: str | None = "20s", elastic: bool = False
) -> dict[str, Any]:
    """The i-th job of a scenario: every third a PyTorchJob (with `elastic`,
    every other of those an elastic one), the rest TFJobs."""
    if i % 3 != 2:
        return tfjob(name, workers=workers, run=run)
    return pytorchjob(name, workers=workers, run=run, elastic=elastic and i % 6 == 5)


def mxjob(name: str, workers: int) -> dict[str, Any]:
    """An MXJob that runs on: one SCHEDULER and `workers` WORKERs."""
    template = {"spec": {"containers": [{"name": "mxnet", "image": "mx"}]}}
    specs = [
        {"mxReplicaType": "SCHEDULER", "replicas": 1, "template": template},
        {"mxReplicaType": "WORKER", "replicas": workers, "template": template},
    ]
    return {
        "apiVersion": API,
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": specs},
    }


# --- hostile edits --------------------------------------------------------------------------------


def _templates(job: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for replica in job["spec"]["replicaSpecs"]:
        if "template" in replica:
            yield replica["template"]


def with_template(
    job: dict[str, Any],
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str = "",
    name: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    for template in _templates(job):
        meta = template.setdefault("metadata", {})
        meta.setdefault("labels", {}).update(labels or {})
        meta.setdefault("annotations", {}).update(annotations or {})
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": API,
                    "kind": "TFJob",
                    "name": "bystander",
                    "uid": owner,
                    "controller": True,
                }
            ]
        if name:
            meta["name"] = name
        if namespace:
            meta["namespace"] = namespace
    return job


def with_container(job: dict[str, Any], **fields: Any) -> dict[str, Any]:
    for template in _templates(job):
        template["spec"]["containers"][0].update(fields)
    return job


def with_pod(job: dict[str, Any], **fields: Any) -> dict[str, Any]:
    for template in _templates(job):
        template["spec"].update(fields)
    return job


def with_env(job: dict[str, Any], env: dict[str, str], duplicate: bool = False) -> dict[str, Any]:
    items = [{"name": k, "value": v} for k, v in env.items()]
    return with_container(job, env=items * (2 if duplicate else 1))


def with_exit(job: dict[str, Any], code: int) -> dict[str, Any]:
    master = job["spec"]["replicaSpecs"][0]["template"]
    master["metadata"] = {
        "annotations": {EXIT_CODE_ANNOTATION: str(code), RUN_DURATION_ANNOTATION: "1s"}
    }
    return job


def init_clash(job: dict[str, Any]) -> dict[str, Any]:
    """A PS whose init container takes the name of the gRPC server the
    operator adds: the pod is invalid, and the status must say so."""
    template = {
        "spec": {
            "containers": [{"name": "sidecar", "image": "x"}],
            "initContainers": [{"name": "tensorflow", "image": "x"}],
        }
    }
    job["spec"]["replicaSpecs"].append({"tfReplicaType": "PS", "replicas": 1, "template": template})
    return job


def with_ps_containers(job: dict[str, Any]) -> dict[str, Any]:
    """A PS that brings its own container named like the operator's gRPC server."""
    own = {"spec": {"containers": [{"name": "tensorflow", "image": "my-ps"}]}}
    job["spec"]["replicaSpecs"].append({"tfReplicaType": "PS", "replicas": 2, "template": own})
    return job
