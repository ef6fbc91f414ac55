"""The CRDs reject bad jobs at `kubectl apply`, naming the offending field.

Each case starts from a valid job of its kind, changes one thing, and expects
the apiserver (server-side dry run, kubectl's default strict field
validation) to refuse it with a message that contains the field's path and
the reason, both written here from the schema in crds/. The valid jobs are
checked too, so a rejection is always due to the one change.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
API_VERSION = "dlk8s.io/v1alpha1"
CRDS = ("tfjobs.dlk8s.io", "mxjobs.dlk8s.io", "caffe2jobs.dlk8s.io", "paddlejobs.dlk8s.io")

Job = dict[str, Any]


def template(container: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": container, "image": "example/train:1"}]}}


VALID: dict[str, Job] = {
    "TFJob": {
        "replicaSpecs": [
            {"tfReplicaType": "MASTER", "replicas": 1, "template": template("tensorflow")},
            {"tfReplicaType": "WORKER", "replicas": 2, "template": template("tensorflow")},
            {"tfReplicaType": "PS", "replicas": 1},
        ],
        "tensorboard": {"logDir": "/logs"},
    },
    "MXJob": {
        "replicaSpecs": [
            {"mxReplicaType": "SCHEDULER", "replicas": 1, "template": template("mxnet")},
            {"mxReplicaType": "SERVER", "replicas": 1, "template": template("mxnet")},
            {"mxReplicaType": "WORKER", "replicas": 2, "template": template("mxnet")},
        ],
    },
    "Caffe2Job": {
        "backendSpecs": {"backendType": "redis"},
        "replicaSpecs": [
            {"replicaType": "MASTER", "replicas": 1, "template": template("caffe2")},
            {"replicaType": "WORKER", "replicas": 2, "template": template("caffe2")},
        ],
    },
    "PaddleJob": {
        "image": "example/paddle:1",
        "faultTolerant": True,
        "trainer": {
            "entrypoint": "python train.py",
            "minInstance": 2,
            "maxInstance": 4,
            "resources": {"requests": {"cpu": "200m", "memory": "200Mi"}},
        },
        "pserver": {"minInstance": 2, "maxInstance": 2},
    },
}


def manifest(kind: str, spec: Job) -> str:
    return json.dumps(
        {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": "bad"}, "spec": spec}
    )


def case(case_id: str, kind: str, change: Callable[[Job], None], *expected: str) -> Any:
    spec = copy.deepcopy(VALID[kind])
    change(spec)
    return pytest.param(kind, spec, expected, id=case_id)


def _parent(spec: Job, path: str) -> tuple[Any, str | int]:
    """The container of spec.<path> (dots and [index]) and the last key."""
    keys: list[str | int] = [
        int(k) if k.isdigit() else k for k in path.replace("[", ".").replace("]", "").split(".")
    ]
    node: Any = spec
    for key in keys[:-1]:
        node = node[key]
    return node, keys[-1]


def put(path: str, value: Any) -> Callable[[Job], None]:
    def change(spec: Job) -> None:
        node, key = _parent(spec, path)
        node[key] = value

    return change


def remove(path: str) -> Callable[[Job], None]:
    def change(spec: Job) -> None:
        node, key = _parent(spec, path)
        del node[key]

    return change


def rename(path: str, new_key: str) -> Callable[[Job], None]:
    def change(spec: Job) -> None:
        node, key = _parent(spec, path)
        node[new_key] = node.pop(key)

    return change


def both(*changes: Callable[[Job], None]) -> Callable[[Job], None]:
    def change(spec: Job) -> None:
        for c in changes:
            c(spec)

    return change


# One case per line pair: id, kind, change, then the texts the error must contain.
# fmt: off
INVALID = [
    # --- TFJob ---------------------------------------------------------------
    case(
        "tf-two-masters", "TFJob", put("replicaSpecs[1].tfReplicaType", "MASTER"),
        "spec.replicaSpecs[1]", "Duplicate value",
    ),
    case(
        "tf-no-master", "TFJob", remove("replicaSpecs[0]"),
        "spec.replicaSpecs", "exactly one entry with tfReplicaType MASTER",
    ),
    case(
        "tf-master-two-replicas", "TFJob", put("replicaSpecs[0].replicas", 2),
        "spec.replicaSpecs[0].replicas", "replicas must be 1 for tfReplicaType MASTER",
    ),
    case(
        "tf-negative-replicas", "TFJob", put("replicaSpecs[1].replicas", -1),
        "spec.replicaSpecs[1].replicas", "greater than or equal to 0",
    ),
    case(
        # The operator's own limit (MAX_REPLICAS): refused at apply, not failed later.
        "tf-too-many-replicas", "TFJob", put("replicaSpecs[1].replicas", 10_001),
        "spec.replicaSpecs[1].replicas", "less than or equal to 10000",
    ),
    case(
        "tf-duplicate-container-name", "TFJob",
        put("replicaSpecs[1].template.spec.initContainers", [{"name": "tensorflow"}]),
        "spec.replicaSpecs[1].template.spec.initContainers",
        "container names must be unique over containers and initContainers",
    ),
    case(
        "tf-negative-gpu-request", "TFJob",
        put("replicaSpecs[1].template.spec.containers[0].resources", {"limits": {"cpu": "-1"}}),
        "spec.replicaSpecs[1].template.spec.containers[0].resources.limits.cpu", "should match",
    ),
    case(
        "tf-env-without-name", "TFJob",
        put("replicaSpecs[1].template.spec.containers[0].env", [{"value": "1"}]),
        "spec.replicaSpecs[1].template.spec.containers[0].env[0].name", "Required value",
    ),
    case(
        "tf-unknown-replica-type", "TFJob", put("replicaSpecs[1].tfReplicaType", "CHIEF"),
        "spec.replicaSpecs[1].tfReplicaType", "Unsupported value", "CHIEF",
    ),
    case(
        "tf-port-out-of-range", "TFJob", put("replicaSpecs[0].tfPort", 70000),
        "spec.replicaSpecs[0].tfPort", "less than or equal to 65535",
    ),
    case(
        "tf-misspelled-field", "TFJob", rename("replicaSpecs[1].replicas", "replica"),
        'unknown field "spec.replicaSpecs[1].replica"',
    ),
    case(
        "tf-seed-snake-case", "TFJob", rename("replicaSpecs", "replica_specs"),
        'unknown field "spec.replica_specs"',
    ),
    case(
        "tf-master-without-tensorflow-container", "TFJob",
        put("replicaSpecs[0].template.spec.containers[0].name", "trainer"),
        "spec.replicaSpecs[0].template.spec.containers", "container named tensorflow",
    ),
    case(
        "tf-worker-without-template", "TFJob", remove("replicaSpecs[1].template"),
        "spec.replicaSpecs[1].tfReplicaType", "template is required",
    ),
    case(
        "tf-no-containers", "TFJob", put("replicaSpecs[1].template.spec.containers", []),
        "spec.replicaSpecs[1].template.spec.containers", "at least 1 items",
    ),
    case(
        "tf-container-without-name", "TFJob",
        remove("replicaSpecs[1].template.spec.containers[0].name"),
        "spec.replicaSpecs[1].template.spec.containers[0].name", "Required value",
    ),
    case(
        "tf-bad-restart-policy", "TFJob", put("replicaSpecs[1].restartPolicy", "Sometimes"),
        "spec.replicaSpecs[1].restartPolicy", "Unsupported value",
    ),
    case(
        "tf-tensorboard-without-logdir", "TFJob", put("tensorboard", {"serviceType": "NodePort"}),
        "spec.tensorboard.logDir", "Required value",
    ),
    case(
        "tf-tensorboard-bad-service-type", "TFJob", put("tensorboard.serviceType", "Ingress"),
        "spec.tensorboard.serviceType", "Unsupported value",
    ),
    case(
        "run-policy-bad-clean-pod-policy", "TFJob", put("runPolicy", {"cleanPodPolicy": "Always"}),
        "spec.runPolicy.cleanPodPolicy", "Unsupported value",
    ),
    case(
        "run-policy-negative-backoff-limit", "TFJob", put("runPolicy", {"backoffLimit": -1}),
        "spec.runPolicy.backoffLimit", "greater than or equal to 0",
    ),
    case(
        "run-policy-zero-deadline", "TFJob", put("runPolicy", {"activeDeadlineSeconds": 0}),
        "spec.runPolicy.activeDeadlineSeconds", "greater than or equal to 1",
    ),
    # --- MXJob ---------------------------------------------------------------
    case(
        "mx-no-scheduler", "MXJob", remove("replicaSpecs[0]"),
        "spec.replicaSpecs", "exactly one entry with mxReplicaType SCHEDULER",
    ),
    case(
        "mx-scheduler-two-replicas", "MXJob", put("replicaSpecs[0].replicas", 2),
        "spec.replicaSpecs[0].replicas", "replicas must be 1 for mxReplicaType SCHEDULER",
    ),
    case(
        "mx-scheduler-without-mxnet-container", "MXJob",
        put("replicaSpecs[0].template.spec.containers[0].name", "main"),
        "spec.replicaSpecs[0].template.spec.containers", "container named mxnet",
    ),
    case(
        "mx-port-zero", "MXJob", put("replicaSpecs[0].psRootPort", 0),
        "spec.replicaSpecs[0].psRootPort", "greater than or equal to 1",
    ),
    case(
        "mx-server-without-template", "MXJob", remove("replicaSpecs[1].template"),
        "spec.replicaSpecs[1].template", "Required value",
    ),
    case(
        "mx-unknown-replica-type", "MXJob", put("replicaSpecs[2].mxReplicaType", "PS"),
        "spec.replicaSpecs[2].mxReplicaType", "Unsupported value",
    ),
    # --- Caffe2Job -----------------------------------------------------------
    case(
        "caffe2-unknown-backend", "Caffe2Job", put("backendSpecs.backendType", "gloo"),
        "spec.backendSpecs.backendType", "Unsupported value", "gloo",
    ),
    case(
        "caffe2-redis-without-host-or-master", "Caffe2Job", remove("replicaSpecs[0]"),
        "spec.replicaSpecs", "needs a MASTER",
    ),
    case(
        "caffe2-nfs-without-path", "Caffe2Job", put("backendSpecs", {"backendType": "nfs"}),
        "spec.backendSpecs.nfsPath", "required when backendType is nfs",
    ),
    case(
        "caffe2-redis-with-nfs-path", "Caffe2Job", put("backendSpecs.nfsPath", "/shared"),
        "spec.backendSpecs.backendType", "only apply to backendType nfs",
    ),
    case(
        "caffe2-nfs-server-without-export", "Caffe2Job",
        put(
            "backendSpecs",
            {"backendType": "nfs", "nfsPath": "/shared", "nfsServer": "nfs.example"},
        ),
        "spec.backendSpecs.nfsServer", "must be set together",
    ),
    case(
        "caffe2-bad-redis-port", "Caffe2Job", put("backendSpecs.redisPort", 0),
        "spec.backendSpecs.redisPort", "greater than or equal to 1",
    ),
    case(
        "caffe2-master-two-replicas", "Caffe2Job", put("replicaSpecs[0].replicas", 2),
        "spec.replicaSpecs[0].replicas", "replicas must be 1 for replicaType MASTER",
    ),
    case(
        "caffe2-seed-ReplicaType", "Caffe2Job",
        rename("replicaSpecs[1].replicaType", "ReplicaType"),
        'unknown field "spec.replicaSpecs[1].ReplicaType"',
    ),
    case(
        "caffe2-seed-backend-field", "Caffe2Job",
        both(remove("backendSpecs"), put("backend", "redis")),
        'unknown field "spec.backend"',
    ),
    # --- PaddleJob -----------------------------------------------------------
    case(
        "paddle-min-above-max", "PaddleJob", put("trainer.minInstance", 5),
        "spec.trainer.minInstance", "must not exceed spec.trainer.maxInstance",
    ),
    case(
        "paddle-elastic-not-fault-tolerant", "PaddleJob", put("faultTolerant", False),
        "spec.faultTolerant", "must be true",
    ),
    case(
        "paddle-pservers-scale", "PaddleJob", put("pserver.maxInstance", 3),
        "spec.pserver.maxInstance", "must equal spec.pserver.maxInstance",
    ),
    case(
        "paddle-zero-trainers", "PaddleJob", put("trainer.minInstance", 0),
        "spec.trainer.minInstance", "greater than or equal to 1",
    ),
    case(
        "paddle-port-out-of-range", "PaddleJob", put("port", 70000),
        "spec.port", "less than or equal to 65535",
    ),
    case(
        "paddle-too-many-trainers", "PaddleJob", put("trainer.maxInstance", 10_001),
        "spec.trainer.maxInstance", "less than or equal to 10000",
    ),
    case(
        "caffe2-nfs-path-not-mounted", "Caffe2Job",
        put("backendSpecs", {"backendType": "nfs", "nfsPath": "/shared"}),
        "spec.replicaSpecs", "every caffe2 container must mount spec.backendSpecs.nfsPath",
    ),
    case(
        "paddle-missing-image", "PaddleJob", remove("image"),
        "spec.image", "Required value",
    ),
    case(
        "paddle-seed-kebab-case", "PaddleJob", rename("trainer.minInstance", "min-instance"),
        'unknown field "spec.trainer.min-instance"',
    ),
    case(
        "paddle-bad-quantity", "PaddleJob", put("trainer.resources.requests.cpu", "200x"),
        "spec.trainer.resources.requests.cpu", "should match",
    ),
]
# fmt: on


@pytest.fixture(scope="module")
def crds_installed(cluster: LocalCluster) -> Iterator[None]:
    """The CRDs straight from crds/, removed again if this module added them.

    Server-side with forced conflicts, because a helm release may already own
    the same CRDs with the same content; then they stay.
    """
    absent = [
        name for name in CRDS if cluster.kubectl("get", "crd", name, check=False).returncode != 0
    ]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in CRDS)
    )
    yield
    if absent:
        cluster.kubectl("delete", "crd", *absent, "--ignore-not-found", "--timeout=120s")


def dry_run(cluster: LocalCluster, namespace: str, kind: str, spec: Job, *flags: str) -> Any:
    return cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, *flags, "-f", "-",
        input=manifest(kind, spec), check=False,
    )  # fmt: skip


def test_table_is_large_enough() -> None:
    assert len(INVALID) >= 20
    assert {p.values[0] for p in INVALID} == set(VALID)


@pytest.mark.usefixtures("crds_installed")
@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_job_is_accepted(cluster: LocalCluster, namespace: str, kind: str) -> None:
    done = dry_run(cluster, namespace, kind, VALID[kind])
    assert done.returncode == 0, done.stderr


@pytest.mark.usefixtures("crds_installed")
@pytest.mark.parametrize(("kind", "spec", "expected"), INVALID)
def test_invalid_job_is_rejected(
    cluster: LocalCluster, namespace: str, kind: str, spec: Job, expected: tuple[str, ...]
) -> None:
    done = dry_run(cluster, namespace, kind, spec)
    assert done.returncode != 0, f"accepted: {json.dumps(spec)}"
    for text in expected:
        assert text in done.stderr, (text, done.stderr)


@pytest.mark.usefixtures("crds_installed")
def test_defaults_are_applied(cluster: LocalCluster, namespace: str) -> None:
    """What a user may leave out, the apiserver fills in as documented."""
    seen: dict[str, Job] = {}
    for kind in VALID:
        done = dry_run(cluster, namespace, kind, VALID[kind], "-o", "json")
        assert done.returncode == 0, done.stderr
        seen[kind] = json.loads(done.stdout)["spec"]

    tf = seen["TFJob"]
    assert {r["tfPort"] for r in tf["replicaSpecs"]} == {2222}
    assert {r["restartPolicy"] for r in tf["replicaSpecs"]} == {"ExitCode"}
    assert tf["runPolicy"] == {"cleanPodPolicy": "Running", "suspend": False}
    assert tf["tensorboard"]["serviceType"] == "ClusterIP"
    assert {r["psRootPort"] for r in seen["MXJob"]["replicaSpecs"]} == {9091}
    assert seen["Caffe2Job"]["backendSpecs"] == {"backendType": "redis", "redisPort": 6379}
    paddle = seen["PaddleJob"]
    assert (paddle["port"], paddle["portsNum"], paddle["portsNumForSparse"]) == (7164, 1, 0)
    assert paddle["trainer"]["passes"] == 1


@pytest.mark.usefixtures("crds_installed")
def test_caffe2_defaults_fill_a_bare_job(cluster: LocalCluster, namespace: str) -> None:
    """The newer Caffe2 seed's shape: no backendSpecs, no replicaType, redisHost given later."""
    spec: Job = {"replicaSpecs": [{"replicas": 2, "template": template("caffe2")}]}
    # Without backendSpecs the backend is redis without a host: a MASTER is needed.
    done = dry_run(cluster, namespace, "Caffe2Job", spec)
    assert done.returncode != 0
    assert "needs a MASTER" in done.stderr
    spec["backendSpecs"] = {"redisHost": "redis-service"}
    done = dry_run(cluster, namespace, "Caffe2Job", spec, "-o", "json")
    assert done.returncode == 0, done.stderr
    applied = json.loads(done.stdout)["spec"]
    assert applied["replicaSpecs"][0]["replicaType"] == "WORKER"
    assert applied["backendSpecs"]["backendType"] == "redis"


@pytest.mark.usefixtures("crds_installed")
def test_explain_shows_descriptions(cluster: LocalCluster) -> None:
    done = cluster.kubectl("explain", "tfjob.spec.replicaSpecs")
    text = " ".join(done.stdout.lower().split())
    assert "exactly one entry must have tfreplicatype master" in text
    done = cluster.kubectl("explain", "paddlejob.spec.trainer.minInstance")
    assert "min-instance" in done.stdout
