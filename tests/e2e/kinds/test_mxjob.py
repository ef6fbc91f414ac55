"""MXJob end to end: the operator runs as a local process with the chart's RBAC."""

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
    wait_until,
)

pytestmark = pytest.mark.usefixtures("operator")

LINEAR = {"mx-test-dist-scheduler-0", "mx-test-dist-server-0", "mx-test-dist-worker-0"}


def mxjob(name: str, roles: dict[str, int]) -> dict[str, Any]:
    return job_manifest("MXJob", name, roles, "mxnet")


def test_seed_example_makes_pods_services_variables_and_labels(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("mxjob-linear-dist.yaml"))
    pods = wait_for_pods(cluster, namespace, "mx-test-dist", LINEAR)

    services = wait_for_services(cluster, namespace, "mx-test-dist", LINEAR)
    for name, svc in services.items():
        assert svc["spec"]["clusterIP"] == "None", name
        assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("mxnet-port", 9091)]

    shared = {
        "DMLC_PS_ROOT_URI": f"mx-test-dist-scheduler-0.{namespace}.svc",
        "DMLC_PS_ROOT_PORT": "9091",
        "DMLC_NUM_SERVER": "1",
        "DMLC_NUM_WORKER": "1",
        "DMLC_USE_KUBERNETES": "1",
    }
    expected = {
        "mx-test-dist-scheduler-0": {"DMLC_ROLE": "scheduler", **shared},
        "mx-test-dist-server-0": {"DMLC_ROLE": "server", **shared},
        "mx-test-dist-worker-0": {"DMLC_ROLE": "worker", **shared, "DMLC_WORKER_ID": "0"},
    }
    for name, variables in expected.items():
        pod = pods[name]
        assert env_of(container(pod, "mxnet")) == variables, name
        labels = pod["metadata"]["labels"]
        assert labels["dlk8s.io/job-name"] == "mx-test-dist"
        assert labels["dlk8s.io/job-kind"] == "mxjob"
        assert labels["dlk8s.io/replica-type"] == variables["DMLC_ROLE"]
        assert labels["dlk8s.io/replica-index"] == "0"
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "MXJob",
            "mx-test-dist",
            True,
        )
        assert pod["spec"]["restartPolicy"] == "Never"

    expected = {"SCHEDULER": {"Running": 1}, "SERVER": {"Running": 1}, "WORKER": {"Running": 1}}

    def counts() -> dict[str, Any]:
        status = job_status(cluster, namespace, "MXJob", "mx-test-dist")
        return {r["replicaType"]: r["replicasStates"] for r in status.get("replicaStatuses", [])}

    # The counts trail the state by a pass (pod events are batched for a second).
    wait_until(lambda: counts() == expected, timeout=30, what=f"replicaStatuses {expected}")
    # state Running spans phases Creating and Running: wait for the phase.
    status = wait_for_phase(cluster, namespace, "MXJob", "mx-test-dist", "Running")
    assert status["state"] == "Running"


def test_gpu_example_gets_the_driver_on_its_worker(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("mxjob-cifar-gpu.yaml"))
    names = {f"mx-cifar-gpu-{role}-0" for role in ("scheduler", "server", "worker")}
    pods = wait_for_pods(cluster, namespace, "mx-cifar-gpu", names)
    worker = pods["mx-cifar-gpu-worker-0"]
    # The example asks for the legacy resource: the seed chart's GKE mounts, no variable.
    host_paths = {v["hostPath"]["path"] for v in worker["spec"]["volumes"] if "hostPath" in v}
    assert host_paths == {"/home/kubernetes/bin/nvidia/lib", "/home/kubernetes/bin/nvidia/bin"}
    mounts = {m["mountPath"] for m in container(worker, "mxnet")["volumeMounts"]}
    assert {"/usr/local/nvidia/lib64", "/usr/local/bin/nvidia"} <= mounts
    assert "LD_LIBRARY_PATH" not in env_of(container(worker, "mxnet"))
    for pod in pods.values():
        assert "myshare" in {v["name"] for v in pod["spec"]["volumes"]}
        assert env_of(container(pod, "mxnet"))["DMLC_NUM_WORKER"] == "1"
    scheduler = pods["mx-cifar-gpu-scheduler-0"]
    assert not any("hostPath" in v for v in scheduler["spec"]["volumes"])


def test_scheduler_exit_0_succeeds_and_cleans_up(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("mxjob-linear-dist.yaml"))
    wait_for_pods(cluster, namespace, "mx-test-dist", LINEAR)
    finish_pod(cluster, namespace, "mx-test-dist-scheduler-0", 0)
    status = wait_for_phase(cluster, namespace, "MXJob", "mx-test-dist", "Done")
    assert status["state"] == "Succeeded"
    assert condition(status, "Succeeded")["status"] == "True"
    # cleanPodPolicy Running: the server and the worker are stopped, the
    # finished scheduler stays for its logs, the Services go.
    remaining = wait_until(
        lambda: (
            (p := pods_of(cluster, namespace, "mx-test-dist")).keys()
            == {"mx-test-dist-scheduler-0"}
            and p
        ),
        what="the server and worker to be cleaned up",
    )
    assert remaining["mx-test-dist-scheduler-0"]["status"]["phase"] == "Succeeded"
    wait_until(lambda: not services_of(cluster, namespace, "mx-test-dist"), what="services removed")


def test_scheduler_exit_1_fails_the_job_for_good(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, mxjob("perm", {"SCHEDULER": 1, "WORKER": 1}))
    wait_for_pods(cluster, namespace, "perm", {"perm-scheduler-0", "perm-worker-0"})
    finish_pod(cluster, namespace, "perm-scheduler-0", 1)
    status = wait_for_phase(cluster, namespace, "MXJob", "perm", "Failed")
    assert (status["state"], status["reason"]) == ("Failed", "ReplicaFailed")
    assert status.get("restartCount", 0) == 0
    assert "exited with code 1" in condition(status, "Failed")["message"]
    wait_until(
        lambda: set(pods_of(cluster, namespace, "perm")) == {"perm-scheduler-0"},
        what="the worker to be stopped",
    )


def test_scheduler_exit_137_recreates_it(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, mxjob("retry", {"SCHEDULER": 1, "SERVER": 1}))
    pods = wait_for_pods(cluster, namespace, "retry", {"retry-scheduler-0", "retry-server-0"})
    finish_pod(cluster, namespace, "retry-scheduler-0", 137)
    uid = pods["retry-scheduler-0"]["metadata"]["uid"]
    wait_for_replacement(cluster, namespace, "retry", "retry-scheduler-0", uid)
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "MXJob", "retry")).get("restartCount") == 1 and s
        ),
        what="restartCount 1",
    )
    assert status["state"] == "Running"
    assert condition(status, "Restarting") is not None

    def restart_events() -> list[str]:
        events = get_json(
            cluster, "events", "-n", namespace, "--field-selector", "involvedObject.name=retry"
        )["items"]
        return [e["message"] for e in events if e["reason"] == "Restarting"]

    [message] = wait_until(restart_events, what="a Restarting event")
    assert "SCHEDULER 0: container mxnet exited with code 137" in message


def test_failed_server_and_worker_are_recreated(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, mxjob("heal", {"SCHEDULER": 1, "SERVER": 1, "WORKER": 1}))
    names = {"heal-scheduler-0", "heal-server-0", "heal-worker-0"}
    pods = wait_for_pods(cluster, namespace, "heal", names)
    finish_pod(cluster, namespace, "heal-server-0", 1)
    finish_pod(cluster, namespace, "heal-worker-0", 137)
    for name in ("heal-server-0", "heal-worker-0"):
        wait_for_replacement(cluster, namespace, "heal", name, pods[name]["metadata"]["uid"])
    wait_for_pods(cluster, namespace, "heal", names)
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "MXJob", "heal")).get("restartCount") == 2
            and s.get("phase") == "Running"
            and s
        ),
        what="restartCount 2 and phase Running",
    )
    assert status["state"] == "Running"
    worker = pods_of(cluster, namespace, "heal")["heal-worker-0"]
    assert env_of(container(worker, "mxnet"))["DMLC_WORKER_ID"] == "0"


def test_a_server_without_mxnet_container_is_refused_by_the_crd(
    cluster: LocalCluster, namespace: str
) -> None:
    job = mxjob("no-mxnet", {"SCHEDULER": 1, "SERVER": 1})
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["name"] = "ps"
    out = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job), check=False)
    assert out.returncode != 0
    assert "spec.replicaSpecs[1].template.spec.containers" in out.stderr
    assert "container named mxnet" in out.stderr
