"""One set of limits: a job the API server accepts, the operator accepts too.

Every limit the operator enforces (dlk8s.job.validation and the kinds'
checks) must be in the CRD's schema or a CEL rule, so that `kubectl apply`
refuses such a job with a message naming the field, instead of accepting it
and the operator failing it as InvalidSpec later (issue 14: 10,001 workers
were accepted, then failed).

The test walks the limits instead of listing them: from a valid job of each
kind that uses every field the operator reads, it makes one job per field
replaced by junk or a value just past a bound (tests/unit/support/malformed.py),
has the API server validate it (a server-side dry run with strict field
validation), and runs the operator's validation on what the API server
accepted, defaults applied. Each job the operator would fail is a limit
missing from the CRD.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from dlk8s.job.jobmodel import Observed
from dlk8s.job.reconcile.invalid import spec_problems
from dlk8s.job.reconcile.view import read_job
from dlk8s.runtime.client import Kube
from dlk8s.runtime.errors import ApiError
from dlk8s_dev.localcluster import LocalCluster

from ...unit.support.malformed import JUNK, mutations, rich_job

# Values just past the bounds the operator checks (replicas, ports, int32).
PAST_BOUNDS = [10_001, 65_536, 2**31, -2]


def template(container: str) -> dict[str, Any]:
    main = {
        "name": container,
        "image": "example/train:1",
        "env": [{"name": "A", "value": "1"}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"cpu": "1"}},
    }
    return {
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {
            "containers": [main],
            "initContainers": [{"name": "init", "image": "example/init:1"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


def paddle_template() -> dict[str, Any]:
    """A PaddleJob role's template: what it adds to the paddle container, a
    sidecar, placement and its own volume."""
    paddle = {
        "name": "paddle",
        "env": [{"name": "A", "value": "1"}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    sidecar = {
        "name": "logs",
        "image": "example/logs:1",
        "resources": {"requests": {"cpu": "100m"}},
    }
    return {
        "metadata": {"labels": {"team": "a"}},
        "spec": {
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [paddle, sidecar],
            "initContainers": [{"name": "init", "image": "example/init:1"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


def caffe2(backend: dict[str, Any]) -> dict[str, Any]:
    return {
        "backendSpecs": backend,
        "replicaSpecs": [
            {"replicaType": "MASTER", "replicas": 1, "template": template("caffe2")},
            {"replicaType": "WORKER", "replicas": 2, "template": template("caffe2")},
        ],
    }


def pytorch(**spec: Any) -> dict[str, Any]:
    master = {"pytorchReplicaType": "MASTER", "replicas": 1, "template": template("pytorch")}
    worker = {"pytorchReplicaType": "WORKER", "replicas": 2, "template": template("pytorch")}
    return {"replicaSpecs": [master | {"pytorchPort": 29500}, worker], **spec}


# A valid job of each kind, with every field the operator reads.
RICH: dict[str, tuple[str, dict[str, Any]]] = {
    "tfjob": ("TFJob", rich_job()["spec"]),
    "mxjob": (
        "MXJob",
        {
            "replicaSpecs": [
                {"mxReplicaType": "SCHEDULER", "replicas": 1, "template": template("mxnet")},
                {"mxReplicaType": "SERVER", "psRootPort": 9091, "template": template("mxnet")},
                {"mxReplicaType": "WORKER", "replicas": 2, "template": template("mxnet")},
            ],
            "runPolicy": {"backoffLimit": 1, "cleanPodPolicy": "All"},
        },
    ),
    "caffe2job-redis": ("Caffe2Job", caffe2({"backendType": "redis", "redisPort": 6379})),
    "caffe2job-nfs": ("Caffe2Job", caffe2({"backendType": "nfs", "nfsPath": "/data"})),
    "pytorchjob": ("PyTorchJob", pytorch(nprocPerNode=2, runPolicy={"backoffLimit": 1})),
    "pytorchjob-elastic": (
        "PyTorchJob",
        pytorch(
            elasticPolicy={
                "minReplicas": 1,
                "maxReplicas": 4,
                "maxRestarts": 3,
                "rdzvPort": 29400,
                "nProcPerNode": 2,
            }
        ),
    ),
    "paddlejob": (
        "PaddleJob",
        {
            "image": "example/paddle:1",
            "port": 7164,
            "portsNum": 1,
            "portsNumForSparse": 1,
            "faultTolerant": True,
            "trainer": {
                "entrypoint": "python train.py",
                "workspace": "/workspace",
                "passes": 2,
                "minInstance": 2,
                "maxInstance": 4,
                "resources": {"requests": {"cpu": "200m"}, "limits": {"nvidia.com/gpu": 1}},
                "template": paddle_template(),
            },
            "pserver": {
                "minInstance": 2,
                "maxInstance": 2,
                "resources": {"requests": {"cpu": 1}},
                "template": {"spec": {"imagePullSecrets": [{"name": "regcred"}]}},
            },
            "master": {"resources": {"requests": {"cpu": "1"}}, "template": paddle_template()},
        },
    ),
}


def operator_refuses(kube: Kube, namespace: str, kind: str, spec: dict[str, Any]) -> list[str]:
    """What the operator says of the job as the API server stores it; [] if
    the API server refuses the job (then `kubectl apply` says why)."""
    job = {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "limits", "namespace": namespace},
        "spec": spec,
    }
    try:
        stored = kube.request(
            "POST",
            f"/apis/dlk8s.io/v1alpha1/namespaces/{namespace}/{kind.lower()}s",
            query=[("dryRun", "All"), ("fieldValidation", "Strict")],
            body=job,
        )
    except ApiError:
        return []
    stored["metadata"]["uid"] = "dry-run"  # a dry run assigns none
    return spec_problems(read_job(stored, Observed(), datetime.now(UTC)))


@pytest.mark.usefixtures("crds_installed")
@pytest.mark.parametrize("case", sorted(RICH))
def test_the_api_server_refuses_every_job_the_operator_would_fail(
    cluster: LocalCluster, namespace: str, case: str
) -> None:
    kind, spec = RICH[case]
    kube = Kube(cluster.api_client())
    assert operator_refuses(kube, namespace, kind, spec) == [], "the valid job"
    jobs = list(mutations(spec, [*JUNK, *PAST_BOUNDS]))
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(lambda s: operator_refuses(kube, namespace, kind, s), jobs))
    missing = sorted({"; ".join(v) for v in verdicts if v})
    assert missing == [], f"{len(missing)} limits only the operator knows"
    assert len(jobs) > 300  # the walk covered the job
