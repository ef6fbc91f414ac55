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
from collections.abc import Callable
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster

pytestmark = pytest.mark.e2e

API_VERSION = "dlk8s.io/v1alpha1"

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
            # Placement, pull secrets and a sidecar: what a real cluster asks for.
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "imagePullSecrets": [{"name": "regcred"}],
                    "containers": [
                        {"name": "paddle", "volumeMounts": [{"name": "d", "mountPath": "/d"}]},
                        {"name": "logs", "image": "busybox"},
                    ],
                    "volumes": [{"name": "d", "emptyDir": {}}],
                },
            },
        },
        "pserver": {"minInstance": 2, "maxInstance": 2, "template": {"spec": {}}},
        "master": {"template": {"spec": {"priorityClassName": "high"}}},
    },
    "PyTorchJob": {
        "nprocPerNode": 2,
        "replicaSpecs": [
            {"pytorchReplicaType": "MASTER", "replicas": 1, "template": template("pytorch")},
            {"pytorchReplicaType": "WORKER", "replicas": 2, "template": template("pytorch")},
        ],
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


def failure_rules(*rules: Any) -> Callable[[Job], None]:
    """spec.runPolicy.podFailurePolicy with these rules."""
    return put("runPolicy", {"podFailurePolicy": {"rules": list(rules)}})


def exit_rule(action: str, operator: str, *values: int, **extra: Any) -> Job:
    return {"action": action, "onExitCodes": {"operator": operator, "values": list(values)}} | extra


RULES = "spec.runPolicy.podFailurePolicy.rules"


def both(*changes: Callable[[Job], None]) -> Callable[[Job], None]:
    def change(spec: Job) -> None:
        for c in changes:
            c(spec)

    return change


def elastic(spec: Job) -> None:
    """PyTorchJob's WORKERs alone, made elastic (replicaSpecs[0] is then the
    WORKER); a new elasticPolicy each time, since the cases change it."""
    del spec["replicaSpecs"][0]
    spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}


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
    case(
        "run-policy-unknown-success-policy", "TFJob", put("runPolicy", {"successPolicy": "Chief"}),
        "spec.runPolicy.successPolicy", "Unsupported value", "Chief",
    ),
    case(
        "failure-rule-unknown-action", "TFJob", failure_rules(exit_rule("Retry", "In", 1)),
        f"{RULES}[0].action", "Unsupported value", "Retry",
    ),
    case(
        "failure-rule-matching-nothing", "TFJob", failure_rules({"action": "Count"}),
        f"{RULES}[0]", "a rule needs exactly one of onExitCodes and onPodConditions",
    ),
    case(
        "failure-rule-matching-twice", "TFJob",
        failure_rules(exit_rule("Count", "In", 1, onPodConditions=[{"type": "Ready"}])),
        f"{RULES}[0]", "a rule needs exactly one of onExitCodes and onPodConditions",
    ),
    case(
        "failure-rule-exit-code-past-255", "TFJob", failure_rules(exit_rule("FailJob", "In", 256)),
        f"{RULES}[0].onExitCodes.values[0]", "less than or equal to 255",
    ),
    case(
        "failure-rule-negative-exit-code", "TFJob",
        failure_rules(exit_rule("FailJob", "NotIn", -1)),
        f"{RULES}[0].onExitCodes.values[0]", "greater than or equal to 0",
    ),
    case(
        "failure-rule-in-zero", "TFJob", failure_rules(exit_rule("Ignore", "In", 0, 3)),
        f"{RULES}[0].onExitCodes.values", "may not hold 0 with operator In",
    ),
    case(
        "failure-rule-repeated-exit-code", "TFJob", failure_rules(exit_rule("Ignore", "In", 3, 3)),
        f"{RULES}[0].onExitCodes.values[1]", "Duplicate value",
    ),
    case(
        "failure-rule-no-exit-codes", "TFJob", failure_rules(exit_rule("Ignore", "NotIn")),
        f"{RULES}[0].onExitCodes.values", "at least 1 items",
    ),
    case(
        "failure-rule-unknown-operator", "TFJob", failure_rules(exit_rule("Count", "Equals", 1)),
        f"{RULES}[0].onExitCodes.operator", "Unsupported value",
    ),
    case(
        "failure-rule-condition-without-type", "TFJob",
        failure_rules({"action": "Ignore", "onPodConditions": [{"status": "True"}]}),
        f"{RULES}[0].onPodConditions[0].type", "Required value",
    ),
    case(
        "failure-rule-condition-status", "TFJob",
        failure_rules({"action": "Ignore", "onPodConditions": [{"type": "X", "status": "Yes"}]}),
        f"{RULES}[0].onPodConditions[0].status", "Unsupported value",
    ),
    case(
        "failure-rules-too-many", "TFJob", failure_rules(*[exit_rule("Count", "In", 1)] * 21),
        RULES, "must have at most 20 items",
    ),
    case(
        "failure-rule-role-of-no-tfjob", "TFJob",
        failure_rules(exit_rule("FailJob", "In", 42, replicaTypes=["CHIEF"])),
        "spec.runPolicy.podFailurePolicy",
        "replicaTypes may name only the roles of a TFJob (MASTER, WORKER, PS)",
    ),
    # --- MXJob ---------------------------------------------------------------
    case(
        "mx-failure-rule-role-of-a-tfjob", "MXJob",
        failure_rules(exit_rule("FailJob", "In", 42, replicaTypes=["PS"])),
        "spec.runPolicy.podFailurePolicy",
        "replicaTypes may name only the roles of a MXJob (SCHEDULER, SERVER, WORKER)",
    ),
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
    case(
        "paddle-template-sets-the-image", "PaddleJob",
        put("trainer.template.spec.containers[0].image", "other:1"),
        "spec.trainer.template.spec.containers", "takes its image from spec.image",
    ),
    case(
        "paddle-template-takes-our-volume", "PaddleJob",
        put("pserver.template.spec.volumes", [{"name": "dlk8s-trainers", "emptyDir": {}}]),
        "spec.pserver.template.spec.volumes", "are the operator's own",
    ),
    case(
        "paddle-template-takes-the-launchers-logs", "PaddleJob",
        put("trainer.template.spec.volumes", [{"name": "dlk8s-paddle-log", "emptyDir": {}}]),
        "spec.trainer.template.spec.volumes", "are the operator's own",
    ),
    case(
        "paddle-no-pservers-not-fault-tolerant", "PaddleJob",
        both(
            put("faultTolerant", False), put("trainer.minInstance", 4),
            put("pserver.minInstance", 0), put("pserver.maxInstance", 0),
        ),
        "spec.pserver.minInstance", "may be 0 only in a fault-tolerant job",
    ),
    case(
        "paddle-master-template-etcd", "PaddleJob",
        put("master.template.spec.containers", [{"name": "etcd", "image": "etcd:3"}]),
        "spec.master.template.spec.containers", "etcd is the operator's",
    ),
    # --- PyTorchJob ----------------------------------------------------------
    case(
        "pt-master-two-replicas", "PyTorchJob", put("replicaSpecs[0].replicas", 2),
        "spec.replicaSpecs[0].replicas", "replicas must be 1 for pytorchReplicaType MASTER",
    ),
    case(
        "pt-kubeflow-role-name", "PyTorchJob", put("replicaSpecs[1].pytorchReplicaType", "Worker"),
        "spec.replicaSpecs[1].pytorchReplicaType", "Unsupported value", "Worker",
    ),
    case(
        "pt-kubeflow-replica-map", "PyTorchJob", rename("replicaSpecs", "pytorchReplicaSpecs"),
        'unknown field "spec.pytorchReplicaSpecs"',
    ),
    case(
        "pt-without-pytorch-container", "PyTorchJob",
        put("replicaSpecs[1].template.spec.containers[0].name", "trainer"),
        "spec.replicaSpecs[1].template.spec.containers", "container named pytorch",
    ),
    case(
        "pt-port-out-of-range", "PyTorchJob", put("replicaSpecs[0].pytorchPort", 70000),
        "spec.replicaSpecs[0].pytorchPort", "less than or equal to 65535",
    ),
    case(
        "pt-nproc-zero", "PyTorchJob", put("nprocPerNode", 0),
        "spec.nprocPerNode", "must be 1 to 1024 or one of auto, cpu, gpu",
    ),
    case(
        "pt-nproc-unknown-word", "PyTorchJob", put("nprocPerNode", "all"),
        "spec.nprocPerNode", "must be 1 to 1024 or one of auto, cpu, gpu",
    ),
    case(
        "pt-elastic-min-above-max", "PyTorchJob",
        both(elastic, put("elasticPolicy.minReplicas", 4), put("elasticPolicy.maxReplicas", 3)),
        "spec.elasticPolicy.minReplicas", "must not exceed spec.elasticPolicy.maxReplicas",
    ),
    case(
        "pt-elastic-workers-outside-bounds", "PyTorchJob",
        both(elastic, put("elasticPolicy.maxReplicas", 1)),
        "spec.replicaSpecs", "an elastic job needs a WORKER entry whose replicas lie within",
    ),
    case(
        "pt-elastic-without-max", "PyTorchJob", both(elastic, remove("elasticPolicy.maxReplicas")),
        "spec.elasticPolicy.maxReplicas", "Required value",
    ),
    case(
        "pt-elastic-zero-workers", "PyTorchJob", both(elastic, put("elasticPolicy.minReplicas", 0)),
        "spec.elasticPolicy.minReplicas", "greater than or equal to 1",
    ),
    case(
        "pt-elastic-two-places-for-nproc", "PyTorchJob",
        both(elastic, put("elasticPolicy.nProcPerNode", 2)),
        "spec.elasticPolicy.nProcPerNode", "must not be set together with spec.nprocPerNode",
    ),
    case(
        "pt-elastic-kubeflow-backend", "PyTorchJob",
        both(elastic, put("elasticPolicy.rdzvBackend", "etcd")),
        'unknown field "spec.elasticPolicy.rdzvBackend"',
    ),
    case(
        "paddle-all-workers", "PaddleJob", put("runPolicy", {"successPolicy": "AllWorkers"}),
        "spec.runPolicy.successPolicy", "AllWorkers needs a WORKER role, and a PaddleJob has none",
    ),
    case(
        "paddle-failure-rule-role-of-a-tfjob", "PaddleJob",
        failure_rules(exit_rule("Ignore", "In", 3, replicaTypes=["WORKER"])),
        "spec.runPolicy.podFailurePolicy",
        "replicaTypes may name only the roles of a PaddleJob (MASTER, PSERVER, TRAINER)",
    ),
]
# fmt: on


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
def test_a_fault_tolerant_paddlejob_without_pservers_is_accepted(
    cluster: LocalCluster, namespace: str
) -> None:
    spec = copy.deepcopy(VALID["PaddleJob"])
    spec["pserver"] = {"minInstance": 0, "maxInstance": 0}
    done = dry_run(cluster, namespace, "PaddleJob", spec)
    assert done.returncode == 0, done.stderr


# Sound policies of every kind, each with the roles of its kind: accepted.
POLICIES = {
    "TFJob": ("AllWorkers", ["MASTER"], ["WORKER", "PS"]),
    "MXJob": ("DecidingReplica", ["SCHEDULER"], ["SERVER", "WORKER"]),
    "Caffe2Job": ("NoFailedReplicas", ["MASTER"], ["WORKER"]),
    "PaddleJob": ("DecidingReplica", ["TRAINER"], ["MASTER", "PSERVER"]),
}


@pytest.mark.usefixtures("crds_installed")
@pytest.mark.parametrize("kind", sorted(POLICIES))
def test_sound_failure_and_success_policies_are_accepted(
    cluster: LocalCluster, namespace: str, kind: str
) -> None:
    success, deciding, others = POLICIES[kind]
    sidecar = {"containerName": "sidecar", "operator": "In", "values": [7]}
    rules = [
        exit_rule("FailJob", "In", 42, 43, replicaTypes=deciding),
        exit_rule("Ignore", "NotIn", 0, 1, 2, replicaTypes=others),
        {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": sidecar},
    ]
    spec = copy.deepcopy(VALID[kind])
    spec["runPolicy"] = {"successPolicy": success, "podFailurePolicy": {"rules": rules}}
    done = dry_run(cluster, namespace, kind, spec, "-o", "json")
    assert done.returncode == 0, done.stderr
    stored = json.loads(done.stdout)["spec"]["runPolicy"]
    assert stored["successPolicy"] == success
    # A condition's status defaults to True, as in a batch Job.
    assert stored["podFailurePolicy"]["rules"][2]["onPodConditions"] == [
        {"type": "DisruptionTarget", "status": "True"}
    ]


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
    # backoffLimit as a batch Job's: a pod that can never start is not
    # recreated for ever (docs/kinds.md).
    assert tf["runPolicy"] == {"cleanPodPolicy": "Running", "suspend": False, "backoffLimit": 6}
    assert tf["tensorboard"]["serviceType"] == "ClusterIP"
    assert {r["psRootPort"] for r in seen["MXJob"]["replicaSpecs"]} == {9091}
    assert seen["Caffe2Job"]["backendSpecs"] == {"backendType": "redis", "redisPort": 6379}
    paddle = seen["PaddleJob"]
    assert (paddle["port"], paddle["portsNum"], paddle["portsNumForSparse"]) == (7164, 1, 0)
    assert paddle["trainer"]["passes"] == 1
    torch = seen["PyTorchJob"]
    assert {r["pytorchPort"] for r in torch["replicaSpecs"]} == {23456}
    assert {r["restartPolicy"] for r in torch["replicaSpecs"]} == {"ExitCode"}
    assert torch["runPolicy"] == tf["runPolicy"]  # the same defaults for every kind


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
