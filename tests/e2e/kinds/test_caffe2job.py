"""Caffe2Job end to end: the operator runs as a local process with the chart's RBAC."""

from __future__ import annotations

import base64
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
    get_or_none,
    holds_for,
    job_status,
    pods_of,
    services_of,
    wait_for_phase,
    wait_for_pods,
    wait_for_services,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("operator")

IN_MASTER = "example-job-redis-in-master"
IN_MASTER_PODS = {f"{IN_MASTER}-master-0", f"{IN_MASTER}-worker-0", f"{IN_MASTER}-worker-1"}
REDIS_SERVICE = f"{IN_MASTER}-redis"
WORKERS = {"example-job-worker-0", "example-job-worker-1"}


def caffe2_config(namespace: str, cluster: dict[str, list[str]], role: str, index: int) -> Any:
    addresses = {
        role: [f"{name}.{namespace}.svc:2222" for name in names] for role, names in cluster.items()
    }
    return {"cluster": addresses, "task": {"type": role, "index": index}}


def test_redis_example_with_an_existing_server(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("caffe2job-redis.yaml"))
    pods = wait_for_pods(cluster, namespace, "example-job", WORKERS)
    wait_for_services(cluster, namespace, "example-job", WORKERS)
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "Caffe2Job", "example-job")).get("runtimeId") and s
        ),
        what="a runtime id in the status",
    )
    runtime_id = status["runtimeId"]
    layout = {"worker": sorted(WORKERS)}
    for index, name in enumerate(sorted(WORKERS)):
        pod = pods[name]
        variables = env_of(container(pod, "caffe2"))
        assert json.loads(variables.pop("CAFFE2_CONFIG")) == caffe2_config(
            namespace, layout, "worker", index
        )
        assert variables == {
            "SHARD_ID": str(index),
            "NUM_SHARDS": "2",
            "RUN_ID": runtime_id,
            "REDIS_HOST": "redis-service",
            "REDIS_PORT": "6379",
            # GKE's GPU driver on the loader path, from the chart's cloud preset.
            "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        }
        labels = pod["metadata"]["labels"]
        assert {
            "caffe2_job_key": f"{namespace}-example-job",
            "caffe2_replica_index": str(index),
            "caffe2_replica_type": "worker",
            "group_name": "dlk8s.io",
            "runtime_id": runtime_id,
            "job_type": "WORKER",
            "task_index": str(index),
            "dlk8s.io/job-name": "example-job",
            "dlk8s.io/replica-type": "worker",
            "dlk8s.io/replica-index": str(index),
        }.items() <= labels.items()
        assert pod["spec"]["hostNetwork"] is True
        assert pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert [c["name"] for c in pod["spec"]["containers"]] == ["caffe2"]
        # GKE's device plugin mounts the driver itself: no hostPath in the pod.
        assert not any("hostPath" in v for v in pod["spec"].get("volumes", []))
    assert get_or_none(cluster, "service", "example-job-redis", "-n", namespace) is None


def test_redis_in_the_master_pod(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("caffe2job-redis-in-master.yaml"))
    pods = wait_for_pods(cluster, namespace, IN_MASTER, IN_MASTER_PODS)
    master = pods[f"{IN_MASTER}-master-0"]
    # redis is a native sidecar: it stops when caffe2 ends, and the pod completes.
    assert [c["name"] for c in master["spec"]["containers"]] == ["caffe2"]
    sidecars = master["spec"]["initContainers"]
    assert [(c["name"], c["restartPolicy"]) for c in sidecars] == [("redis", "Always")]
    redis = container(master, "redis")
    assert redis["command"][:3] == ["redis-server", "--port", "6379"]
    assert [p["containerPort"] for p in redis["ports"]] == [6379]
    # Its password: a Secret the operator made for the job, which the server
    # and every shard read; the API server holds it, random and owned.
    secret = get_json(cluster, "secret", REDIS_SERVICE, "-n", namespace)
    assert secret["immutable"] is True
    [owner] = secret["metadata"]["ownerReferences"]
    job_uid = get_json(cluster, "caffe2job", IN_MASTER, "-n", namespace)["metadata"]["uid"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Caffe2Job", job_uid, True)
    password = base64.b64decode(secret["data"]["password"])
    assert len(password) == 43, password
    reads = {"secretKeyRef": {"name": REDIS_SERVICE, "key": "password"}}
    assert {"name": "REDIS_PASSWORD", "valueFrom": reads} in redis["env"]
    assert redis["command"][3:5] == ["--requirepass", "$(REDIS_PASSWORD)"]
    for pod in pods.values():
        assert {"name": "REDIS_PASSWORD", "valueFrom": reads} in container(pod, "caffe2")["env"]

    services = wait_for_services(cluster, namespace, IN_MASTER, IN_MASTER_PODS | {REDIS_SERVICE})
    service = services[REDIS_SERVICE]["spec"]
    assert [(p["name"], p["port"]) for p in service["ports"]] == [("redis", 6379)]
    assert service["selector"]["dlk8s.io/replica-type"] == "master"

    # The cluster itself resolves the Service to the MASTER pod.
    def endpoints() -> set[str]:
        slices = get_json(
            cluster,
            "endpointslices",
            "-n",
            namespace,
            "-l",
            f"kubernetes.io/service-name={REDIS_SERVICE}",
        )["items"]
        return {
            address
            for piece in slices
            for endpoint in piece.get("endpoints") or []
            for address in endpoint["addresses"]
        }

    master_ip = master["status"]["podIP"]
    wait_until(lambda: endpoints() == {master_ip}, what="the redis Service's endpoint")

    layout = {"master": [f"{IN_MASTER}-master-0"], "worker": sorted(IN_MASTER_PODS)[1:]}
    shards = {
        f"{IN_MASTER}-master-0": ("master", 0, 0),
        f"{IN_MASTER}-worker-0": ("worker", 0, 1),
        f"{IN_MASTER}-worker-1": ("worker", 1, 2),
    }
    for name, (role, index, shard) in shards.items():
        pod = pods[name]
        variables = env_of(container(pod, "caffe2"))
        assert variables["REDIS_HOST"] == f"{REDIS_SERVICE}.{namespace}.svc"
        assert variables["REDIS_PORT"] == "6379"
        assert (variables["SHARD_ID"], variables["NUM_SHARDS"]) == (str(shard), "3")
        assert json.loads(variables["CAFFE2_CONFIG"]) == caffe2_config(
            namespace, layout, role, index
        )
        labels = pod["metadata"]["labels"]
        assert labels["job_type"] == role.upper()
        assert labels["task_index"] == str(shard)
        assert labels["caffe2_replica_index"] == str(index)


def test_nfs_example_mounts_the_export(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("caffe2job-nfs.yaml"))
    names = {"example-job-nfs-worker-0", "example-job-nfs-worker-1"}
    pods = wait_for_pods(cluster, namespace, "example-job-nfs", names)
    for pod in pods.values():
        nfs = [v["nfs"] for v in pod["spec"]["volumes"] if "nfs" in v]
        assert nfs == [{"server": "nfs.example.internal", "path": "/exports/caffe2"}]
        main = container(pod, "caffe2")
        assert "/mnt/caffe2-rendezvous" in {m["mountPath"] for m in main["volumeMounts"]}
        variables = env_of(main)
        assert variables["FILE_STORE_PATH"] == "/mnt/caffe2-rendezvous"
        assert "REDIS_HOST" not in variables


def test_the_masters_success_completes_the_job(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("caffe2job-redis-in-master.yaml"))
    wait_for_pods(cluster, namespace, IN_MASTER, IN_MASTER_PODS)
    finish_pod(cluster, namespace, f"{IN_MASTER}-master-0", 0)
    status = wait_for_phase(cluster, namespace, "Caffe2Job", IN_MASTER, "Done")
    assert status["state"] == "Succeeded"
    assert "MASTER 0 succeeded" in condition(status, "Succeeded")["message"]
    wait_until(
        lambda: set(pods_of(cluster, namespace, IN_MASTER)) == {f"{IN_MASTER}-master-0"},
        what="the workers to be stopped",
    )
    wait_until(
        lambda: not services_of(cluster, namespace, IN_MASTER),
        what="the replicas' and redis Services to be removed",
    )


def test_without_a_master_every_worker_must_succeed(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("caffe2job-redis.yaml"))
    pods = wait_for_pods(cluster, namespace, "example-job", WORKERS)
    finish_pod(cluster, namespace, "example-job-worker-1", 0)

    def one_done() -> dict[str, Any] | None:
        status = job_status(cluster, namespace, "Caffe2Job", "example-job")
        entries = status.get("replicaStatuses") or []
        counts = {r["replicaType"]: r.get("replicasStates") for r in entries}
        return status if counts == {"WORKER": {"Running": 1, "Succeeded": 1}} else None

    status = wait_until(one_done, what="one worker counted as succeeded")
    assert (status["state"], status["phase"]) == ("Running", "Running")

    def waits_for_the_other() -> None:  # nothing more must happen
        now = pods_of(cluster, namespace, "example-job")
        assert (
            now["example-job-worker-1"]["metadata"]["uid"]
            == (pods["example-job-worker-1"]["metadata"]["uid"])
        )
        assert job_status(cluster, namespace, "Caffe2Job", "example-job")["state"] == "Running"

    holds_for(2, waits_for_the_other, "the job waiting for its other worker")

    finish_pod(cluster, namespace, "example-job-worker-0", 0)
    status = wait_for_phase(cluster, namespace, "Caffe2Job", "example-job", "Done")
    assert status["state"] == "Succeeded"
    assert "all 2 WORKER pods succeeded" in condition(status, "Succeeded")["message"]
    assert set(pods_of(cluster, namespace, "example-job")) == WORKERS
