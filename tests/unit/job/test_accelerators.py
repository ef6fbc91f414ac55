"""GPU driver injection (dlk8s.job.accelerators): who gets what, and what stays the user's.

The end-to-end proof that these mounts and variables reach a running
container on a real node is tests/e2e/realnode/test_gpu_drivers.py.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from dlk8s.job.accelerators import inject_accelerators
from dlk8s.job.actions import Create
from dlk8s.job.config import parse_config
from dlk8s.job.reconcile import Observed, reconcile

GPU = "nvidia.com/gpu"
LEGACY = "alpha.kubernetes.io/nvidia-gpu"
# The azure preset's legacy entry names its volumes `lib` and `bin`: names a
# user's own template may well use too.
CONFIG = parse_config(
    {
        "accelerators": {
            GPU: {
                "volumes": [
                    {"name": "lib", "mountPath": "/usr/local/nvidia/lib64", "hostPath": "/opt/nv"},
                ],
                "envVars": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
            },
            LEGACY: {
                "volumes": [
                    {"name": "lib", "mountPath": "/usr/local/nvidia/lib64", "hostPath": "/nv-384"},
                    {"name": "bin", "mountPath": "/usr/local/nvidia/bin", "hostPath": "/nv-384/b"},
                ],
            },
        },
        "tfImage": "tensorflow/tensorflow:2.16.1",
    },
    grpc_server_script="print('ps')\n",
)
DRIVER_MOUNT = {"name": "lib", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True}


def gpu_container(name: str = "main", resource: str = GPU, count: Any = 1, **extra: Any) -> Any:
    return {"name": name, "image": "img", "resources": {"limits": {resource: count}}, **extra}


def injected(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod_spec = {"containers": copy.deepcopy(list(containers)), **copy.deepcopy(spec)}
    inject_accelerators(pod_spec, CONFIG.accelerators)
    return pod_spec


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_the_driver_is_mounted_read_only() -> None:
    """The hostPath is the node's driver install, shared by every GPU pod there."""
    spec = injected(gpu_container())
    assert spec["containers"][0]["volumeMounts"] == [DRIVER_MOUNT]
    assert spec["volumes"] == [{"name": "lib", "hostPath": {"path": "/opt/nv"}}]


@pytest.mark.parametrize("count", [0, "0", "0m"])
def test_a_container_asking_for_zero_gpus_gets_nothing(count: Any) -> None:
    """Templated charts write `nvidia.com/gpu: 0` for "no GPU"."""
    spec = injected(gpu_container(count=count))
    assert "volumeMounts" not in spec["containers"][0]
    assert "env" not in spec["containers"][0]
    assert "volumes" not in spec


def test_a_request_alone_counts_and_an_unparsable_quantity_is_not_dropped() -> None:
    requested = {"name": "a", "image": "img", "resources": {"requests": {GPU: "1"}}}
    odd = gpu_container("b", count="one")
    spec = injected(requested, odd)
    for container in spec["containers"]:
        assert container["volumeMounts"] == [DRIVER_MOUNT]


def test_only_the_container_that_asks_gets_the_driver() -> None:
    spec = injected(gpu_container(), {"name": "sidecar", "image": "img"})
    sidecar = spec["containers"][1]
    assert "volumeMounts" not in sidecar
    assert "env" not in sidecar


def test_init_containers_that_ask_get_it_too() -> None:
    spec = injected({"name": "main", "image": "img"}, initContainers=[gpu_container("warmup")])
    assert spec["initContainers"][0]["volumeMounts"] == [DRIVER_MOUNT]
    assert "volumeMounts" not in spec["containers"][0]


def test_a_user_volume_with_the_drivers_volume_name_stays_the_users() -> None:
    """Before, the GPU container got the user's emptyDir `lib` mounted at
    /usr/local/nvidia/lib64 (or, when it mounted `lib` itself, no driver)."""
    mine = {"name": "lib", "emptyDir": {}}
    own_mount = {"name": "lib", "mountPath": "/data"}
    spec = injected(gpu_container(volumeMounts=[own_mount]), volumes=[mine])
    assert spec["volumes"] == [mine, {"name": "lib-2", "hostPath": {"path": "/opt/nv"}}]
    assert spec["containers"][0]["volumeMounts"] == [
        own_mount,
        {**DRIVER_MOUNT, "name": "lib-2"},
    ]


def test_two_resources_sharing_a_volume_name_get_their_own_host_paths() -> None:
    """Both entries call a volume `lib`, on different host paths."""
    spec = injected(gpu_container("a"), gpu_container("b", resource=LEGACY))
    assert spec["volumes"] == [
        {"name": "lib", "hostPath": {"path": "/opt/nv"}},
        {"name": "lib-2", "hostPath": {"path": "/nv-384"}},
        {"name": "bin", "hostPath": {"path": "/nv-384/b"}},
    ]
    assert spec["containers"][0]["volumeMounts"] == [DRIVER_MOUNT]
    assert [m["name"] for m in spec["containers"][1]["volumeMounts"]] == ["lib-2", "bin"]


def test_containers_asking_for_the_same_resource_share_one_volume() -> None:
    spec = injected(gpu_container("a"), gpu_container("b"))
    assert [v["name"] for v in spec["volumes"]] == ["lib"]
    assert all(c["volumeMounts"] == [DRIVER_MOUNT] for c in spec["containers"])


def test_a_path_the_user_mounts_something_at_is_left_to_the_user() -> None:
    """Also when written with a trailing slash: two mounts at one path are
    refused by the API server."""
    own = {"name": "my-driver", "mountPath": "/usr/local/nvidia/lib64/"}
    spec = injected(gpu_container(volumeMounts=[own]), volumes=[{"name": "my-driver"}])
    assert spec["containers"][0]["volumeMounts"] == [own]
    assert spec["volumes"] == [{"name": "my-driver"}]
    assert env(spec["containers"][0]) == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}


def test_the_users_own_variable_wins() -> None:
    mine = [{"name": "LD_LIBRARY_PATH", "value": "/mine"}]
    spec = injected(gpu_container(env=mine))
    assert spec["containers"][0]["env"] == mine


def test_one_container_asking_for_both_resources_gets_each_path_once() -> None:
    both = {"name": "main", "image": "img", "resources": {"limits": {GPU: 1, LEGACY: 1}}}
    spec = injected(both)
    mounts = spec["containers"][0]["volumeMounts"]
    assert [m["mountPath"] for m in mounts] == ["/usr/local/nvidia/lib64", "/usr/local/nvidia/bin"]
    used = {m["name"] for m in mounts}
    assert [v["name"] for v in spec["volumes"]] == ["lib", "bin"]
    assert used == {"lib", "bin"}


def test_the_default_ps_grpc_server_the_operator_adds_gets_no_gpu() -> None:
    """Every template container of this TFJob asks for a GPU; the PS's gRPC
    server container, which the operator adds, asks for none and gets none."""
    template = {"spec": {"containers": [gpu_container("tensorflow")]}}
    monitor = {"spec": {"containers": [gpu_container("monitor")]}}
    job = {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {
            "replicaSpecs": [
                {"replicas": 1, "tfReplicaType": "MASTER", "template": template},
                {"replicas": 1, "tfReplicaType": "PS", "template": monitor},
            ]
        },
    }
    result = reconcile(job, Observed(), CONFIG, datetime(2026, 3, 1, tzinfo=UTC))
    pods = {
        a.obj["metadata"]["name"]: a.obj
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == "Pod"
    }
    ps = {c["name"]: c for c in pods["j-ps-0"]["spec"]["containers"]}
    assert set(ps) == {"monitor", "tensorflow"}
    assert DRIVER_MOUNT in ps["monitor"]["volumeMounts"]
    assert all(m["name"] != "lib" for m in ps["tensorflow"]["volumeMounts"])
    assert "LD_LIBRARY_PATH" not in env(ps["tensorflow"])
    master = pods["j-master-0"]["spec"]["containers"][0]
    assert DRIVER_MOUNT in master["volumeMounts"]


def test_the_host_path_type_is_carried_so_a_missing_driver_fails_the_start() -> None:
    config = parse_config(
        {
            "accelerators": {
                GPU: {
                    "volumes": [
                        {
                            "name": "lib",
                            "mountPath": "/l",
                            "hostPath": "/h/lib",
                            "type": "Directory",
                        },
                        {"name": "cuda", "mountPath": "/c", "hostPath": "/h/libcuda.so.1"},
                    ]
                }
            }
        }
    )
    pod_spec: dict[str, Any] = {"containers": [gpu_container()]}
    inject_accelerators(pod_spec, config.accelerators)
    assert {v["name"]: v["hostPath"] for v in pod_spec["volumes"]} == {
        "lib": {"path": "/h/lib", "type": "Directory"},
        "cuda": {"path": "/h/libcuda.so.1"},
    }
