"""Caffe2Job: the seed examples' children, the backends, who decides the job.

Expected values are written from the two Caffe2 operators' READMEs (seed 000:
backendSpecs, the worker's variables and labels, CAFFE2_CONFIG; seed 002: the
MASTER, redis in the MASTER pod, task_index over MASTER and WORKER), never
copied from an output.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dlk8s.job.actions import Create
from dlk8s.job.config import parse_config
from dlk8s.job.reconcile import Observed, reconcile

from ..support.caffe2 import CONFIG, IN_MASTER, REDIS_SERVICE, RUNTIME_ID, UID, seed
from ..support.malformed import check_every_mutation, check_every_running_mutation
from ..support.worlds import (
    NOW,
    World,
    condition_message,
    creates,
    deletes,
    first_children,
    invalid_spec,
    replica_job,
    retried,
    started,
)


def caffe2job(roles: dict[str, int], **backend: Any) -> dict[str, Any]:
    """A job named j in ns with these replica counts, each with a caffe2 container."""
    caffe2 = {"name": "caffe2", "image": "caffe2:1"}
    return replica_job(
        "Caffe2Job",
        roles,
        role_field="replicaType",
        main=caffe2,
        uid=UID,
        backendSpecs=backend or {"backendType": "redis"},
    )


def children(job: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return first_children(job, CONFIG)


def container(pod: dict[str, Any], name: str = "caffe2") -> dict[str, Any]:
    [found] = [c for c in pod["spec"]["containers"] if c["name"] == name]
    return found


def sidecar(pod: dict[str, Any], name: str = "redis") -> dict[str, Any]:
    [found] = [c for c in pod["spec"].get("initContainers", []) if c["name"] == name]
    return found


def redis_command(port: int) -> list[str]:
    return ["redis-server", "--port", str(port), "--requirepass", "$(REDIS_PASSWORD)", "--save", ""]


def password_from(secret: str) -> dict[str, Any]:
    """The variable REDIS_PASSWORD as read from the job's Secret."""
    return {
        "name": "REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}},
    }


def env(pod: dict[str, Any]) -> dict[str, str]:
    """The main container's plain variables."""
    return {e["name"]: e["value"] for e in container(pod).get("env", []) if "value" in e}


def secret_env(pod: dict[str, Any], name: str = "caffe2") -> list[dict[str, Any]]:
    return [e for e in container(pod, name).get("env", []) if "valueFrom" in e]


def running(job: dict[str, Any]) -> World:
    return started(World(job, config=CONFIG))


def seed_labels(job: str, role: str, index: int, task_index: int) -> dict[str, str]:
    return {
        "caffe2_job_key": f"default-{job}",
        "caffe2_replica_index": str(index),
        "caffe2_replica_type": role.lower(),
        "group_name": "dlk8s.io",
        "runtime_id": RUNTIME_ID,
        "job_type": role,
        "task_index": str(task_index),
    }


# --- seed 000: an existing redis server, workers only, host network ------------


def test_redis_example_makes_two_worker_pods_and_services() -> None:
    made = children(seed("caffe2job-redis.yaml"))
    names = ["example-job-worker-0", "example-job-worker-1"]
    assert sorted(made) == [("Pod", n) for n in names] + [("Service", n) for n in names]
    for index, name in enumerate(names):
        service = made[("Service", name)]["spec"]
        assert service["clusterIP"] == "None"
        assert service["ports"] == [
            {"name": "caffe2-port", "port": 2222, "targetPort": 2222, "protocol": "TCP"}
        ]
        assert service["selector"]["dlk8s.io/replica-index"] == str(index)


def test_redis_example_variables_in_the_seeds_order() -> None:
    pod = children(seed("caffe2job-redis.yaml"))[("Pod", "example-job-worker-1")]
    cluster = '["example-job-worker-0.default.svc:2222","example-job-worker-1.default.svc:2222"]'
    assert [(e["name"], e["value"]) for e in container(pod)["env"]] == [
        ("SHARD_ID", "1"),
        ("NUM_SHARDS", "2"),
        ("RUN_ID", RUNTIME_ID),
        (
            "CAFFE2_CONFIG",
            '{"cluster":{"worker":' + cluster + '},"task":{"index":1,"type":"worker"}}',
        ),
        ("REDIS_HOST", "redis-service"),
        ("REDIS_PORT", "6379"),
    ]


def test_redis_example_labels_host_network_and_no_redis_of_our_own() -> None:
    made = children(seed("caffe2job-redis.yaml"))
    pod = made[("Pod", "example-job-worker-0")]
    assert pod["metadata"]["labels"] == {
        "dlk8s.io/job-name": "example-job",
        "dlk8s.io/job-kind": "caffe2job",
        "dlk8s.io/runtime-id": RUNTIME_ID,
        "dlk8s.io/replica-type": "worker",
        "dlk8s.io/replica-index": "0",
        **seed_labels("example-job", "WORKER", 0, 0),
    }
    assert pod["spec"]["hostNetwork"] is True
    assert pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert [c["name"] for c in pod["spec"]["containers"]] == ["caffe2"]
    assert container(pod)["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert container(pod)["command"] == ["python", "resnet50_trainer.py"]
    assert ("Service", "example-job-redis") not in made
    # The server is the user's: its password, if any, too.
    assert ("Secret", "example-job-redis") not in made
    assert secret_env(pod) == []


def test_a_dns_policy_of_the_template_is_kept() -> None:
    job = caffe2job({"WORKER": 1}, backendType="redis", redisHost="r")
    job["spec"]["replicaSpecs"][0]["template"]["spec"] |= {
        "hostNetwork": True,
        "dnsPolicy": "Default",
    }
    assert children(job)[("Pod", "j-worker-0")]["spec"]["dnsPolicy"] == "Default"
    job["spec"]["replicaSpecs"][0]["template"]["spec"] = {"containers": [{"name": "caffe2"}]}
    assert "dnsPolicy" not in children(job)[("Pod", "j-worker-0")]["spec"]


# --- seed 002: redis in the MASTER pod -------------------------------------------


def test_redis_in_master_example_adds_the_redis_container_and_its_service() -> None:
    made = children(seed("caffe2job-redis-in-master.yaml"))
    pods = [f"{IN_MASTER}-master-0", f"{IN_MASTER}-worker-0", f"{IN_MASTER}-worker-1"]
    assert sorted(made) == sorted(
        [("Pod", p) for p in pods]
        + [("Service", p) for p in pods]
        + [("Service", REDIS_SERVICE), ("Secret", REDIS_SERVICE)]
    )
    master = made[("Pod", f"{IN_MASTER}-master-0")]
    # A native sidecar: up before caffe2 starts, stopped by the kubelet once
    # caffe2 has exited, so the pod completes and is kept for its log.
    assert [c["name"] for c in master["spec"]["containers"]] == ["caffe2"]
    assert [c["name"] for c in master["spec"]["initContainers"]] == ["redis"]
    assert sidecar(master) == {
        "name": "redis",
        "image": "redis:7.2-alpine",
        "command": redis_command(6379),
        "env": [password_from(REDIS_SERVICE)],
        "restartPolicy": "Always",
        "ports": [{"name": "redis", "containerPort": 6379, "protocol": "TCP"}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 999,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    for worker in pods[1:]:
        assert [c["name"] for c in made[("Pod", worker)]["spec"]["containers"]] == ["caffe2"]
        assert "initContainers" not in made[("Pod", worker)]["spec"]
    service = made[("Service", REDIS_SERVICE)]
    assert service["metadata"]["labels"]["dlk8s.io/replica-type"] == "master"
    assert service["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {
            "dlk8s.io/job-name": IN_MASTER,
            "dlk8s.io/runtime-id": RUNTIME_ID,
            "dlk8s.io/replica-type": "master",
            "dlk8s.io/replica-index": "0",
        },
        "ports": [{"name": "redis", "port": 6379, "targetPort": 6379, "protocol": "TCP"}],
    }


def secret_creates(result: Any) -> list[Create]:
    return [a for a in result.actions if isinstance(a, Create) and a.obj["kind"] == "Secret"]


def test_the_password_is_a_secret_made_fresh_with_the_pods_and_owned_by_the_job() -> None:
    job = caffe2job({"MASTER": 1, "WORKER": 1}, backendType="redis")
    first = reconcile(copy.deepcopy(job), Observed(), CONFIG, NOW)
    [create] = secret_creates(first)
    # Values the I/O side makes as it creates it; none in the manifest.
    assert create.fresh == ("password",)
    assert create.obj == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "j-redis",
            "namespace": "ns",
            "labels": {
                "dlk8s.io/job-name": "j",
                "dlk8s.io/job-kind": "caffe2job",
                "dlk8s.io/runtime-id": create.obj["metadata"]["labels"]["dlk8s.io/runtime-id"],
                "dlk8s.io/replica-type": "redis",
                "dlk8s.io/replica-index": "0",
            },
            "ownerReferences": [
                {
                    "apiVersion": "dlk8s.io/v1alpha1",
                    "kind": "Caffe2Job",
                    "name": "j",
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "type": "Opaque",
        "immutable": True,
    }
    # It goes before the pods that read it.
    kinds = [a.obj["kind"] for a in first.actions if isinstance(a, Create)]
    assert kinds.index("Secret") < kinds.index("Pod")


def test_the_secret_goes_with_every_pass_that_creates_pods_and_no_other() -> None:
    world = running(caffe2job({"MASTER": 1, "WORKER": 1}, backendType="redis"))
    assert secret_creates(world.step()) == []
    world.vanish("j-worker-0")  # deleted by someone: made again
    passes = [world.step() for _ in range(2)]
    assert [len(secret_creates(p)) for p in passes] == [1, 0], [p.actions for p in passes]


def test_the_redis_image_is_the_controller_configs() -> None:
    mirrored = parse_config({"images": {"redis": "mirror.local/redis:7.2"}})
    result = reconcile(seed("caffe2job-redis-in-master.yaml"), Observed(), mirrored, NOW)
    pods = {
        a.obj["metadata"]["name"]: a.obj
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == "Pod"
    }
    master = pods[f"{IN_MASTER}-master-0"]
    assert sidecar(master)["image"] == "mirror.local/redis:7.2"


def test_redis_in_master_example_shards_count_the_master_first() -> None:
    made = children(seed("caffe2job-redis-in-master.yaml"))
    cluster = {
        "master": [f"{IN_MASTER}-master-0.default.svc:2222"],
        "worker": [
            f"{IN_MASTER}-worker-0.default.svc:2222",
            f"{IN_MASTER}-worker-1.default.svc:2222",
        ],
    }
    expected = {
        f"{IN_MASTER}-master-0": ("MASTER", 0, 0),
        f"{IN_MASTER}-worker-0": ("WORKER", 0, 1),
        f"{IN_MASTER}-worker-1": ("WORKER", 1, 2),
    }
    for name, (role, index, shard) in expected.items():
        pod = made[("Pod", name)]
        assert env(pod) == {
            "SHARD_ID": str(shard),
            "NUM_SHARDS": "3",
            "RUN_ID": RUNTIME_ID,
            "CAFFE2_CONFIG": env(pod)["CAFFE2_CONFIG"],
            "REDIS_HOST": f"{REDIS_SERVICE}.default.svc",
            "REDIS_PORT": "6379",
        }
        assert json.loads(env(pod)["CAFFE2_CONFIG"]) == {
            "cluster": cluster,
            "task": {"type": role.lower(), "index": index},
        }
        assert secret_env(pod) == [password_from(REDIS_SERVICE)]
        labels = pod["metadata"]["labels"]
        assert seed_labels(IN_MASTER, role, index, shard).items() <= labels.items()
        assert container(pod)["securityContext"] == {"capabilities": {"add": ["ALL"]}}


def test_redis_in_master_on_another_port_and_with_the_users_own_server() -> None:
    job = caffe2job({"MASTER": 1, "WORKER": 1}, backendType="redis", redisPort=7000)
    made = children(job)
    master = made[("Pod", "j-master-0")]
    assert sidecar(master)["command"] == redis_command(7000)
    assert made[("Service", "j-redis")]["spec"]["ports"][0]["port"] == 7000
    assert env(made[("Pod", "j-worker-0")])["REDIS_PORT"] == "7000"
    assert env(made[("Pod", "j-worker-0")])["REDIS_HOST"] == "j-redis.ns.svc"

    own = {"name": "redis", "image": "mirror.local/redis:7"}
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"].append(own)
    made = children(job)
    master = made[("Pod", "j-master-0")]
    assert master["spec"]["containers"][1] == own
    assert [c["name"] for c in master["spec"]["containers"]] == ["caffe2", "redis"]
    assert "initContainers" not in master["spec"]
    # The user's server has the user's settings: no password of ours.
    assert ("Secret", "j-redis") not in made
    assert secret_env(master) == secret_env(made[("Pod", "j-worker-0")]) == []


def test_a_redis_init_container_of_the_template_is_kept_and_ours_goes_after_the_others() -> None:
    job = caffe2job({"MASTER": 1, "WORKER": 1}, backendType="redis")
    template = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    first = {"name": "fetch", "image": "busybox", "command": ["true"]}
    template["initContainers"] = [first]
    master = children(job)[("Pod", "j-master-0")]
    # The template's init containers run first; the server is up before caffe2.
    assert [c["name"] for c in master["spec"]["initContainers"]] == ["fetch", "redis"]
    assert master["spec"]["initContainers"][0] == first
    own = {"name": "redis", "image": "mirror.local/redis:7", "restartPolicy": "Always"}
    template["initContainers"] = [own]
    master = children(job)[("Pod", "j-master-0")]
    assert master["spec"]["initContainers"] == [own]
    assert [c["name"] for c in master["spec"]["containers"]] == ["caffe2"]
    # The job's own spec is never changed.
    assert template["initContainers"] == [own]


def test_a_job_without_a_role_field_is_all_workers() -> None:
    job = caffe2job({"WORKER": 2}, backendType="redis", redisHost="r")
    del job["spec"]["replicaSpecs"][0]["replicaType"]
    made = children(job)
    assert sorted(name for kind, name in made if kind == "Pod") == ["j-worker-0", "j-worker-1"]


# --- nfs -------------------------------------------------------------------------


def test_nfs_example_mounts_the_export_in_every_shard() -> None:
    made = children(seed("caffe2job-nfs.yaml"))
    for index in (0, 1):
        pod = made[("Pod", f"example-job-nfs-worker-{index}")]
        assert pod["spec"]["volumes"] == [
            {
                "name": "dlk8s-caffe2-rendezvous",
                "nfs": {"server": "nfs.example.internal", "path": "/exports/caffe2"},
            }
        ]
        assert container(pod)["volumeMounts"] == [
            {"name": "dlk8s-caffe2-rendezvous", "mountPath": "/mnt/caffe2-rendezvous"}
        ]
        values = env(pod)
        assert values["FILE_STORE_PATH"] == "/mnt/caffe2-rendezvous"
        assert (values["SHARD_ID"], values["NUM_SHARDS"]) == (str(index), "2")
        assert "REDIS_HOST" not in values
        assert "REDIS_PORT" not in values
    assert ("Service", "example-job-nfs-redis") not in made


def test_nfs_without_a_server_uses_the_templates_own_mount() -> None:
    job = caffe2job({"MASTER": 1, "WORKER": 1}, backendType="nfs", nfsPath="/shared/run")
    for entry in job["spec"]["replicaSpecs"]:
        entry["template"]["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "data", "mountPath": "/shared/"}
        ]
        entry["template"]["spec"]["volumes"] = [
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}}
        ]
    made = children(job)
    master = made[("Pod", "j-master-0")]
    assert master["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "c"}}
    ]
    assert [c["name"] for c in master["spec"]["containers"]] == ["caffe2"]
    assert env(master)["FILE_STORE_PATH"] == "/shared/run"

    del job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["volumeMounts"]
    message = invalid_spec(job, CONFIG)
    assert "spec.replicaSpecs[1].template.spec.containers" in message
    assert "/shared/run" in message
    assert "spec.replicaSpecs[0]" not in message


def test_nfs_export_is_mounted_even_below_a_mount_of_the_template() -> None:
    job = caffe2job(
        {"WORKER": 2},
        backendType="nfs",
        nfsPath="/data/rendezvous",
        nfsServer="nfs.example.internal",
        nfsServerPath="/exports/caffe2",
    )
    own = {"name": "data", "mountPath": "/data"}
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["volumeMounts"] = [own]
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["volumes"] = [
        {"name": "data", "emptyDir": {}}
    ]
    worker = children(job)[("Pod", "j-worker-0")]
    assert container(worker)["volumeMounts"] == [
        own,
        {"name": "dlk8s-caffe2-rendezvous", "mountPath": "/data/rendezvous"},
    ]
    assert env(worker)["FILE_STORE_PATH"] == "/data/rendezvous"


# --- who decides -------------------------------------------------------------------


def test_the_masters_success_ends_the_job_and_cleanup_removes_the_redis_service() -> None:
    world = running(seed("caffe2job-redis-in-master.yaml"))
    assert world.job["status"]["phase"] == "Running"
    world.exit(f"{IN_MASTER}-master-0", 0, container="caffe2")
    assert world.step().status["state"] == "Succeeded"
    world.past_cleanup_grace()
    result = world.step()
    assert deletes(result, "Pod") == [f"{IN_MASTER}-worker-0", f"{IN_MASTER}-worker-1"]
    assert REDIS_SERVICE in deletes(result, "Service")
    world.settle()
    assert world.job["status"]["phase"] == "Done"
    assert world.names("Service") == []


def test_the_masters_caffe2_container_decides_while_redis_still_runs() -> None:
    world = running(seed("caffe2job-redis-in-master.yaml"))
    master = f"{IN_MASTER}-master-0"
    # How the kubelet reports it between caffe2's exit and the sidecar's stop.
    world.pod(master)["status"] = {
        "phase": "Running",
        "initContainerStatuses": [{"name": "redis", "state": {"running": {}}}],
        "containerStatuses": [{"name": "caffe2", "state": {"terminated": {"exitCode": 0}}}],
    }
    assert world.step().status["state"] == "Succeeded"
    world.past_cleanup_grace()
    result = world.step()
    # The kubelet stops the sidecar itself: the MASTER pod is kept for its log.
    assert master not in deletes(result, "Pod")
    assert deletes(result, "Pod") == [f"{IN_MASTER}-worker-0", f"{IN_MASTER}-worker-1"]


def test_a_redis_of_the_users_own_as_a_plain_container_is_stopped_at_cleanup() -> None:
    job = caffe2job({"MASTER": 1, "WORKER": 1}, backendType="redis")
    own = {"name": "redis", "image": "mirror.local/redis:7"}
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"].append(own)
    world = running(job)
    world.exit("j-master-0", 0, container="caffe2", beside="redis")
    assert world.step().status["state"] == "Succeeded"
    world.past_cleanup_grace()
    # Nothing else would ever stop it: cleanPodPolicy Running does.
    assert "j-master-0" in deletes(world.step(), "Pod")


def test_with_a_master_failed_workers_are_recreated_and_do_not_decide() -> None:
    world = running(seed("caffe2job-redis-in-master.yaml"))
    world.exit(f"{IN_MASTER}-worker-1", 0, container="caffe2")
    world.exit(f"{IN_MASTER}-worker-0", 1, container="caffe2")
    world.later(10)
    result = world.step()
    assert result.status["state"] == "Running"
    assert deletes(result, "Pod") == [f"{IN_MASTER}-worker-0"]
    result = world.step()
    assert creates(result, "Pod") == [f"{IN_MASTER}-worker-0"]
    assert result.status["restartCount"] == 1


def test_without_a_master_the_job_succeeds_when_every_worker_has() -> None:
    world = running(seed("caffe2job-redis.yaml"))
    assert world.job["status"]["phase"] == "Running"
    world.exit("example-job-worker-1", 0, container="caffe2")
    result = world.step()
    assert result.status["state"] == "Running"
    assert result.status["phase"] == "Running"
    assert deletes(result) == []
    assert creates(result, "Pod") == []
    world.settle()
    world.exit("example-job-worker-0", 0, container="caffe2")
    result = world.step()
    assert result.status["state"] == "Succeeded"
    assert condition_message(result.status, "Succeeded").startswith("all 2 WORKER pods succeeded")
    world.past_cleanup_grace()
    world.settle()
    assert world.job["status"]["phase"] == "Done"
    assert world.pods() == ["example-job-worker-0", "example-job-worker-1"]


def test_without_a_master_a_worker_exit_1_fails_the_job_and_137_retries_it() -> None:
    world = running(seed("caffe2job-redis.yaml"))
    retried(world, "example-job-worker-0", 137, "caffe2")
    world.exit("example-job-worker-1", 1, container="caffe2")
    result = world.step()
    assert (result.status["state"], result.status["reason"]) == ("Failed", "ReplicaFailed")
    assert deletes(result, "Pod") == ["example-job-worker-0"]


# --- what the CRD may not have caught ---------------------------------------------------


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (
            caffe2job({"WORKER": 2}),
            "spec.replicaSpecs: needs a MASTER to run the redis server, "
            "since spec.backendSpecs.redisHost is unset",
        ),
        (
            caffe2job({"WORKER": 0}, backendType="redis", redisHost="r"),
            "spec.replicaSpecs: needs an entry with replicaType MASTER or WORKER"
            " and at least one replica",
        ),
        (
            caffe2job({"MASTER": 2, "WORKER": 1}),
            "spec.replicaSpecs[0].replicas: must be 1 for MASTER",
        ),
        (
            caffe2job({"MASTER": 1, "WORKER": 1, "PS": 1}),
            "spec.replicaSpecs[2].replicaType: must be one of MASTER, WORKER",
        ),
        (
            caffe2job({"WORKER": 1}, backendType="gloo"),
            "spec.backendSpecs.backendType: must be one of redis, nfs",
        ),
        (
            caffe2job({"WORKER": 1}, backendType="nfs"),
            "spec.backendSpecs.nfsPath: is required when backendType is nfs",
        ),
        (
            caffe2job({"WORKER": 1}, backendType="nfs", nfsPath="/x", nfsServer="s"),
            "spec.backendSpecs.nfsServer: must be set together with nfsServerPath",
        ),
        (
            caffe2job({"WORKER": 1}, backendType="redis", redisHost="r", nfsPath="/x"),
            "spec.backendSpecs: nfsPath and nfsServer only apply to backendType nfs",
        ),
        (
            caffe2job({"WORKER": 1}, backendType="redis", redisHost="r", redisPort=0),
            "spec.backendSpecs.redisPort: must be an integer from 1 to 65535",
        ),
        (
            caffe2job({"WORKER": 1}, backendType="nfs", nfsPath="relative/dir"),
            "spec.backendSpecs.nfsPath: must be an absolute path",
        ),
    ],
)
def test_invalid_specs_name_the_problem(job: dict[str, Any], message: str) -> None:
    assert message in invalid_spec(job, CONFIG)


def test_every_shard_needs_a_caffe2_container() -> None:
    job = seed("caffe2job-redis-in-master.yaml")
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["name"] = "trainer"
    message = invalid_spec(job, CONFIG)
    assert 'spec.replicaSpecs[1].template.spec.containers: no container named "caffe2"' in message


def test_malformed_fields_never_raise() -> None:
    job = seed("caffe2job-redis-in-master.yaml")
    job["spec"]["backendSpecs"]["redisPort"] = 6380
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["hostNetwork"] = True
    assert check_every_mutation(job, CONFIG, NOW) > 300
    check_every_mutation(seed("caffe2job-nfs.yaml"), CONFIG, NOW)


def test_malformed_fields_of_a_running_job_never_raise() -> None:
    world = running(seed("caffe2job-redis-in-master.yaml"))
    check_every_running_mutation(world.job, world.observed(), CONFIG, NOW)
