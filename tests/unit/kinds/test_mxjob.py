"""MXJob: the seed examples' children, the SCHEDULER's exit codes, recreation.

Expected values are written from the MXNet fork's README and DESIGN.md
(DMLC_* variables, `{job}-{role}-{index}` names, headless Services on
psRootPort, default 9091), never copied from an output.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dlk8s.job import childnames
from dlk8s.job.config import parse_config

from ..support.malformed import check_every_mutation, check_every_running_mutation
from ..support.seeds import kwok_job
from ..support.worlds import (
    NOW,
    World,
    condition,
    creates,
    deletes,
    events,
    first_children,
    invalid_spec,
    replica_job,
    started,
)

UID = "0b7e5c1e-0000-4000-8000-00000000a001"
RUNTIME_ID = childnames.runtime_id(UID)
GPU_CONFIG = parse_config(
    {
        "accelerators": {
            "alpha.kubernetes.io/nvidia-gpu": {
                "volumes": [
                    {"name": "nvidia", "mountPath": "/usr/local/nvidia", "hostPath": "/opt/nv"}
                ],
                "envVars": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
            }
        }
    }
)
LINEAR = ["mx-test-dist-scheduler-0", "mx-test-dist-server-0", "mx-test-dist-worker-0"]


def seed(name: str) -> dict[str, Any]:
    return kwok_job(name, namespace="ns", uid=UID)


def mxjob(roles: dict[str, int], **spec: Any) -> dict[str, Any]:
    """A job named j with these replica counts, each with an mxnet container."""
    mxnet = {"name": "mxnet", "image": "mx:1"}
    return replica_job("MXJob", roles, role_field="mxReplicaType", main=mxnet, uid=UID, **spec)


def children(job: dict[str, Any], config: Any = GPU_CONFIG) -> dict[tuple[str, str], Any]:
    return first_children(job, config)


def mxnet(pod: dict[str, Any]) -> dict[str, Any]:
    [found] = [c for c in pod["spec"]["containers"] if c["name"] == "mxnet"]
    return found


def env(pod: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in mxnet(pod).get("env", [])]


def running(job: dict[str, Any]) -> World:
    return started(World(job))


# --- the seed examples --------------------------------------------------------


def test_linear_dist_example_makes_three_pods_and_three_headless_services() -> None:
    made = children(seed("mxjob-linear-dist.yaml"))
    assert sorted(made) == sorted(
        [("Pod", name) for name in LINEAR] + [("Service", name) for name in LINEAR]
    )
    for name, role in zip(LINEAR, ("scheduler", "server", "worker"), strict=True):
        service = made[("Service", name)]
        assert service["spec"] == {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {
                "dlk8s.io/job-name": "mx-test-dist",
                "dlk8s.io/runtime-id": RUNTIME_ID,
                "dlk8s.io/replica-type": role,
                "dlk8s.io/replica-index": "0",
            },
            "ports": [{"name": "mxnet-port", "port": 9091, "targetPort": 9091, "protocol": "TCP"}],
        }
        pod = made[("Pod", name)]
        assert pod["metadata"]["labels"] == {
            "dlk8s.io/job-name": "mx-test-dist",
            "dlk8s.io/job-kind": "mxjob",
            "dlk8s.io/runtime-id": RUNTIME_ID,
            "dlk8s.io/replica-type": role,
            "dlk8s.io/replica-index": "0",
        }
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "MXJob"
        # The seed's OnFailure: the operator recreates pods itself.
        assert pod["spec"]["restartPolicy"] == "Never"
        assert mxnet(pod)["image"] == "stefanofioravanzo/mxnet-linear-dist:cpu"
        assert mxnet(pod)["imagePullPolicy"] == "Always"


def test_linear_dist_example_variables() -> None:
    made = children(seed("mxjob-linear-dist.yaml"))
    shared = [
        ("DMLC_PS_ROOT_URI", "mx-test-dist-scheduler-0.ns.svc"),
        ("DMLC_PS_ROOT_PORT", "9091"),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "1"),
        ("DMLC_USE_KUBERNETES", "1"),
    ]
    assert env(made[("Pod", "mx-test-dist-scheduler-0")]) == [("DMLC_ROLE", "scheduler"), *shared]
    assert env(made[("Pod", "mx-test-dist-server-0")]) == [("DMLC_ROLE", "server"), *shared]
    assert env(made[("Pod", "mx-test-dist-worker-0")]) == [
        ("DMLC_ROLE", "worker"),
        *shared,
        ("DMLC_WORKER_ID", "0"),
    ]


def test_cifar_gpu_example_mounts_the_share_everywhere_and_the_driver_on_the_gpu_worker() -> None:
    made = children(seed("mxjob-cifar-gpu.yaml"))
    share = {
        "name": "myshare",
        "azureFile": {"secretName": "mxsecret", "shareName": "mxsn", "readOnly": False},
    }
    for role in ("scheduler", "server", "worker"):
        pod = made[("Pod", f"mx-cifar-gpu-{role}-0")]
        assert share in pod["spec"]["volumes"]
        assert {"mountPath": "/", "name": "myshare"} in mxnet(pod)["volumeMounts"]
        assert dict(env(pod))["DMLC_PS_ROOT_URI"] == "mx-cifar-gpu-scheduler-0.ns.svc"
    worker = made[("Pod", "mx-cifar-gpu-worker-0")]
    assert {"name": "nvidia", "hostPath": {"path": "/opt/nv"}} in worker["spec"]["volumes"]
    driver = {"name": "nvidia", "mountPath": "/usr/local/nvidia", "readOnly": True}
    assert driver in mxnet(worker)["volumeMounts"]
    assert dict(env(worker))["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    scheduler = made[("Pod", "mx-cifar-gpu-scheduler-0")]
    assert [v["name"] for v in scheduler["spec"]["volumes"]] == ["myshare"]
    assert "LD_LIBRARY_PATH" not in dict(env(scheduler))


# --- variables -----------------------------------------------------------------


def test_counts_worker_ids_and_the_schedulers_port() -> None:
    job = mxjob({"WORKER": 3, "SCHEDULER": 1, "SERVER": 2})
    job["spec"]["replicaSpecs"][1]["psRootPort"] = 9500
    job["spec"]["replicaSpecs"][2]["psRootPort"] = 9600
    made = children(job)
    pods = sorted(name for kind, name in made if kind == "Pod")
    assert pods == [
        "j-scheduler-0",
        "j-server-0",
        "j-server-1",
        "j-worker-0",
        "j-worker-1",
        "j-worker-2",
    ]
    for name in pods:
        values = dict(env(made[("Pod", name)]))
        assert values["DMLC_PS_ROOT_URI"] == "j-scheduler-0.ns.svc"
        assert values["DMLC_PS_ROOT_PORT"] == "9500"
        assert values["DMLC_NUM_SERVER"] == "2"
        assert values["DMLC_NUM_WORKER"] == "3"
    worker_ids = {
        name: dict(env(made[("Pod", name)])).get("DMLC_WORKER_ID")
        for name in pods
        if "scheduler" not in name
    }
    assert worker_ids == {
        "j-server-0": None,
        "j-server-1": None,
        "j-worker-0": "0",
        "j-worker-1": "1",
        "j-worker-2": "2",
    }
    assert made[("Service", "j-scheduler-0")]["spec"]["ports"][0]["port"] == 9500
    assert made[("Service", "j-server-1")]["spec"]["ports"][0]["port"] == 9600
    assert made[("Service", "j-worker-0")]["spec"]["ports"][0]["port"] == 9091


def test_a_job_without_servers_or_workers_says_zero() -> None:
    values = dict(env(children(mxjob({"SCHEDULER": 1}))[("Pod", "j-scheduler-0")]))
    assert (values["DMLC_NUM_SERVER"], values["DMLC_NUM_WORKER"]) == ("0", "0")


def test_only_mxnet_containers_get_the_variables_and_user_values_are_replaced() -> None:
    job = mxjob({"SCHEDULER": 1, "WORKER": 1})
    containers = job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"]
    containers[0]["env"] = [
        {"name": "DMLC_ROLE", "value": "server"},
        {"name": "PS_VERBOSE", "value": "1"},
    ]
    containers.append({"name": "logs", "image": "fluentd"})
    pod = children(job)[("Pod", "j-worker-0")]
    assert env(pod) == [
        ("PS_VERBOSE", "1"),
        ("DMLC_ROLE", "worker"),
        ("DMLC_PS_ROOT_URI", "j-scheduler-0.ns.svc"),
        ("DMLC_PS_ROOT_PORT", "9091"),
        ("DMLC_NUM_SERVER", "0"),
        ("DMLC_NUM_WORKER", "1"),
        ("DMLC_USE_KUBERNETES", "1"),
        ("DMLC_WORKER_ID", "0"),
    ]
    assert "env" not in pod["spec"]["containers"][1]


# --- the SCHEDULER decides -----------------------------------------------------


def test_scheduler_exit_0_succeeds_and_stops_servers_and_workers() -> None:
    world = running(seed("mxjob-linear-dist.yaml"))
    world.exit("mx-test-dist-scheduler-0", 0, container="mxnet")
    result = world.step()
    assert (result.status["state"], result.status["phase"]) == ("Succeeded", "CleanUp")
    assert condition(result.status, "Succeeded")["status"] == "True"  # type: ignore[index]
    world.past_cleanup_grace()
    result = world.step()
    assert deletes(result, "Pod") == ["mx-test-dist-server-0", "mx-test-dist-worker-0"]
    assert deletes(result, "Service") == sorted(LINEAR)
    status = world.step().status
    assert (status["state"], status["phase"]) == ("Succeeded", "Done")
    assert world.pods() == ["mx-test-dist-scheduler-0"]
    assert world.reconcile().actions == []


@pytest.mark.parametrize("code", [1, 64, 127])
def test_scheduler_exit_1_to_127_fails_the_job_for_good(code: int) -> None:
    world = running(seed("mxjob-linear-dist.yaml"))
    world.exit("mx-test-dist-scheduler-0", code, container="mxnet")
    result = world.step()
    status = result.status
    assert (status["state"], status["reason"], status["restartCount"]) == (
        "Failed",
        "ReplicaFailed",
        0,
    )
    assert f"exited with code {code}" in condition(status, "Failed")["message"]  # type: ignore[index]
    assert creates(result, "Pod") == []
    world.step()
    assert world.job["status"]["phase"] == "Failed"
    assert world.pods() == ["mx-test-dist-scheduler-0"]


@pytest.mark.parametrize("code", [128, 137, 255])
def test_scheduler_exit_128_to_255_recreates_it(code: int) -> None:
    world = running(seed("mxjob-linear-dist.yaml"))
    world.exit("mx-test-dist-scheduler-0", code, container="mxnet")
    world.later(10)  # the first back-off
    result = world.step()
    assert deletes(result, "Pod") == ["mx-test-dist-scheduler-0"]
    assert ("Warning", "Restarting") in events(result)
    result = world.step()
    assert creates(result, "Pod") == ["mx-test-dist-scheduler-0"]
    assert (result.status["state"], result.status["restartCount"]) == ("Running", 1)
    restarting = condition(result.status, "Restarting")
    assert restarting is not None
    assert restarting["status"] == "True"


@pytest.mark.parametrize(("pod", "code"), [("server", 1), ("server", 137), ("worker", 2)])
def test_a_failed_server_or_worker_is_recreated(pod: str, code: int) -> None:
    name = f"mx-test-dist-{pod}-0"
    world = running(seed("mxjob-linear-dist.yaml"))
    world.exit(name, code, container="mxnet")
    world.later(10)
    assert deletes(world.step(), "Pod") == [name]
    result = world.step()
    assert creates(result, "Pod") == [name]
    assert (result.status["state"], result.status["restartCount"]) == ("Running", 1)
    world.run(name)
    world.settle()
    assert world.job["status"]["phase"] == "Running"


def test_a_worker_that_succeeds_is_left_alone() -> None:
    world = running(seed("mxjob-linear-dist.yaml"))
    world.exit("mx-test-dist-worker-0", 0, container="mxnet")
    result = world.step()
    assert deletes(result) == []
    assert creates(result, "Pod") == []
    assert result.status["state"] == "Running"


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        ("All", []),
        ("None", LINEAR),
    ],
)
def test_clean_pod_policy_on_completion(policy: str, left: list[str]) -> None:
    world = running(seed("mxjob-linear-dist.yaml") | {"spec": _with_policy(policy)})
    world.exit("mx-test-dist-scheduler-0", 0, container="mxnet")
    world.settle()
    assert world.job["status"]["state"] == "Succeeded"
    assert world.pods() == left
    assert world.names("Service") == left


def _with_policy(policy: str) -> dict[str, Any]:
    spec = copy.deepcopy(seed("mxjob-linear-dist.yaml")["spec"])
    spec["runPolicy"] = {"cleanPodPolicy": policy}
    return spec


# --- what the CRD may not have caught ------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0].update(
                name="main"
            ),
            'spec.replicaSpecs[0].template.spec.containers: no container named "mxnet"',
        ),
        (
            lambda j: j["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0].update(
                name="server"
            ),
            'spec.replicaSpecs[1].template.spec.containers: no container named "mxnet"',
        ),
        (
            lambda j: j["spec"]["replicaSpecs"].pop(0),
            "spec.replicaSpecs: needs exactly one entry with mxReplicaType SCHEDULER (found 0)",
        ),
        (
            lambda j: j["spec"]["replicaSpecs"][0].update(replicas=2),
            "spec.replicaSpecs[0].replicas: must be 1 for SCHEDULER",
        ),
        (
            lambda j: j["spec"]["replicaSpecs"][2].update(mxReplicaType="PS"),
            "spec.replicaSpecs[2].mxReplicaType: must be one of SCHEDULER, SERVER, WORKER",
        ),
        (
            lambda j: j["spec"]["replicaSpecs"][0].update(psRootPort=0),
            "spec.replicaSpecs[0].psRootPort: must be an integer from 1 to 65535",
        ),
        (
            lambda j: j["spec"]["replicaSpecs"][1].pop("template"),
            "spec.replicaSpecs[1].template: must be an object",
        ),
    ],
)
def test_invalid_specs_name_the_problem(change: Any, message: str) -> None:
    job = seed("mxjob-linear-dist.yaml")
    change(job)
    assert message in invalid_spec(job, GPU_CONFIG)


def test_malformed_fields_never_raise() -> None:
    job = seed("mxjob-cifar-gpu.yaml")
    job["spec"]["replicaSpecs"][0]["psRootPort"] = 9000
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "All", "backoffLimit": 2}
    assert check_every_mutation(job, GPU_CONFIG, NOW) > 500


def test_malformed_fields_of_a_running_job_never_raise() -> None:
    world = running(seed("mxjob-linear-dist.yaml"))
    check_every_running_mutation(world.job, world.observed(), GPU_CONFIG, NOW)
