"""A tenant cannot reach another team's rendezvous, on the real node with
NetworkPolicy enforced (kube-network-policies runs in the node, realnode/).

Three jobs whose servers other pods could misuse, in one namespace, with the
operator giving each job its NetworkPolicy (the chart's networkPolicy.enabled):

- a Caffe2Job whose MASTER runs redis, the shards' rendezvous store (6379);
- a fault-tolerant PaddleJob whose MASTER runs etcd, EDL's task queue (2379);
- a TFJob whose PS runs TensorFlow's gRPC server, which holds the variables
  its MASTER trains (2222).

Their programs wait behind a gate (a Service name that resolves once the test
makes it), so each server listens, untouched, for as long as the test looks.
A pod in another namespace, a tenant, dials each server:

1. with the jobs' policies: no connection (refused or timed out), while a
   pod of the job itself connects to the same address;
2. with the operator stopped and the policies deleted: the tenant connects,
   so what stopped it was the policy, and this test can fail; redis still
   wants the job's password;
3. with the operator started again, which gives each job its policy back: no
   connection once more; then the gate opens and every job trains to Done.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install, OperatorProcess, install_chart

from ..helpers import job_status, pods_of, wait_until
from ..realjobs import POLICIES, delete_namespaces, kustomized, real_namespace, without

RUNTIME = "localhost/dlk8s/runtime:local"
RELEASE = "train-isolation"
GATE = "isolation-gate"
# The job, its server pod and port, and the pod of the same job that dials
# it (one whose program waits at the gate, so it is there the whole time).
SERVERS = {
    "Caffe2Job": ("caffe2job-in-master", "master-0", 6379, "worker-0"),
    "PaddleJob": ("paddlejob-elastic", "master-0", 2379, "trainer-0"),
    "TFJob": ("tfjob-train", "ps-0", 2222, "master-0"),
}
# Dials every address given (host:port) at once; prints what came of each.
DIAL = textwrap.dedent(
    """
    import json, socket, sys
    from concurrent.futures import ThreadPoolExecutor

    def dial(target):
        host, port = target.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
            return "connected"
        except OSError as e:
            return type(e).__name__

    with ThreadPoolExecutor(len(sys.argv) - 1) as pool:
        print(json.dumps(dict(zip(sys.argv[1:], pool.map(dial, sys.argv[1:])))))
    """
)
# Asks a redis server for PING without a password; prints its answer.
PING = textwrap.dedent(
    """
    import socket, sys
    host, port = sys.argv[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=3) as s:
        s.sendall(b"PING\\r\\n")
        print(s.recv(200).decode().strip())
    """
)
# The gate: a program starts once the Service named GATE resolves in its namespace.
WAIT_AT_GATE = f"until getent hosts {GATE} >/dev/null; do sleep 1; done"


def gated(command: list[str], args: list[str]) -> dict[str, Any]:
    """A container's command and args behind the gate, as one shell line."""
    line = " ".join(["exec", *command, *args])
    return {"command": ["sh", "-c", f"{WAIT_AT_GATE}; {line}"], "args": []}


def caffe2_job(cluster: LocalCluster) -> list[dict[str, Any]]:
    docs = kustomized(cluster, "caffe2job-rendezvous")
    name = SERVERS["Caffe2Job"][0]
    keep = [d for d in docs if d["kind"] == "ConfigMap" or d["metadata"]["name"] == name]
    for doc in keep:
        for spec in doc.get("spec", {}).get("replicaSpecs", []):
            spec["replicas"] = 1  # a MASTER and one WORKER: two shards
            [container] = spec["template"]["spec"]["containers"]
            container |= gated(container["command"], container.get("args", []))
    return keep


def paddle_job(cluster: LocalCluster) -> list[dict[str, Any]]:
    """The elastic example, one trainer: Paddle's launcher forms its group of
    one at once, and the program waits at the gate."""
    docs = kustomized(cluster, "paddlejob-elastic")
    [job] = [d for d in docs if d["kind"] == "PaddleJob"]
    trainer = job["spec"]["trainer"]
    # Enough epochs for the model to learn (train.py fails one that did
    # not), a tenth of a second each.
    trainer |= {"minInstance": 1, "maxInstance": 1, "passes": 40}
    trainer["entrypoint"] = f"{WAIT_AT_GATE}\n{trainer['entrypoint']}"
    [main] = trainer["template"]["spec"]["containers"]
    main["env"] = [{"name": "EPOCH_SECONDS", "value": "0.1"}]
    return docs


def tf_job(cluster: LocalCluster) -> list[dict[str, Any]]:
    docs = kustomized(cluster, "tfjob-train")
    [job] = [d for d in docs if d["kind"] == "TFJob"]
    # The MASTER alone trains on the PS: TensorFlow's start costs a core-second or two.
    without(job, "WORKER")
    for spec in job["spec"]["replicaSpecs"]:
        if spec["tfReplicaType"] == "PS":
            continue  # the server under test: the chart's, listening from its start
        [container] = spec["template"]["spec"]["containers"]
        container |= gated(container["command"], ["--steps=100", "--log-every=50"])
    return docs


@pytest.fixture(scope="module")
def install(real_cluster: LocalCluster) -> Iterator[Install]:
    namespace = f"{RELEASE}-system"
    yield install_chart(
        real_cluster,
        release=RELEASE,
        namespace=namespace,
        sets=(
            "cloud=gke",
            POLICIES,
            f"config.tfImage={RUNTIME}",
            f"config.images.redis={RUNTIME}",
            f"config.images.etcd={RUNTIME}",
        ),
    )
    real_cluster.helm("uninstall", RELEASE, "-n", namespace, check=False)
    delete_namespaces(real_cluster, namespace)


@pytest.fixture(scope="module")
def spaces(real_cluster: LocalCluster) -> Iterator[tuple[str, str]]:
    """The jobs' namespace and the tenant's, both on the real node."""
    names = (real_namespace(real_cluster, "isolated-jobs"), real_namespace(real_cluster, "tenant"))
    yield names
    delete_namespaces(real_cluster, *names)


def operator(install: Install, jobs: str) -> OperatorProcess:
    """The operator as a local process; its autoscaler (which admits the
    fault-tolerant PaddleJob's trainer) on a short period."""
    env = {"DLK8S_NAMESPACE": jobs, "DLK8S_AUTOSCALER_PERIOD": "1"}
    return OperatorProcess(install, name=RELEASE, env=env).start()


def tenant_pod(cluster: LocalCluster, namespace: str) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tenant", "namespace": namespace},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "tenant",
                    "image": RUNTIME,
                    "command": ["python", "-c", "import time; time.sleep(3600)"],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    cluster.kubectl(
        "wait", "pod/tenant", "-n", namespace, "--for=condition=Ready", "--timeout=120s"
    )
    return "tenant"


def dial(cluster: LocalCluster, namespace: str, pod: str, targets: list[str]) -> dict[str, str]:
    out = cluster.kubectl("exec", pod, "-n", namespace, "--", "python", "-c", DIAL, *targets)
    result: dict[str, str] = json.loads(out.stdout)
    return result


def server_addresses(cluster: LocalCluster, namespace: str) -> dict[str, str]:
    """Each kind's server as host:port, once every server and dialer pod runs."""

    def addresses() -> dict[str, str] | None:
        found = {}
        for kind, (job, server, port, dialer) in SERVERS.items():
            pods = pods_of(cluster, namespace, job)
            running = {n: p for n, p in pods.items() if p["status"].get("phase") == "Running"}
            ip = running.get(f"{job}-{server}", {}).get("status", {}).get("podIP")
            if not ip or f"{job}-{dialer}" not in running:
                return None
            found[kind] = f"{ip}:{port}"
        return found

    return wait_until(addresses, timeout=180, what="every server and dialer pod Running")


def blocked(cluster: LocalCluster, tenant: tuple[str, str], targets: list[str]) -> dict[str, str]:
    """What the tenant got, once no address connects (the enforcer acts
    within moments of a policy or a pod; then twice more, so it holds)."""
    wait_until(
        lambda: "connected" not in dial(cluster, *tenant, targets).values(),
        timeout=60,
        what="the tenant's connections to stop",
    )
    for _ in range(2):
        got = dial(cluster, *tenant, targets)
        assert "connected" not in got.values(), got
    return got


def test_a_tenant_reaches_no_jobs_rendezvous_and_the_jobs_train(
    real_cluster: LocalCluster, install: Install, spaces: tuple[str, str]
) -> None:
    jobs, tenant_ns = spaces
    for docs in (caffe2_job(real_cluster), paddle_job(real_cluster), tf_job(real_cluster)):
        real_cluster.kubectl(
            "apply",
            "-n",
            jobs,
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
        )
    tenant = (tenant_ns, tenant_pod(real_cluster, tenant_ns))
    process = operator(install, jobs)
    try:
        where = server_addresses(real_cluster, jobs)
        targets = sorted(where.values())
        # The job's own pods reach their servers, once these listen (a pod
        # runs before its server does): what the tenant gets is then the
        # policies' doing, not a server still starting.
        for kind, (job, _, _, dialer) in SERVERS.items():
            wait_until(
                lambda kind=kind, job=job, dialer=dialer: (
                    dial(real_cluster, jobs, f"{job}-{dialer}", [where[kind]])
                    == {where[kind]: "connected"}
                ),
                timeout=120,
                what=f"{job}-{dialer} to reach its {kind}'s server",
            )
        got = blocked(real_cluster, tenant, targets)
        assert set(got.values()) <= {"TimeoutError", "ConnectionRefusedError"}, got
    finally:
        process.stop()

    real_cluster.kubectl("delete", "networkpolicies", "--all", "-n", jobs)
    wait_until(
        lambda: set(dial(real_cluster, *tenant, targets).values()) == {"connected"},
        timeout=60,
        what="the tenant to connect to every server once the policies are gone",
    )
    namespace, pod = tenant
    redis = where["Caffe2Job"]
    answer = real_cluster.kubectl("exec", pod, "-n", namespace, "--", "python", "-c", PING, redis)
    assert answer.stdout.startswith("-NOAUTH"), answer.stdout

    process = operator(install, jobs)
    try:
        blocked(real_cluster, tenant, targets)
        gate = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": GATE},
                "spec": {"ports": [{"port": 80}]}}  # fmt: skip
        real_cluster.kubectl("apply", "-n", jobs, "-f", "-", input=json.dumps(gate))
        for kind, (job, *_) in SERVERS.items():
            status = wait_until(
                lambda kind=kind, job=job: (
                    (s := job_status(real_cluster, jobs, kind, job)).get("phase")
                    in ("Done", "Failed")
                    and s
                ),
                timeout=300,
                what=f"{kind} {job} to end",
            )
            assert (status["phase"], status.get("state")) == ("Done", "Succeeded"), (kind, status)
    finally:
        process.stop()
