"""Every container the operator adds to a job's pods carries the restricted
Pod Security context, so the pods pass `restricted` whenever the user's own
template does (issue 14). The admission itself is tested against a real
kube-apiserver in tests/e2e/operator/test_faults.py."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.job.actions import Create

from ..support.caffe2 import IN_MASTER
from ..support.caffe2 import seed as caffe2_seed
from ..support.paddle import edl_example
from ..support.worlds import World, tfjob

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
# Volumes the restricted profile allows.
ALLOWED_VOLUMES = {"configMap", "emptyDir", "downwardAPI", "secret", "projected"}


def created(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result = World(job).reconcile()
    return {
        f"{a.obj['kind']}/{a.obj['metadata']['name']}": a.obj
        for a in result.actions
        if isinstance(a, Create)
    }


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]
    return spec["template"]["spec"] if obj["kind"] == "Deployment" else spec


def with_tensorboard() -> dict[str, Any]:
    return tfjob(tensorboard={"logDir": "/logs"})


# (job, the object, the container the operator adds to it)
ADDED = [
    pytest.param(tfjob(), "Pod/example-job-ps-0", "tensorflow", id="tf-default-ps-grpc-server"),
    pytest.param(
        with_tensorboard(), "Deployment/example-job-tensorboard", "tensorboard", id="tensorboard"
    ),
    pytest.param(
        caffe2_seed("caffe2job-redis-in-master.yaml"),
        f"Pod/{IN_MASTER}-master-0",
        "redis",
        id="caffe2-master-redis",
    ),
    pytest.param(edl_example(), "Pod/example-master-0", "etcd", id="paddle-master-etcd"),
]


@pytest.mark.parametrize(("job", "name", "container"), ADDED)
def test_an_added_container_is_restricted(job: dict[str, Any], name: str, container: str) -> None:
    objs = created(job)
    assert name in objs, sorted(objs)
    spec = pod_spec(objs[name])
    # The Caffe2 MASTER's redis is a native sidecar: an init container.
    every = [*spec["containers"], *spec.get("initContainers", [])]
    [added] = [c for c in every if c["name"] == container]
    context = added["securityContext"]
    assert {k: context[k] for k in RESTRICTED} == RESTRICTED
    assert context["runAsUser"] > 0
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        assert kinds <= ALLOWED_VOLUMES, volume
