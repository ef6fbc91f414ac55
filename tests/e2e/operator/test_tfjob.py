"""TFJob end to end: the operator runs as a local process with the chart's RBAC."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

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
    job_manifest,
    job_status,
    pods_of,
    wait_for_phase,
    wait_for_pods,
    wait_for_replacement,
    wait_for_services,
    wait_for_state,
    wait_until,
)
from ..leases import LeaseHistory

pytestmark = pytest.mark.usefixtures("operator")


def tfjob(name: str, roles: dict[str, int], **spec: Any) -> dict[str, Any]:
    """A TFJob with `roles` {MASTER: 1, WORKER: n, PS: n}, all with a tensorflow container."""
    return job_manifest("TFJob", name, roles, "tensorflow", **spec)


SEED_PODS = {"example-job-master-0", "example-job-worker-0", "example-job-ps-0", "example-job-ps-1"}


def test_seed_example_makes_pods_services_and_tf_config(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("tfjob.yaml"))
    pods = wait_for_pods(cluster, namespace, "example-job", SEED_PODS)

    services = wait_for_services(cluster, namespace, "example-job", SEED_PODS)
    for name, svc in services.items():
        assert svc["spec"]["clusterIP"] == "None", name
        assert [p["port"] for p in svc["spec"]["ports"]] == [2222]

    def addr(pod: str) -> str:
        return f"{pod}.{namespace}.svc:2222"

    cluster_spec = {
        "master": [addr("example-job-master-0")],
        "worker": [addr("example-job-worker-0")],
        "ps": [addr("example-job-ps-0"), addr("example-job-ps-1")],
    }
    tasks = {
        "example-job-master-0": ("master", 0),
        "example-job-worker-0": ("worker", 0),
        "example-job-ps-0": ("ps", 0),
        "example-job-ps-1": ("ps", 1),
    }
    for name, (role, index) in tasks.items():
        pod = pods[name]
        labels = pod["metadata"]["labels"]
        assert labels["dlk8s.io/job-name"] == "example-job"
        assert labels["dlk8s.io/replica-type"] == role
        assert labels["dlk8s.io/replica-index"] == str(index)
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("TFJob", "example-job", True)
        tf_config = json.loads(env_of(container(pod))["TF_CONFIG"])
        assert tf_config == {
            "cluster": cluster_spec,
            "task": {"type": role, "index": index},
            "environment": "cloud",
        }

    # The seed's PSs have no template: each runs the standard gRPC server.
    for ps in ("example-job-ps-0", "example-job-ps-1"):
        server = container(pods[ps])
        assert server["image"] == "tensorflow/tensorflow:2.16.1"
        assert any(
            "grpc_tensorflow_server.py" in part
            for part in server.get("command", []) + server.get("args", [])
        )
        mounted = {v["name"] for v in pods[ps]["spec"]["volumes"] if "configMap" in v}
        assert mounted, "the gRPC server script is mounted from a ConfigMap"

    expected = {"MASTER": {"Running": 1}, "WORKER": {"Running": 1}, "PS": {"Running": 2}}

    def counts() -> dict[str, Any]:
        status = job_status(cluster, namespace, "TFJob", "example-job")
        return {r["replicaType"]: r["replicasStates"] for r in status.get("replicaStatuses", [])}

    # The counts trail the state by a pass (pod events are batched for a second).
    wait_until(lambda: counts() == expected, timeout=30, what=f"replicaStatuses {expected}")
    status = job_status(cluster, namespace, "TFJob", "example-job")
    assert (status["state"], status["phase"]) == ("Running", "Running")


def test_gpu_containers_get_the_gke_driver_settings(cluster: LocalCluster, namespace: str) -> None:
    job = tfjob("gpu", {"MASTER": 1, "WORKER": 1})
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}
    }
    apply(cluster, namespace, job)
    apply(cluster, namespace, example("tfjob-smoke-gpu.yaml"))
    pods = wait_for_pods(cluster, namespace, "gpu", {"gpu-master-0", "gpu-worker-0"})
    worker, master = pods["gpu-worker-0"], pods["gpu-master-0"]
    # nvidia.com/gpu: GKE's device plugin mounts the driver at /usr/local/nvidia
    # itself, so the pod gets no hostPath, only the loader path.
    assert not any("hostPath" in v for v in worker["spec"].get("volumes", []))
    mounts = {m["mountPath"] for m in container(worker).get("volumeMounts", [])}
    assert not any(m.startswith("/usr/local/nvidia") for m in mounts)
    assert env_of(container(worker))["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    # No GPU asked, nothing injected.
    assert not any("hostPath" in v for v in master["spec"].get("volumes", []))
    assert "LD_LIBRARY_PATH" not in env_of(container(master))

    legacy = wait_for_pods(cluster, namespace, "tf-smoke-gpu", {"tf-smoke-gpu-master-0"})
    legacy_pod = legacy["tf-smoke-gpu-master-0"]
    # The legacy resource keeps the seed chart's mounts of the driver's lib/ and bin/.
    assert {v["hostPath"]["path"] for v in legacy_pod["spec"]["volumes"] if "hostPath" in v} == {
        "/home/kubernetes/bin/nvidia/lib",
        "/home/kubernetes/bin/nvidia/bin",
    }


def test_master_success_finishes_job_and_stops_the_rest(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("tfjob.yaml"))
    wait_for_pods(cluster, namespace, "example-job", SEED_PODS)
    finish_pod(cluster, namespace, "example-job-master-0", 0)
    status = wait_for_phase(cluster, namespace, "TFJob", "example-job", "Done")
    assert status["state"] == "Succeeded"
    assert status.get("completionTime")
    assert condition(status, "Succeeded")["status"] == "True"
    # cleanPodPolicy Running (the default): what still ran is stopped, the
    # finished master stays for its logs.
    remaining = wait_until(
        lambda: (
            (p := pods_of(cluster, namespace, "example-job")).keys() == {"example-job-master-0"}
            and p
        ),
        what="running pods to be cleaned up",
    )
    assert remaining["example-job-master-0"]["status"]["phase"] == "Succeeded"

    # The status is final: the master's pod going later (the pod GC past its
    # threshold, or a user) is not news worth a write.
    final = get_json(cluster, "-n", namespace, "tfjob", "example-job")
    cluster.kubectl("delete", "-n", namespace, "pod", "example-job-master-0", "--wait")

    def unwritten() -> None:
        after = get_json(cluster, "-n", namespace, "tfjob", "example-job")
        assert after["metadata"]["resourceVersion"] == final["metadata"]["resourceVersion"]
        assert after["status"]["succeededPods"] == 1

    holds_for(3, unwritten, "the final status")  # a deletion is handled within a second


def test_master_permanent_error_fails_job(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, tfjob("perm", {"MASTER": 1, "WORKER": 1}))
    wait_for_pods(cluster, namespace, "perm", {"perm-master-0", "perm-worker-0"})
    finish_pod(cluster, namespace, "perm-master-0", 1)
    status = wait_for_phase(cluster, namespace, "TFJob", "perm", "Failed")
    assert status["state"] == "Failed"
    assert condition(status, "Failed")["status"] == "True"
    assert status.get("restartCount", 0) == 0


def test_master_retryable_error_recreates_pod(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, tfjob("retry", {"MASTER": 1}))
    first = wait_for_pods(cluster, namespace, "retry", {"retry-master-0"})["retry-master-0"]
    finish_pod(cluster, namespace, "retry-master-0", 137)
    second = wait_until(
        lambda: (
            (p := pods_of(cluster, namespace, "retry").get("retry-master-0"))
            and p["metadata"]["uid"] != first["metadata"]["uid"]
            and p
        ),
        what="the master pod to be recreated",
    )
    assert second["status"].get("phase") in ("Pending", "Running")
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "TFJob", "retry")).get("restartCount") == 1 and s
        ),
        what="restartCount 1",
    )
    assert status["state"] == "Running"
    restarting = condition(status, "Restarting")
    assert restarting is not None
    # The condition reads True while the replacement starts and False once it
    # runs, so the exit code is looked up in the events, which stay.
    events = get_json(
        cluster, "events", "-n", namespace, "--field-selector", "involvedObject.name=retry"
    )["items"]
    assert any("exited with code 137" in e["message"] for e in events), events


def test_failed_worker_and_deleted_pod_are_recreated(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, tfjob("heal", {"MASTER": 1, "WORKER": 2}))
    pods = wait_for_pods(
        cluster, namespace, "heal", {"heal-master-0", "heal-worker-0", "heal-worker-1"}
    )
    finish_pod(cluster, namespace, "heal-worker-0", 1)
    cluster.kubectl("delete", "pod", "heal-worker-1", "-n", namespace, "--wait=false")

    def replaced(name: str) -> bool:
        pod = pods_of(cluster, namespace, "heal").get(name)
        return bool(pod and pod["metadata"]["uid"] != pods[name]["metadata"]["uid"])

    wait_until(
        lambda: replaced("heal-worker-0") and replaced("heal-worker-1"), what="workers recreated"
    )
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "TFJob", "heal")).get("restartCount") == 2 and s
        ),
        what="restartCount 2",
    )
    assert status["state"] == "Running"


def test_backoff_limit_fails_the_job_with_a_reason(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    apply(
        cluster,
        namespace,
        tfjob("fragile", {"MASTER": 1, "WORKER": 1}, runPolicy={"backoffLimit": 1}),
    )
    for attempt in range(2):
        pod = wait_for_pods(cluster, namespace, "fragile", {"fragile-master-0", "fragile-worker-0"})
        uid = pod["fragile-worker-0"]["metadata"]["uid"]
        cluster.kubectl("delete", "pod", "fragile-worker-0", "-n", namespace, "--wait=false")
        if attempt == 0:
            wait_for_replacement(cluster, namespace, "fragile", "fragile-worker-0", uid)
    status = wait_for_state(cluster, namespace, "TFJob", "fragile", "Failed")
    assert status["reason"] == "BackoffLimitExceeded"
    assert condition(status, "Failed")["reason"] == "BackoffLimitExceeded"


def test_kubectl_shows_state_phase_and_events(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, tfjob("visible", {"MASTER": 1}))
    # The state turns Running with the first pass; the phase once the pod runs.
    wait_for_phase(cluster, namespace, "TFJob", "visible", "Running")
    table = cluster.kubectl("get", "tfjobs", "-n", namespace).stdout
    header, row = table.splitlines()[:2]
    assert "STATE" in header
    assert "PHASE" in header
    assert row.split()[:3] == ["visible", "Running", "Running"]
    described = wait_until(
        lambda: (
            (d := cluster.kubectl("describe", "tfjob", "visible", "-n", namespace).stdout)
            and "visible-master-0" in d.split("Events:")[-1]
            and d
        ),
        what="events about the created pod",
    )
    assert "Events:" in described


def test_a_pod_name_held_by_someone_else_is_reported_and_never_counted(
    cluster: LocalCluster, namespace: str
) -> None:
    squatter = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "squat-worker-0", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    apply(cluster, namespace, squatter)
    apply(cluster, namespace, tfjob("squat", {"MASTER": 1, "WORKER": 1}))
    warning = wait_until(
        lambda: get_json(
            cluster, "events", "-n", namespace, "--field-selector", "reason=NameTaken"
        )["items"],
        what="a NameTaken event",
    )[0]
    assert warning["involvedObject"]["name"] == "squat"
    assert "squat-worker-0" in warning["message"]
    wait_for_pods(cluster, namespace, "squat", {"squat-master-0"})

    def nothing_lost() -> None:
        assert job_status(cluster, namespace, "TFJob", "squat").get("restartCount", 0) == 0

    holds_for(3, nothing_lost, "no restart")  # a few retries' worth: none counts the squatter

    cluster.kubectl(
        "delete", "pod", "squat-worker-0", "-n", namespace, "--grace-period=0", "--force"
    )
    status = wait_for_phase(cluster, namespace, "TFJob", "squat", "Running")
    assert status["restartCount"] == 0
    assert "squat-worker-0" in pods_of(cluster, namespace, "squat")


def test_tensorboard_comes_and_goes_with_the_job(cluster: LocalCluster, namespace: str) -> None:
    job = example("tfjob-tensorboard-azure.yaml")
    name = job["metadata"]["name"]
    apply(cluster, namespace, job)
    deployment = wait_until(
        lambda: get_or_none(cluster, "deployment", f"{name}-tensorboard", "-n", namespace),
        what="the TensorBoard Deployment",
    )
    spec = deployment["spec"]["template"]["spec"]
    board = spec["containers"][0]
    assert any(
        "/tmp/tensorflow" in part for part in board.get("command", []) + board.get("args", [])
    )
    assert {v["name"] for v in spec["volumes"]} >= {"azurefile"}
    assert {m["mountPath"] for m in board["volumeMounts"]} >= {"/tmp/tensorflow"}
    service = wait_until(
        lambda: get_or_none(cluster, "service", f"{name}-tensorboard", "-n", namespace),
        what="the TensorBoard Service",
    )
    assert service["spec"]["type"] == "ClusterIP"
    cluster.kubectl("delete", "tfjob", name, "-n", namespace)
    wait_until(
        lambda: (
            get_or_none(cluster, "deployment", f"{name}-tensorboard", "-n", namespace) is None
            and get_or_none(cluster, "service", f"{name}-tensorboard", "-n", namespace) is None
        ),
        what="TensorBoard to go with the job",
    )


def test_a_tensorboard_outside_the_cluster_is_refused_at_apply(
    cluster: LocalCluster, namespace: str
) -> None:
    """The chart's tensorboard.serviceTypes is [ClusterIP] by default, and
    its policy tells the user at once; ClusterIP is let through."""
    job = example("tfjob-tensorboard-azure.yaml")
    for kind in ("LoadBalancer", "NodePort"):
        job["spec"]["tensorboard"]["serviceType"] = kind
        refused = cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps(job), check=False
        )
        assert refused.returncode != 0, f"a TensorBoard of type {kind} was let through"
        assert f"serviceType {kind} is not allowed here" in refused.stderr, refused.stderr
        assert "of type ClusterIP only" in refused.stderr, refused.stderr
    job["spec"]["tensorboard"]["serviceType"] = "ClusterIP"
    apply(cluster, namespace, job)


def test_deleting_a_job_removes_all_children(cluster: LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, example("tfjob.yaml"))
    wait_for_pods(cluster, namespace, "example-job", SEED_PODS)
    cluster.kubectl("delete", "tfjob", "example-job", "-n", namespace)

    def nothing_left() -> bool:
        for kind in ("pods", "services", "configmaps"):
            items = get_json(cluster, kind, "-n", namespace, "-l", "dlk8s.io/job-name=example-job")[
                "items"
            ]
            if items:
                return False
        return True

    wait_until(nothing_left, what="the garbage collector to remove every child")


def test_ttl_removes_finished_jobs(cluster: LocalCluster, namespace: str) -> None:
    apply(
        cluster,
        namespace,
        tfjob("short-lived", {"MASTER": 1}, runPolicy={"ttlSecondsAfterFinished": 2}),
    )
    wait_for_pods(cluster, namespace, "short-lived", {"short-lived-master-0"})
    finish_pod(cluster, namespace, "short-lived-master-0", 0)
    wait_for_state(cluster, namespace, "TFJob", "short-lived", "Succeeded")
    wait_until(
        lambda: get_or_none(cluster, "tfjob", "short-lived", "-n", namespace) is None,
        timeout=30,
        what="the finished job to be deleted after its TTL",
    )


def test_active_deadline_fails_an_overlong_job(cluster: LocalCluster, namespace: str) -> None:
    apply(
        cluster,
        namespace,
        tfjob("slow", {"MASTER": 1, "WORKER": 1}, runPolicy={"activeDeadlineSeconds": 3}),
    )
    status = wait_for_state(cluster, namespace, "TFJob", "slow", "Failed", timeout=30)
    assert status["reason"] == "DeadlineExceeded"
    wait_until(
        lambda: not pods_of(cluster, namespace, "slow"), what="pods stopped after the deadline"
    )


def test_suspend_removes_pods_and_resume_brings_them_back(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, tfjob("pausable", {"MASTER": 1, "WORKER": 1}))
    wait_for_pods(cluster, namespace, "pausable", {"pausable-master-0", "pausable-worker-0"})
    patch = {"spec": {"runPolicy": {"suspend": True}}}
    cluster.kubectl(
        "patch", "tfjob", "pausable", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    wait_until(lambda: not pods_of(cluster, namespace, "pausable"), what="pods removed on suspend")
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "TFJob", "pausable"))
            and (c := condition(s, "Suspended"))
            and c["status"] == "True"
            and s
        ),
        what="a Suspended condition",
    )
    assert status["state"] not in ("Succeeded", "Failed")
    patch["spec"]["runPolicy"]["suspend"] = False
    cluster.kubectl(
        "patch", "tfjob", "pausable", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    wait_for_pods(cluster, namespace, "pausable", {"pausable-master-0", "pausable-worker-0"})
    status = wait_for_state(cluster, namespace, "TFJob", "pausable", "Running")
    assert status.get("restartCount", 0) == 0, "suspending is not a failure"


@contextlib.contextmanager
def crd_without_rule(cluster: LocalCluster, crd: str, needle: str) -> Iterator[None]:
    """The CRD minus its CEL rule containing `needle`: a cluster whose CRD is
    older than the operator, or was installed by hand without the rule."""
    found = get_json(cluster, "crd", crd)
    path, index, rule = _find_rule(found, needle)
    pointer = "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path)
    remove = [{"op": "remove", "path": f"{pointer}/{index}"}]
    cluster.kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(remove))
    try:
        yield
    finally:
        restore = [{"op": "add", "path": f"{pointer}/{index}", "value": rule}]
        cluster.kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(restore))


def _find_rule(node: Any, needle: str, path: tuple[str, ...] = ()) -> tuple[list[str], int, Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "x-kubernetes-validations":
                for i, rule in enumerate(value):
                    if needle in rule.get("rule", ""):
                        return [*path, key], i, rule
            try:
                return _find_rule(value, needle, (*path, key))
            except LookupError:
                pass
    elif isinstance(node, list):
        for i, value in enumerate(node):
            try:
                return _find_rule(value, needle, (*path, str(i)))
            except LookupError:
                pass
    raise LookupError(needle)


def test_invalid_spec_fails_only_that_job(cluster: LocalCluster, namespace: str) -> None:
    """The operator validates again what the CRD may not have caught."""
    bad = tfjob("no-tf-container", {"MASTER": 1})
    bad["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["name"] = "trainer"
    with crd_without_rule(cluster, "tfjobs.dlk8s.io", "c.name == 'tensorflow'"):
        wait_until(
            lambda: (
                cluster.kubectl(
                    "apply", "-n", namespace, "-f", "-", input=json.dumps(bad), check=False
                ).returncode
                == 0
            ),
            timeout=30,
            what="the relaxed CRD to accept the job",
        )
        # Within: the API server checks a status write against the rule too,
        # and would refuse this job's once the rule is back.
        status = wait_for_state(cluster, namespace, "TFJob", "no-tf-container", "Failed")
    apply(cluster, namespace, tfjob("fine", {"MASTER": 1}))
    assert status["reason"] == "InvalidSpec"
    assert pods_of(cluster, namespace, "no-tf-container") == {}
    events = wait_until(
        lambda: get_json(
            cluster,
            "events",
            "-n",
            namespace,
            "--field-selector",
            "involvedObject.name=no-tf-container",
        )["items"],
        what="an event on the invalid job",
    )
    warnings = [e for e in events if e["type"] == "Warning" and e["reason"] == "InvalidSpec"]
    assert warnings
    assert "tensorflow" in warnings[0]["message"]
    wait_for_state(cluster, namespace, "TFJob", "fine", "Running")


def test_smoke_module_passes_against_the_cluster(cluster: LocalCluster, namespace: str) -> None:
    """What `helm test` runs, run directly: under kwok the hook pod runs no code."""
    out = cluster.run(
        *_python(), "-m", "dlk8s.cli.main", "--kubeconfig", str(cluster.kubeconfig), "smoke",
        "--namespace", namespace, "--timeout", "60",
        "--template-annotation", "kwok.dlk8s.io/exit-code=0",
    )  # fmt: skip
    assert "Succeeded" in out.stdout
    assert get_json(cluster, "tfjobs", "-n", namespace)["items"] == []


def _python() -> list[str]:
    return [sys.executable]


# Enough replicas for a creation that one request at a time keeps going for seconds.
BIG_WORKERS = 300


def test_operator_restart_mid_creation_makes_no_duplicates(
    cluster: LocalCluster, namespace: str, install: Any, operator: OperatorProcess
) -> None:
    """kill -9 while a 300-replica job is being created, then restart: it converges.
    One request at a time and 300 pods keep the creation going for seconds:
    50 at two at a time were sometimes all created before the kill landed."""
    operator.stop()
    try:
        victim = OperatorProcess(install, name="victim", env={"DLK8S_API_PARALLELISM": "1"}).start()
        apply(cluster, namespace, tfjob("big", {"MASTER": 1, "WORKER": BIG_WORKERS}))
        wait_until(lambda: len(pods_of(cluster, namespace, "big")) >= 5, what="creation to start")
        victim.kill()
        created_before = len(pods_of(cluster, namespace, "big"))
        assert created_before < BIG_WORKERS + 1, "the kill should land mid-creation"
        survivor = OperatorProcess(install, name="survivor").start()
        try:
            names = {"big-master-0", *(f"big-worker-{i}" for i in range(BIG_WORKERS))}
            # 300 pods to create and see running: a minute was not always
            # enough on a loaded CI machine (run 42).
            pods = wait_for_pods(cluster, namespace, "big", names, timeout=240)
            assert len(pods) == BIG_WORKERS + 1
            all_pods = get_json(cluster, "pods", "-n", namespace)["items"]
            assert len(all_pods) == BIG_WORKERS + 1
            status = wait_for_state(cluster, namespace, "TFJob", "big", "Running")
            assert status.get("restartCount", 0) == 0
        finally:
            survivor.stop()
    finally:
        operator.start()


def test_leader_election_hands_over_within_the_lease(
    cluster: LocalCluster, namespace: str, install: Any, operator: OperatorProcess
) -> None:
    operator.stop()
    lease_seconds = 6
    name = f"{install.release}-leader"
    env = {
        "DLK8S_LEADER_ELECT": "true",
        "DLK8S_LEASE_DURATION": str(lease_seconds),
        # The chart grants get/update on its own lease name only.
        "DLK8S_LEADER_ELECTION_ID": name,
        "DLK8S_LEADER_ELECTION_NAMESPACE": install.namespace,
    }
    first = OperatorProcess(install, name="first", env=env).start()
    second = OperatorProcess(install, name="second", env=env).start()
    try:

        def leaders() -> list[OperatorProcess]:
            return [p for p in (first, second) if "dlk8s_leader 1.0" in p.metrics()]

        leader = wait_until(lambda: len(leaders()) == 1 and leaders()[0], what="one leader")
        standby = second if leader is first else first
        with LeaseHistory(cluster, install.namespace, name) as lease:
            apply(cluster, namespace, tfjob("led", {"MASTER": 1}))
            wait_for_state(cluster, namespace, "TFJob", "led", "Running")
            wait_until(lease.holders, what="the lease's holder")
            leader.kill()
            apply(cluster, namespace, tfjob("after", {"MASTER": 1}))
            wait_for_state(cluster, namespace, "TFJob", "after", "Running")
            assert "dlk8s_leader 1.0" in standby.metrics()
            holders = wait_until(
                lambda: len(lease.holders()) >= 2 and lease.holders(), what="the new holder"
            )
        assert len(holders) == 2, holders
        renewed, acquired = lease.handover(*holders)
        gap = (acquired - renewed).total_seconds()
        # By the Lease's own record: the standby never takes it before the
        # killed leader's last renewal has expired, and takes it at one of
        # its next looks (every second here), not a lease later.
        assert lease_seconds <= gap < 2 * lease_seconds, f"taken {gap:.2f}s after the last renewal"
    finally:
        for p in (first, second):
            p.stop()
        operator.start()


def test_no_requests_per_job_at_rest(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    for i in range(5):
        apply(cluster, namespace, tfjob(f"idle-{i}", {"MASTER": 1, "WORKER": 1}))
    for i in range(5):
        wait_for_state(cluster, namespace, "TFJob", f"idle-{i}", "Running")

    # Earlier tests' namespaces are still being torn down; wait for that to end
    # so the minute below is quiet for everyone, not only for these jobs.
    def terminating() -> dict[str, Any]:
        """Namespaces still going, with what their status says holds them
        and their pods left."""
        return {
            ns["metadata"]["name"]: {
                "conditions": [
                    f"{c['type']}={c['status']}: {c.get('message', '')}"
                    for c in ns["status"].get("conditions", [])
                ],
                "pods": {
                    p["metadata"]["name"]: (
                        p["metadata"].get("finalizers"),
                        p["status"].get("phase"),
                    )
                    for p in get_json(cluster, "pods", "-n", ns["metadata"]["name"])["items"]
                },
            }
            for ns in get_json(cluster, "namespaces")["items"]
            if ns["status"].get("phase") == "Terminating"
        }

    try:
        wait_until(lambda: not terminating(), timeout=120, what="earlier namespaces to be gone")
    except AssertionError as err:
        raise AssertionError(f"{err}: {terminating()}") from None
    time.sleep(3)  # let the last status writes and their watch events settle
    before_operator = _operator_requests(operator)
    before_server = _apiserver_requests(cluster)
    time.sleep(60)
    after_operator = _operator_requests(operator)
    after_server = _apiserver_requests(cluster)
    operator_delta = {
        k: v - before_operator.get(k, 0)
        for k, v in after_operator.items()
        if v != before_operator.get(k, 0)
    }
    server_delta = {
        k: v - before_server.get(k, 0)
        for k, v in after_server.items()
        if v != before_server.get(k, 0)
    }
    print(f"operator requests in a quiet minute: {operator_delta}")
    print(f"apiserver requests on dlk8s resources in a quiet minute: {server_delta}")
    per_job = {
        k: v
        for k, v in operator_delta.items()
        if k[0] in ("GET", "CREATE", "UPDATE", "PATCH", "DELETE") and k not in SCRAPES_OWN
    }
    assert per_job == {}
    # The reviews of this test's own two scrapes, at most one each (the
    # operator keeps an answer a minute or more: runtime.access).
    assert all(operator_delta.get(k, 0) <= 1 for k in SCRAPES_OWN), operator_delta
    assert all(v <= 2 * 8 for k, v in operator_delta.items())  # at most watch re-connects
    # Lists only: the operator's own GETs are counted above, and the API
    # server's count cannot tell them from the garbage collector's, which
    # reads a pod's owner (GET tfjobs) some seconds after the pod appears or
    # loses a finalizer, up to half a minute late after a namespace went
    # (seen in the audit log, user generic-garbage-collector).
    assert not {k: v for k, v in server_delta.items() if k[0] == "LIST"}


# What reading /metrics makes the operator ask: who the caller is, and
# whether it may (runtime.access).
SCRAPES_OWN: Final = (("CREATE", "tokenreviews"), ("CREATE", "subjectaccessreviews"))


def _operator_requests(operator: OperatorProcess) -> dict[tuple[str, str], float]:
    counts = {}
    for line in operator.metrics().splitlines():
        if line.startswith("dlk8s_api_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            verb = labels.split('verb="')[1].split('"')[0]
            resource = labels.split('resource="')[1].split('"')[0]
            counts[(verb, resource)] = float(value)
    return counts


def _apiserver_requests(cluster: LocalCluster) -> dict[tuple[str, str], float]:
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    counts: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{") or 'group="dlk8s.io"' not in line:
            continue
        labels, value = line.rsplit(" ", 1)
        verb = labels.split('verb="')[1].split('"')[0]
        resource = labels.split('resource="')[1].split('"')[0]
        counts[(verb, resource)] = counts.get((verb, resource), 0) + float(value)
    return counts


def test_a_job_that_names_a_queue_waits_and_says_why_when_the_operator_runs_without_kueue(
    cluster: LocalCluster, namespace: str
) -> None:
    """The session's operator runs without --kueue: a job in a queue is not
    run past its quota, and its status and an event say what is missing."""
    job = tfjob("queued", {"MASTER": 1})
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    apply(cluster, namespace, job)
    status = wait_for_phase(cluster, namespace, "TFJob", "queued", "Queued")
    queued = condition(status, "Queued")
    assert queued is not None
    assert (queued["status"], queued["reason"]) == ("False", "QueueUnavailable")
    assert "LocalQueue team" in queued["message"]
    assert "--kueue" in queued["message"]
    events = get_json(
        cluster, "events", "-n", namespace, "--field-selector", "involvedObject.name=queued"
    )["items"]
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "QueueUnavailable")]
    assert pods_of(cluster, namespace, "queued") == {}
