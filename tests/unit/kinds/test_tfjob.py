"""What a TFJob's children look like: TF_CONFIG, the default PS, GPUs, TensorBoard."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from dlk8s.job.config import parse_config
from dlk8s.job.kinds.tfjob import TFJOB

from ..support.worlds import first_children

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SCRIPT = "# the gRPC server\n"
GPU_CONFIG = parse_config(
    {
        "accelerators": {
            "nvidia.com/gpu": {
                "volumes": [
                    {
                        "name": "nvidia-libs",
                        "mountPath": "/usr/local/nvidia/lib64",
                        "hostPath": "/opt/nvidia/lib64",
                    },
                ],
                "envVars": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
            },
            "alpha.kubernetes.io/nvidia-gpu": {
                "volumes": [
                    {
                        "name": "nvidia-legacy",
                        "mountPath": "/usr/lib/nvidia",
                        "hostPath": "/usr/lib/nvidia-384",
                    },
                ],
                "envVars": [{"name": "NVIDIA_LEGACY", "value": "1"}],
            },
        },
        "tfImage": "tensorflow/tensorflow:2.16.1",
    },
    grpc_server_script=SCRIPT,
)


def container(name: str = "tensorflow", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "gcr.io/tf-on-k8s-dogfood/tf_sample:dc944ff", **extra}


def replica(role: str, replicas: int, *containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"tfReplicaType": role, "replicas": replicas, **extra}
    if containers:
        spec["template"] = {"spec": {"containers": list(containers), "restartPolicy": "OnFailure"}}
    return spec


def seed_job(*replica_specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    replica_specs = replica_specs or (
        replica("MASTER", 1, container()),
        replica("WORKER", 1, container()),
        replica("PS", 2),
    )
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": "example-job", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"replicaSpecs": list(replica_specs), **spec},
    }


def created(job: dict[str, Any], config: Any = GPU_CONFIG) -> dict[tuple[str, str], dict[str, Any]]:
    return first_children(job, config, NOW)


def pod(job: dict[str, Any], name: str, config: Any = GPU_CONFIG) -> dict[str, Any]:
    return created(job, config)[("Pod", name)]


def env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def the(p: dict[str, Any], name: str = "tensorflow") -> dict[str, Any]:
    [found] = [c for c in p["spec"]["containers"] if c["name"] == name]
    return found


# --- TF_CONFIG -------------------------------------------------------------------


def test_tf_config_of_the_seed_example_worker() -> None:
    value = env(the(pod(seed_job(), "example-job-worker-0")))["TF_CONFIG"]
    assert value == (
        '{"cluster":{"master":["example-job-master-0.ns.svc:2222"],'
        '"ps":["example-job-ps-0.ns.svc:2222","example-job-ps-1.ns.svc:2222"],'
        '"worker":["example-job-worker-0.ns.svc:2222"]},'
        '"environment":"cloud","task":{"index":0,"type":"worker"}}'
    )


def test_tf_config_task_of_each_replica() -> None:
    pods = created(seed_job())
    tasks = {
        name: json.loads(env(the(p))["TF_CONFIG"])["task"]
        for (kind, name), p in pods.items()
        if kind == "Pod"
    }
    assert tasks == {
        "example-job-master-0": {"type": "master", "index": 0},
        "example-job-worker-0": {"type": "worker", "index": 0},
        "example-job-ps-0": {"type": "ps", "index": 0},
        "example-job-ps-1": {"type": "ps", "index": 1},
    }


def test_tf_config_leaves_out_empty_roles_and_uses_each_port() -> None:
    job = seed_job(
        replica("MASTER", 1, container(), tfPort=3000), replica("WORKER", 0, container())
    )
    config = json.loads(env(the(pod(job, "example-job-master-0")))["TF_CONFIG"])
    assert config == {
        "cluster": {"master": ["example-job-master-0.ns.svc:3000"]},
        "task": {"type": "master", "index": 0},
        "environment": "cloud",
    }


def test_tf_config_replaces_a_user_value_and_keeps_other_variables() -> None:
    user_env = [{"name": "TF_CONFIG", "value": "stale"}, {"name": "MODEL", "value": "resnet"}]
    job = seed_job(replica("MASTER", 1, container(env=user_env)))
    variables = the(pod(job, "example-job-master-0"))["env"]
    assert [v["name"] for v in variables] == ["MODEL", "TF_CONFIG"]
    assert variables[0] == {"name": "MODEL", "value": "resnet"}
    assert json.loads(variables[1]["value"])["task"] == {"type": "master", "index": 0}


# --- TF_CONFIG for TensorFlow 2's strategies: the MASTER as `chief` ---------------


def chief_job(**tf_config: Any) -> dict[str, Any]:
    return seed_job(
        replica("MASTER", 1, container()),
        replica("WORKER", 2, container()),
        replica("PS", 1),
        tfConfig={"masterTaskType": "chief", **tf_config},
    )


def test_master_task_type_chief_names_the_master_chief_in_every_tf_config() -> None:
    pods = created(chief_job())
    configs = {
        name: json.loads(env(the(p))["TF_CONFIG"])
        for (kind, name), p in pods.items()
        if kind == "Pod"
    }
    cluster = {
        "chief": ["example-job-master-0.ns.svc:2222"],
        "worker": ["example-job-worker-0.ns.svc:2222", "example-job-worker-1.ns.svc:2222"],
        "ps": ["example-job-ps-0.ns.svc:2222"],
    }
    assert {name: c["cluster"] for name, c in configs.items()} == dict.fromkeys(configs, cluster)
    assert {name: c["task"] for name, c in configs.items()} == {
        "example-job-master-0": {"type": "chief", "index": 0},
        "example-job-worker-0": {"type": "worker", "index": 0},
        "example-job-worker-1": {"type": "worker", "index": 1},
        "example-job-ps-0": {"type": "ps", "index": 0},
    }


def test_master_task_type_chief_renames_nothing_of_kubernetes() -> None:
    """Pods, Services and labels keep the role MASTER: only TensorFlow's name changes."""
    children = created(chief_job())
    master = children[("Pod", "example-job-master-0")]
    assert master["metadata"]["labels"]["dlk8s.io/replica-type"] == "master"
    assert ("Service", "example-job-master-0") in children


def test_the_default_ps_server_is_told_the_chief_too() -> None:
    """The standard gRPC server builds its ClusterSpec from --cluster_spec: with
    `master` there, a PS and a `chief` would disagree on the cluster."""
    server = the(pod(chief_job(), "example-job-ps-0"))
    assert server["args"] == [
        "--cluster_spec=chief|example-job-master-0.ns.svc:2222;"
        "ps|example-job-ps-0.ns.svc:2222;"
        "worker|example-job-worker-0.ns.svc:2222,example-job-worker-1.ns.svc:2222",
        "--job_name=ps",
        "--task_id=0",
    ]


def test_master_task_type_master_is_the_default_and_the_seeds() -> None:
    explicit = seed_job(tfConfig={"masterTaskType": "master"})
    for job in (seed_job(), seed_job(tfConfig={}), explicit):
        config = json.loads(env(the(pod(job, "example-job-master-0")))["TF_CONFIG"])
        assert config["task"] == {"type": "master", "index": 0}
        assert sorted(config["cluster"]) == ["master", "ps", "worker"]


@pytest.mark.parametrize(
    ("tf_config", "problem"),
    [
        ({"masterTaskType": "chief"}, None),
        ({"masterTaskType": "master"}, None),
        ({}, None),
        (
            {"masterTaskType": "CHIEF"},
            "spec.tfConfig.masterTaskType: must be one of master, chief (got 'CHIEF')",
        ),
        ("chief", "spec.tfConfig: must be an object"),
    ],
)
def test_tf_config_problems(tf_config: Any, problem: str | None) -> None:
    problems = TFJOB.validate(seed_job(tfConfig=tf_config))
    assert problems == ([] if problem is None else [problem])


def test_only_tensorflow_containers_get_tf_config() -> None:
    job = seed_job(replica("MASTER", 1, container(), container("sidecar")))
    assert "env" not in the(pod(job, "example-job-master-0"), "sidecar")


# --- pods and services -------------------------------------------------------------


def test_pods_run_with_restart_policy_never_and_keep_template_metadata() -> None:
    job = seed_job(replica("MASTER", 1, container()))
    job["spec"]["replicaSpecs"][0]["template"]["metadata"] = {
        "labels": {"team": "vision", "dlk8s.io/replica-type": "spoofed"},
        "annotations": {"note": "kept"},
    }
    p = pod(job, "example-job-master-0")
    assert p["spec"]["restartPolicy"] == "Never"
    assert p["metadata"]["labels"]["team"] == "vision"
    assert p["metadata"]["labels"]["dlk8s.io/replica-type"] == "master"
    assert p["metadata"]["labels"]["dlk8s.io/replica-index"] == "0"
    assert p["metadata"]["annotations"] == {"note": "kept", "dlk8s.io/restart-count": "0"}


def test_the_job_spec_is_not_modified() -> None:
    job = seed_job()
    before = copy.deepcopy(job)
    created(job)
    assert job == before


def test_each_replica_gets_a_headless_service_selecting_its_pod() -> None:
    children = created(seed_job())
    service = children[("Service", "example-job-ps-1")]
    spec = service["spec"]
    assert spec["clusterIP"] == "None"
    assert spec["ports"] == [
        {"name": "tf-port", "port": 2222, "targetPort": 2222, "protocol": "TCP"}
    ]
    labels = children[("Pod", "example-job-ps-1")]["metadata"]["labels"]
    assert spec["selector"].items() <= labels.items()
    other = children[("Pod", "example-job-ps-0")]["metadata"]["labels"]
    assert not spec["selector"].items() <= other.items()


# --- the default PS ------------------------------------------------------------------


def test_a_ps_without_template_runs_the_standard_grpc_server() -> None:
    children = created(seed_job(tfImage="tensorflow/tensorflow:1.15.5"))
    p = children[("Pod", "example-job-ps-1")]
    server = the(p)
    assert server["image"] == "tensorflow/tensorflow:1.15.5"
    assert server["command"] == ["python", "/ps-server/grpc_tensorflow_server.py"]
    assert server["args"] == [
        "--cluster_spec=master|example-job-master-0.ns.svc:2222;"
        "ps|example-job-ps-0.ns.svc:2222,example-job-ps-1.ns.svc:2222;"
        "worker|example-job-worker-0.ns.svc:2222",
        "--job_name=ps",
        "--task_id=1",
    ]
    assert server["volumeMounts"] == [
        {"name": "ps-grpc-server", "mountPath": "/ps-server", "readOnly": True}
    ]
    assert p["spec"]["volumes"] == [
        {"name": "ps-grpc-server", "configMap": {"name": "example-job-ps-grpc-server"}}
    ]
    configmap = children[("ConfigMap", "example-job-ps-grpc-server")]
    assert configmap["data"] == {"grpc_tensorflow_server.py": SCRIPT}


def test_the_default_server_image_falls_back_to_the_controller_config() -> None:
    assert the(pod(seed_job(), "example-job-ps-0"))["image"] == "tensorflow/tensorflow:2.16.1"


def test_a_ps_template_without_tensorflow_gets_the_server_next_to_its_containers() -> None:
    job = seed_job(replica("MASTER", 1, container()), replica("PS", 1, container("exporter")))
    p = pod(job, "example-job-ps-0")
    assert [c["name"] for c in p["spec"]["containers"]] == ["exporter", "tensorflow"]


def test_a_ps_with_its_own_tensorflow_container_needs_no_configmap() -> None:
    job = seed_job(replica("MASTER", 1, container()), replica("PS", 1, container()))
    children = created(job)
    assert ("ConfigMap", "example-job-ps-grpc-server") not in children
    assert "command" not in the(children[("Pod", "example-job-ps-0")])


# --- GPUs --------------------------------------------------------------------------


def test_a_container_limiting_nvidia_gpu_gets_the_driver() -> None:
    gpu = container(resources={"limits": {"nvidia.com/gpu": 1}})
    p = pod(seed_job(replica("MASTER", 1, gpu, container("sidecar"))), "example-job-master-0")
    assert p["spec"]["volumes"] == [
        {"name": "nvidia-libs", "hostPath": {"path": "/opt/nvidia/lib64"}}
    ]
    assert the(p)["volumeMounts"] == [
        {"name": "nvidia-libs", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True}
    ]
    assert env(the(p))["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    sidecar = the(p, "sidecar")
    assert "volumeMounts" not in sidecar
    assert "env" not in sidecar


def test_the_legacy_gpu_resource_name_works_in_requests_too() -> None:
    gpu = container(resources={"requests": {"alpha.kubernetes.io/nvidia-gpu": 1}})
    p = pod(seed_job(replica("MASTER", 1, gpu)), "example-job-master-0")
    assert p["spec"]["volumes"] == [
        {"name": "nvidia-legacy", "hostPath": {"path": "/usr/lib/nvidia-384"}}
    ]
    assert the(p)["volumeMounts"] == [
        {"name": "nvidia-legacy", "mountPath": "/usr/lib/nvidia", "readOnly": True}
    ]
    assert env(the(p))["NVIDIA_LEGACY"] == "1"
    assert "LD_LIBRARY_PATH" not in env(the(p))


def test_gpu_injection_keeps_user_values_and_adds_each_volume_once() -> None:
    resources = {"limits": {"nvidia.com/gpu": 2}}
    user_env = [{"name": "LD_LIBRARY_PATH", "value": "/mine"}]
    first = container(resources=resources, env=user_env)
    second = container("helper", resources=resources)
    p = pod(seed_job(replica("MASTER", 1, first, second)), "example-job-master-0")
    assert [v["name"] for v in p["spec"]["volumes"]] == ["nvidia-libs"]
    ld_paths = [e["value"] for e in the(p)["env"] if e["name"] == "LD_LIBRARY_PATH"]
    assert ld_paths == ["/mine"]
    assert env(the(p, "helper"))["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert the(p, "helper")["volumeMounts"] == [
        {"name": "nvidia-libs", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True}
    ]


# --- TensorBoard -----------------------------------------------------------------


def test_tensorboard_deployment_and_service() -> None:
    board = {
        "logDir": "/tmp/tensorflow",
        "volumes": [{"name": "azurefile", "azureFile": {"secretName": "s", "shareName": "data"}}],
        "volumeMounts": [{"name": "azurefile", "mountPath": "/tmp/tensorflow"}],
        "serviceType": "LoadBalancer",
    }
    public = replace(GPU_CONFIG, tensorboard_service_types=("ClusterIP", "LoadBalancer"))
    children = created(seed_job(tensorboard=board), public)
    deployment = children[("Deployment", "example-job-tensorboard")]
    assert deployment["apiVersion"] == "apps/v1"
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    [board_container] = spec["template"]["spec"]["containers"]
    assert board_container["image"] == "tensorflow/tensorflow:2.16.1"
    assert board_container["command"] == [
        "tensorboard",
        "--logdir=/tmp/tensorflow",
        "--host=0.0.0.0",
        "--port=6006",
    ]
    assert board_container["volumeMounts"] == board["volumeMounts"]
    assert spec["template"]["spec"]["volumes"] == board["volumes"]
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
    service = children[("Service", "example-job-tensorboard")]
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": 6006, "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]


def test_tensorboard_service_defaults_to_cluster_ip() -> None:
    children = created(seed_job(tensorboard={"logDir": "gs://bucket/logs"}))
    assert children[("Service", "example-job-tensorboard")]["spec"]["type"] == "ClusterIP"


def test_every_manifest_is_plain_json() -> None:
    job = seed_job(tensorboard={"logDir": "/logs"})
    for obj in created(job).values():
        assert json.loads(json.dumps(obj)) == obj
