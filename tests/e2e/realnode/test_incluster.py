"""The operator in the cluster, on the real node, as users install it.

`helm install` (helm 4, then helm 3) with values/realnode.yaml runs the
operator from the image built here (hooks/Dockerfile), under the chart's
ServiceAccount, non-root, with a read-only root filesystem, and its real
probes decide when the Deployment is Available. Then, for each helm: the
leader Lease is held by the operator's pod, /metrics answers through the
metrics Service to another pod, `helm test` passes and its pod really ran
the smoke TFJob, a deleted operator pod is replaced and the new one runs a
job submitted meanwhile to Done, and `helm uninstall` leaves the CRDs and
the jobs. One install at a time: two operators watching every namespace
would both act on the same jobs.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install, install_in_cluster, operator_pods

from ..helpers import CRDS, get_json, get_or_none, wait_for_phase, wait_until

HELMS = ("helm4", "helm3")
# Where the smoke TFJob's image and every job's pods here come from.
BASE_IMAGE = "localhost/dlk8s/base:local"
SCRAPER = "scraper"  # the ServiceAccount that may read the operator's metrics
PRINT_TASK = "import json, os; print('task', json.loads(os.environ['TF_CONFIG'])['task'])"


@dataclass
class HelmInstall(Install):
    helm: str = "helm4"


@pytest.fixture(scope="module", params=HELMS)
def installed(request: pytest.FixtureRequest, real_cluster: LocalCluster) -> Iterator[HelmInstall]:
    """The chart installed with one helm; uninstalled before the next helm's."""
    helm = request.param
    namespace = f"incluster-{helm}"
    install = install_in_cluster(
        real_cluster,
        release=f"dlk8s-{helm}",
        namespace=namespace,
        helm=helm,
        # One replica with its Lease, as a user turns it on for fast hand-over.
        sets=(
            "cloud=gke",
            "operator.leaderElection.enabled=true",
            # The chart binds its metrics-reader ClusterRole to this one
            # (test_metrics_answer_through_the_service_from_another_pod).
            "metrics.readers[0].kind=ServiceAccount",
            f"metrics.readers[0].name={SCRAPER}",
            f"metrics.readers[0].namespace={namespace}",
        ),
    )
    try:
        yield HelmInstall(install.cluster, install.release, install.namespace, helm)
    finally:
        real_cluster.helm("uninstall", install.release, "-n", namespace, helm=helm, check=False)
        real_cluster.kubectl("delete", "tfjobs", "--all", "-n", namespace, "--wait=false")
        real_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def the_operator_pod(install: Install) -> dict[str, Any]:
    pods = [p for p in operator_pods(install) if not p["metadata"].get("deletionTimestamp")]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def run_pod(
    cluster: LocalCluster,
    namespace: str,
    name: str,
    code: str,
    mounts: Sequence[dict[str, Any]] = (),
    **spec: Any,
) -> str:
    """Run ``python3 -c code`` in a pod of the base image (`spec` added to
    its spec, `mounts` to its container); its log once it succeeded."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": BASE_IMAGE,
                    "command": ["python3", "-u", "-c", textwrap.dedent(code)],
                    "volumeMounts": list(mounts),
                }
            ],
        },
    }
    pod["spec"].update(spec)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    phase = wait_until(
        lambda: (
            (get_json(cluster, "pod", name, "-n", namespace).get("status") or {}).get("phase")
            in ("Succeeded", "Failed")
            and get_json(cluster, "pod", name, "-n", namespace)["status"]["phase"]
        ),
        timeout=90,
        what=f"pod {name} to finish",
    )
    out = cluster.kubectl("logs", name, "-n", namespace).stdout
    assert phase == "Succeeded", out
    return out


def started_on_the_node(install: Install, pod_prefix: str) -> list[dict[str, Any]]:
    """The kubelet's Started events of pods named ``pod_prefix...`` on the real node."""
    assert install.cluster.node is not None
    events = get_json(install.cluster, "events", "-n", install.namespace)["items"]
    return [
        e
        for e in events
        if e["involvedObject"]["kind"] == "Pod"
        and e["involvedObject"]["name"].startswith(pod_prefix)
        and e["reason"] == "Started"
        and (e.get("source") or {}).get("host") == install.cluster.node.name
    ]


def test_the_deployment_is_available_through_its_real_probes(installed: HelmInstall) -> None:
    cluster = installed.cluster
    assert cluster.node is not None
    deployment = installed.deployment()
    available = next(c for c in deployment["status"]["conditions"] if c["type"] == "Available")
    assert available["status"] == "True"
    pod = the_operator_pod(installed)
    assert pod["spec"]["nodeName"] == cluster.node.name
    assert pod["spec"]["serviceAccountName"] == installed.service_account
    container = pod["spec"]["containers"][0]
    assert container["image"] == "localhost/dlk8s/operator:local"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"]
    assert status["restartCount"] == 0
    # The image the node got from `make image`, not something pulled.
    assert status["imageID"].startswith("sha256:")
    name, ns = pod["metadata"]["name"], installed.namespace
    # What the kernel says of the running process, not only what the spec asks.
    who = cluster.kubectl("exec", name, "-n", ns, "--", "id").stdout
    assert who.startswith("uid=65532 gid=65532"), who
    write = cluster.kubectl("exec", name, "-n", ns, "--", "touch", "/x", check=False)
    assert write.returncode != 0
    assert "Read-only file system" in write.stderr, write.stderr
    # It started, synced its caches as the chart's ServiceAccount, and
    # complained of nothing.
    log = [json.loads(line) for line in cluster.kubectl("logs", name, "-n", ns).stdout.splitlines()]
    assert not [e for e in log if e["level"] in ("error", "critical")], log


def test_the_leader_lease_is_held_by_the_operator_pod(installed: HelmInstall) -> None:
    pod = the_operator_pod(installed)["metadata"]["name"]
    lease = get_json(
        installed.cluster, "lease", f"{installed.release}-leader", "-n", installed.namespace
    )
    # The operator's identity is its host name (the pod's name) plus a nonce.
    assert lease["spec"]["holderIdentity"].startswith(f"{pod}_"), lease["spec"]


def test_metrics_answer_through_the_service_from_another_pod(installed: HelmInstall) -> None:
    """Over HTTPS (the chart's certificate, for the Service's name), to the
    ServiceAccount the chart's metrics-reader role is bound to; without a
    token the same request is refused."""
    cluster, namespace = installed.cluster, installed.namespace
    service = f"{installed.release}-metrics"
    port = get_json(cluster, "service", service, "-n", namespace)["spec"]["ports"][0]["port"]
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SCRAPER}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(account))
    secret = f"{installed.release}-metrics-tls"
    ca = {"secret": {"secretName": secret, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    out = run_pod(
        cluster,
        namespace,
        "scraper",
        f"""
        import ssl, urllib.error, urllib.request
        url = "https://{service}.{namespace}.svc:{port}/metrics"
        tls = ssl.create_default_context(cafile="/ca/ca.crt")
        token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
        try:
            urllib.request.urlopen(url, timeout=10, context=tls)
        except urllib.error.HTTPError as err:
            print("without a token:", err.code)
        asked = urllib.request.Request(url, headers={{"Authorization": "Bearer " + token}})
        with urllib.request.urlopen(asked, timeout=10, context=tls) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(("dlk8s_leader", "dlk8s_workqueue_depth")):
                    print(line)
        """,
        mounts=[{"name": "ca", "mountPath": "/ca", "readOnly": True}],
        serviceAccountName=SCRAPER,
        volumes=[{"name": "ca", **ca}],
    )
    assert "without a token: 401" in out, out
    assert "dlk8s_leader 1.0" in out, out
    assert "dlk8s_workqueue_depth" in out, out


def test_helm_test_runs_the_smoke_job_on_the_real_node(installed: HelmInstall) -> None:
    cluster, ns = installed.cluster, installed.namespace
    assert cluster.node is not None
    helm = installed.helm
    done = cluster.helm("test", installed.release, "-n", ns, "--timeout", "180s", helm=helm)
    assert "Phase:          Succeeded" in done.stdout, done.stdout
    smoke_pod = f"{installed.release}-smoke"
    # The hook pod is deleted once it succeeded; the kubelet's events stay.
    assert started_on_the_node(installed, smoke_pod), "the helm test pod never ran on the node"
    # ... and the smoke TFJob's MASTER, which the smoke command created and
    # deleted again: a container ran and exited 0 on the node.
    assert started_on_the_node(installed, "dlk8s-smoke-"), "the smoke TFJob's pod never ran"
    # The smoke command deleted its job (the foreground deletion may still run).
    jobs = get_json(cluster, "tfjobs", "-n", ns)["items"]
    smoke = [j for j in jobs if j["metadata"]["name"].startswith("dlk8s-smoke-")]
    assert all(j["metadata"].get("deletionTimestamp") for j in smoke), smoke


def one_master_tfjob(
    name: str,
    namespace: str,
    container: dict[str, Any] | None = None,
    run_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A TFJob of one MASTER on the base image; `container` adds to its container."""
    main = {"name": "tensorflow", "image": BASE_IMAGE, **(container or {})}
    master = {
        "replicas": 1,
        "tfReplicaType": "MASTER",
        "template": {"spec": {"containers": [main], "terminationGracePeriodSeconds": 1}},
    }
    spec: dict[str, Any] = {"replicaSpecs": [master]}
    if run_policy:
        spec["runPolicy"] = run_policy
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def test_a_new_operator_pod_takes_over_and_runs_a_job_submitted_meanwhile(
    installed: HelmInstall,
) -> None:
    cluster, ns = installed.cluster, installed.namespace
    old = the_operator_pod(installed)["metadata"]["name"]
    cluster.kubectl("delete", "pod", old, "-n", ns, "--wait=false")
    job = f"meanwhile-{installed.helm}"
    command = ["python3", "-c", PRINT_TASK]
    manifest = one_master_tfjob(job, ns, {"command": command})
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def new_leader() -> str:
        pods = [
            p
            for p in operator_pods(installed)
            if p["metadata"]["name"] != old and not p["metadata"].get("deletionTimestamp")
        ]
        lease = get_or_none(cluster, "lease", f"{installed.release}-leader", "-n", ns) or {}
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        names = [p["metadata"]["name"] for p in pods]
        return next((n for n in names if holder.startswith(f"{n}_")), "")

    new = wait_until(new_leader, timeout=120, what="a new operator pod to hold the lease")
    assert new != old
    status = wait_for_phase(cluster, ns, "TFJob", job, "Done", timeout=120)
    assert status["state"] == "Succeeded", status
    # Its MASTER's container ran on the node and exited 0.
    assert started_on_the_node(installed, f"{job}-master-0")
    wait_until(
        lambda: installed.deployment()["status"].get("availableReplicas") == 1,
        timeout=60,
        what="the Deployment to be Available again",
    )


RENDEZVOUS = """
import os, time, redis
server = redis.Redis(
    host=os.environ["REDIS_HOST"],
    port=int(os.environ["REDIS_PORT"]),
    password=os.environ["REDIS_PASSWORD"],  # the job's Secret: the server asks for it
)
for _ in range(100):
    try:
        server.set("shard", os.environ["SHARD_ID"])
        break
    except redis.ConnectionError:
        time.sleep(0.2)
print("shard", server.get("shard").decode(), "via", os.environ["REDIS_HOST"], flush=True)
"""


def test_the_redis_the_operator_adds_is_the_configured_image_and_serves(
    installed: HelmInstall,
) -> None:
    """values/realnode.yaml sets config.images.redis; the chart renders it into
    the operator's config, and a Caffe2Job MASTER's redis runs from it."""
    cluster, ns = installed.cluster, installed.namespace
    job = f"rendezvous-{installed.helm}"
    manifest = {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "Caffe2Job",
        "metadata": {"name": job, "namespace": ns},
        "spec": {
            "backendSpecs": {"backendType": "redis"},
            "replicaSpecs": [
                {
                    "replicas": 1,
                    "replicaType": "MASTER",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "caffe2",
                                    "image": "localhost/dlk8s/runtime:local",
                                    "command": ["python", "-c", RENDEZVOUS],
                                }
                            ],
                            "terminationGracePeriodSeconds": 1,
                            "restartPolicy": "Never",
                        }
                    },
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    master = f"{job}-master-0"
    pod = wait_until(
        lambda: get_or_none(cluster, "pod", master, "-n", ns), timeout=60, what="the MASTER pod"
    )
    redis = next(c for c in pod["spec"]["initContainers"] if c["name"] == "redis")
    assert redis["image"] == "localhost/dlk8s/runtime:local"
    status = wait_for_phase(cluster, ns, "Caffe2Job", job, "Done", timeout=120)
    assert status["state"] == "Succeeded", status
    assert started_on_the_node(installed, master)


def test_helm_uninstall_leaves_the_crds_and_the_jobs(installed: HelmInstall) -> None:
    cluster, ns = installed.cluster, installed.namespace
    helm = installed.helm
    # A job of its own, so as not to depend on what the tests before left
    # (under pytest-xdist a module fixture may be set up afresh); suspended,
    # so that it runs nothing.
    kept = one_master_tfjob("kept", ns, run_policy={"suspend": True})
    cluster.kubectl("apply", "-f", "-", input=json.dumps(kept))
    jobs_before = {j["metadata"]["name"] for j in get_json(cluster, "tfjobs", "-n", ns)["items"]}
    assert "kept" in jobs_before
    cluster.helm("uninstall", installed.release, "-n", ns, "--wait", helm=helm)
    assert not get_json(cluster, "deployments", "-n", ns)["items"]
    for crd in CRDS:
        assert get_or_none(cluster, "crd", crd) is not None, crd
    jobs_after = {j["metadata"]["name"] for j in get_json(cluster, "tfjobs", "-n", ns)["items"]}
    assert jobs_after == jobs_before


RUNTIME_CHECK = """
import os, subprocess, sys, time
def run(*argv):
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    print(" | ".join(out.splitlines()), flush=True)
# One framework per process, as jobs run them.
run(sys.executable, "-c", "import mxnet as mx; print('mxnet', mx.__version__, "
    "(mx.nd.ones((2, 2)) * 3).sum().asscalar())")
run(sys.executable, "-c", "import tensorflow as tf; print('tensorflow', tf.__version__, "
    "float(tf.reduce_sum(tf.ones((2, 2)) * 3)))")
run("tensorboard", "--version")
run("etcd", "--version")
server = subprocess.Popen(["redis-server", "--port", "6390", "--save", ""],
                          stdout=subprocess.DEVNULL)
import redis
client = redis.Redis(port=6390)
for _ in range(50):
    try:
        client.set("k", "from redis-server"); break
    except redis.ConnectionError:
        time.sleep(0.1)
print("redis", client.get("k").decode(), flush=True)
server.terminate()
print("pip.conf", os.path.exists("/etc/pip.conf"))
"""


def test_the_runtime_image_runs_its_frameworks_as_a_user_with_a_read_only_root(
    real_cluster: LocalCluster,
) -> None:
    assert real_cluster.node is not None
    ns = real_cluster.node.real_namespace(real_cluster, "incluster-runtime")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "runtime", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
            "containers": [
                {
                    "name": "main",
                    "image": "localhost/dlk8s/runtime:local",
                    "command": ["python", "-c", RUNTIME_CHECK],
                    "securityContext": {"readOnlyRootFilesystem": True},
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    "workingDir": "/tmp",
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }
    try:
        real_cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
        wait_until(
            lambda: (
                (get_json(real_cluster, "pod", "runtime", "-n", ns).get("status") or {}).get(
                    "phase"
                )
                in ("Succeeded", "Failed")
            ),
            timeout=120,
            what="the runtime pod to finish",
        )
        out = real_cluster.kubectl("logs", "runtime", "-n", ns).stdout
        assert (
            get_json(real_cluster, "pod", "runtime", "-n", ns)["status"]["phase"] == "Succeeded"
        ), out
    finally:
        real_cluster.kubectl("delete", "namespace", ns, "--wait=false")
    assert "mxnet 1.9.1 12.0" in out
    assert "tensorflow 2.17.1 12.0" in out
    assert "redis from redis-server" in out
    assert "etcd Version: 3.4." in out, out
    # The build's CA bundle and pip settings were mounts, not files of the image.
    assert "pip.conf False" in out
