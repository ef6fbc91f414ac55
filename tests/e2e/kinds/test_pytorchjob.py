"""PyTorchJob end to end: the operator runs as a local process with the chart's RBAC.

The variables expected are written from Kubeflow's PyTorchJob documentation
and torchrun's (see tests/unit/kinds/test_pytorchjob.py); here they are
checked on the pods the API server holds, beside the Services, the status,
the printer columns and what the API server refuses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster

from ..helpers import (
    apply,
    condition,
    container,
    env_of,
    example,
    finish_pod,
    get_json,
    job_manifest,
    job_status,
    pods_of,
    services_of,
    wait_for_phase,
    wait_for_pods,
    wait_for_replacement,
    wait_for_services,
    wait_for_state,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("operator")

DDP = "pytorchjob-ddp"
ELASTIC = "pytorchjob-elastic"
TORCHRUN = "pytorchjob-torchrun"


def pytorchjob(name: str, roles: dict[str, int], **spec: Any) -> dict[str, Any]:
    return job_manifest("PyTorchJob", name, roles, "pytorch", **spec)


def torch_env(pod: dict[str, Any]) -> dict[str, str]:
    """The `pytorch` container's plain variables (not those read from the pod)."""
    env = container(pod, "pytorch").get("env", [])
    return env_of({"env": [e for e in env if "valueFrom" not in e]})


def start(cluster: LocalCluster, namespace: str, job: str, *pods: str) -> dict[str, Any]:
    """tests/data/kwok/<job>.yaml applied, once these pods of it run."""
    apply(cluster, namespace, example(f"{job}.yaml"))
    return wait_for_pods(cluster, namespace, job, {f"{job}-{pod}" for pod in pods})


def test_kubeflow_job_makes_pods_services_and_kubeflows_variables(
    cluster: LocalCluster, namespace: str
) -> None:
    pods = start(cluster, namespace, DDP, "master-0", "worker-0", "worker-1")
    services = wait_for_services(cluster, namespace, DDP, set(pods))
    for name, svc in services.items():
        assert svc["spec"]["clusterIP"] == "None"
        ports = [(p["name"], p["port"]) for p in svc["spec"]["ports"]]
        assert ports == [("pytorchjob-port", 29500 if "master" in name else 23456)], name
    master = f"{DDP}-master-0.{namespace}.svc"
    for name, rank in (
        (f"{DDP}-master-0", "0"),
        (f"{DDP}-worker-0", "1"),
        (f"{DDP}-worker-1", "2"),
    ):
        assert torch_env(pods[name]) == {
            "MASTER_ADDR": master,
            "MASTER_PORT": "29500",
            "WORLD_SIZE": "3",
            "RANK": rank,
            "PET_MASTER_ADDR": master,
            "PET_MASTER_PORT": "29500",
            "PET_NNODES": "3",
            "PET_NODE_RANK": rank,
            "PET_NPROC_PER_NODE": "auto",
            "PYTHONUNBUFFERED": "1",
        }, name
        labels = pods[name]["metadata"]["labels"]
        assert labels["dlk8s.io/job-kind"] == "pytorchjob"
        owner = pods[name]["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchJob", DDP, True)
    # state Running spans phases Creating and Running: wait for the phase.
    status = wait_for_phase(cluster, namespace, "PyTorchJob", DDP, "Running")
    assert status["state"] == "Running"


def test_master_exit_0_succeeds_and_kubeflows_clean_pod_policy_keeps_the_worker(
    cluster: LocalCluster, namespace: str
) -> None:
    pods = start(cluster, namespace, TORCHRUN, "master-0", "worker-0")
    assert torch_env(pods[f"{TORCHRUN}-worker-0"])["WORLD_SIZE"] == "4"
    finish_pod(cluster, namespace, f"{TORCHRUN}-master-0", 0)
    status = wait_for_phase(cluster, namespace, "PyTorchJob", TORCHRUN, "Done")
    assert status["state"] == "Succeeded"
    # cleanPodPolicy None, as convert keeps Kubeflow's default: nothing is stopped.
    left = pods_of(cluster, namespace, TORCHRUN)
    assert left[f"{TORCHRUN}-worker-0"]["status"]["phase"] == "Running"
    assert services_of(cluster, namespace, TORCHRUN).keys() == pods.keys()


def test_master_exit_0_with_clean_pod_policy_running_stops_the_workers(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, pytorchjob("tidy", {"MASTER": 1, "WORKER": 1}))
    wait_for_pods(cluster, namespace, "tidy", {"tidy-master-0", "tidy-worker-0"})
    finish_pod(cluster, namespace, "tidy-master-0", 0)
    assert wait_for_phase(cluster, namespace, "PyTorchJob", "tidy", "Done")["state"] == "Succeeded"
    wait_until(
        lambda: set(pods_of(cluster, namespace, "tidy")) == {"tidy-master-0"},
        what="the worker to be cleaned up",
    )
    wait_until(lambda: not services_of(cluster, namespace, "tidy"), what="no services")


def test_master_exit_1_fails_the_job_and_137_recreates_it(
    cluster: LocalCluster, namespace: str
) -> None:
    """torchrun exits 1 once its group failed maxRestarts times, 137 when SIGKILLed."""
    apply(cluster, namespace, pytorchjob("torn", {"MASTER": 1, "WORKER": 1}))
    pods = wait_for_pods(cluster, namespace, "torn", {"torn-master-0", "torn-worker-0"})
    finish_pod(cluster, namespace, "torn-master-0", 137)
    wait_for_replacement(
        cluster, namespace, "torn", "torn-master-0", pods["torn-master-0"]["metadata"]["uid"]
    )
    wait_for_pods(cluster, namespace, "torn", {"torn-master-0", "torn-worker-0"})
    finish_pod(cluster, namespace, "torn-master-0", 1)
    status = wait_for_phase(cluster, namespace, "PyTorchJob", "torn", "Failed")
    assert (status["state"], status["reason"], status["restartCount"]) == (
        "Failed",
        "ReplicaFailed",
        1,
    )
    failed = condition(status, "Failed")
    assert failed is not None
    assert "exited with code 1" in failed["message"]
    wait_until(
        lambda: set(pods_of(cluster, namespace, "torn")) == {"torn-master-0"},
        what="the worker to be stopped, nothing recreated",
    )


def test_the_autoscaler_grows_an_elastic_job_and_no_variable_goes_stale(
    cluster: LocalCluster, namespace: str
) -> None:
    """The session's operator runs the chart's autoscaler: the kwok nodes have
    room, so the job asking for 2 WORKERs of 1 to 3 is given 3, each pod with
    exactly the variables of the others and its own address."""
    pods = start(cluster, namespace, ELASTIC, "worker-0", "worker-1", "worker-2")
    runtime_id = wait_until(
        lambda: job_status(cluster, namespace, "PyTorchJob", ELASTIC).get("runtimeId"),
        what="a runtime id in the status",
    )
    expected = {
        "PET_RDZV_CONF": "join_timeout=600",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"{ELASTIC}-worker-0:23456",
        "PET_RDZV_ID": runtime_id,
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "10",
        "PET_NPROC_PER_NODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "USE_LIBUV": "0",
    }
    assert {name: torch_env(pod) for name, pod in pods.items()} == dict.fromkeys(pods, expected)
    for name, pod in pods.items():
        [local] = [e for e in container(pod, "pytorch")["env"] if e["name"] == "PET_LOCAL_ADDR"]
        assert local == {
            "name": "PET_LOCAL_ADDR",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
        }, name
    job = get_json(cluster, "pytorchjob", ELASTIC, "-n", namespace)
    assert job["metadata"]["annotations"]["dlk8s.io/workers"] == "3"
    assert job["metadata"]["annotations"]["dlk8s.io/workers-reason"], job["metadata"]
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "PyTorchJob", ELASTIC)).get("workers") == 3 and s
        ),
        what="status.workers 3",
    )
    assert status["lastScaleReason"], status

    for name in sorted(pods):
        finish_pod(cluster, namespace, name, 0)
    status = wait_for_phase(cluster, namespace, "PyTorchJob", ELASTIC, "Done")
    assert status["state"] == "Succeeded"
    assert condition(status, "Succeeded")["message"].startswith("all 3 WORKER pods succeeded")


def test_the_api_server_keeps_an_elastic_policy_as_it_was(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("pytorchjob-elastic.yaml"))
    for patch in (
        {"spec": {"elasticPolicy": {"maxReplicas": 2}}},
        {"spec": {"elasticPolicy": None}},
    ):
        out = cluster.kubectl(
            "patch", "pytorchjob", ELASTIC, "-n", namespace, "--type=merge",
            "-p", json.dumps(patch), check=False,
        )  # fmt: skip
        assert out.returncode != 0, patch
        assert "spec.elasticPolicy" in out.stderr, out.stderr
    static = pytorchjob("static", {"WORKER": 2})
    apply(cluster, namespace, static)
    elastic = {"spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 2}}}
    out = cluster.kubectl(
        "patch", "pytorchjob", "static", "-n", namespace, "--type=merge",
        "-p", json.dumps(elastic), check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "cannot be added or removed once the job exists" in out.stderr


def test_printer_columns_show_the_workers_and_the_bounds(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("pytorchjob-elastic.yaml"))
    wait_for_state(cluster, namespace, "PyTorchJob", ELASTIC, "Running")

    def row() -> dict[str, str]:
        out = cluster.kubectl("get", "ptj", ELASTIC, "-n", namespace, "-o", "wide").stdout
        header, line = out.strip().splitlines()
        return dict(zip(header.split(), line.split(), strict=True))

    # The autoscaler gives it all three WORKERs the kwok nodes have room for.
    shown = wait_until(
        lambda: (r := row())["RUNNING"] == "3" and r["WORKERS"] == "3" and r,
        what="three running pods",
    )
    assert (shown["MIN"], shown["MAX"]) == ("1", "3")
    assert (shown["STATE"], shown["PHASE"]) == ("Running", "Running")
    everything = cluster.kubectl("get", "dlk8s", "-n", namespace, "-o", "name").stdout.split()
    assert f"pytorchjob.dlk8s.io/{ELASTIC}" in everything
