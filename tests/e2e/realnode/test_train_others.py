"""MXNet and Caffe2's redis rendezvous, for real on the real node.

The examples under examples/mxjob-dist-sync and examples/caffe2job-rendezvous
run as users run them (`kubectl apply -k`),
through their overlays in examples/local/ (the local runtime image in place
of the published one), in namespaces whose pods all land on the real node.
The operator runs as a local process with the chart's ServiceAccount and
config (config.images.redis and .etcd pointed at the runtime image, as
values/realnode.yaml does), its autoscaler on a short period. Every
assertion is on what the frameworks themselves report in their logs (the
sums MXNet's servers aggregated, the keys the shards found in redis),
never on the variables the operator wrote. MXNet and Caffe2 jobs run side
by side. PaddlePaddle's are in test_train_paddle.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

from ..helpers import get_or_none, job_status, pods_of, wait_until
from ..realjobs import POLICIES, delete_namespaces, real_namespace

RUNTIME = "localhost/dlk8s/runtime:local"
RELEASE = "train-others"
# The examples with the local runtime image (examples/README.md).
EXAMPLES = REPO_ROOT / "examples" / "local"
FINAL = ("Done", "Failed")


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster) -> Iterator[OperatorProcess]:
    """The chart (operator Deployment on a kwok node, where it never runs) and
    the operator as a local process with its ServiceAccount and config."""
    namespace = f"{RELEASE}-system"
    install = install_chart(
        real_cluster,
        release=RELEASE,
        namespace=namespace,
        sets=(
            "cloud=gke",
            POLICIES,
            f"config.images.redis={RUNTIME}",
            f"config.images.etcd={RUNTIME}",
        ),
    )
    process = OperatorProcess(install, name=RELEASE, env={"DLK8S_AUTOSCALER_PERIOD": "1"}).start()
    try:
        yield process
    finally:
        process.stop()
        real_cluster.helm("uninstall", RELEASE, "-n", namespace, check=False)
        real_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def apply_example(cluster: LocalCluster, namespace: str, name: str) -> None:
    cluster.kubectl("apply", "-k", str(EXAMPLES / name), "-n", namespace)


def log(cluster: LocalCluster, namespace: str, pod: str, container: str) -> str:
    return cluster.kubectl("logs", pod, "-n", namespace, "-c", container).stdout


def on_the_real_node(cluster: LocalCluster, pods: dict[str, dict[str, Any]]) -> None:
    assert cluster.node is not None
    where = {name: p["spec"].get("nodeName") for name, p in pods.items()}
    assert set(where.values()) == {cluster.node.name}, where


def all_succeeded(
    cluster: LocalCluster, namespace: str, job: str, names: set[str]
) -> dict[str, dict[str, Any]]:
    """The job's pods once each says Succeeded. The job may be Done a moment
    earlier: the operator goes by the containers' ends, which the kubelet
    reports before it moves the pod's phase."""

    def phases() -> dict[str, str]:
        return {
            n: p["status"].get("phase", "") for n, p in pods_of(cluster, namespace, job).items()
        }

    wait_until(
        lambda: phases() == dict.fromkeys(names, "Succeeded"),
        timeout=30,
        what=f"{sorted(names)} to be the pods left, all Succeeded (now {phases()})",
    )
    return pods_of(cluster, namespace, job)


def stamp(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 time as the API writes it."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def finished(cluster: LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    status = job_status(cluster, namespace, kind, name)
    return status if status.get("phase") in FINAL else None


def done(cluster: LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    """The job's status once Done; if it fails or hangs, why: its events and
    the logs of its pods."""
    try:
        status = wait_until(
            lambda: finished(cluster, namespace, kind, name), timeout=240, what=f"{kind} {name}"
        )
        if status and status["phase"] == "Done" and status["state"] == "Succeeded":
            return status
    except AssertionError:
        pass
    described = cluster.kubectl("describe", kind.lower(), name, "-n", namespace).stdout
    logs = [
        f"--- {pod} {p['status'].get('phase')}:\n"
        + cluster.kubectl("logs", pod, "-n", namespace, "--all-containers", check=False).stdout[
            -3000:
        ]
        for pod, p in sorted(pods_of(cluster, namespace, name).items())
    ]
    raise AssertionError(f"{kind} {name} did not succeed:\n{described}\n" + "\n".join(logs))


@pytest.fixture(scope="module")
def submitted(real_cluster: LocalCluster, operator: OperatorProcess) -> Iterator[dict[str, str]]:
    """The MXNet and Caffe2 examples, applied at once so that they run side by side."""
    spaces = {
        "mxjob-dist-sync": real_namespace(real_cluster, "train-mx"),
        "caffe2job-rendezvous": real_namespace(real_cluster, "train-caffe2"),
    }
    try:
        for name, namespace in spaces.items():
            apply_example(real_cluster, namespace, name)
        yield spaces
    finally:
        delete_namespaces(real_cluster, *spaces.values())


# --- MXNet: dist_sync over ps-lite ---------------------------------------------------


def test_mxnet_workers_pull_the_sum_every_worker_pushed_then_train_a_model(
    real_cluster: LocalCluster, submitted: dict[str, str]
) -> None:
    ns, job = submitted["mxjob-dist-sync"], "mxjob-dist-sync"
    done(real_cluster, ns, "MXJob", job)
    names = {f"{job}-scheduler-0", f"{job}-server-0", f"{job}-worker-0", f"{job}-worker-1"}
    # Every replica ran to its end and is kept for its log.
    pods = all_succeeded(real_cluster, ns, job, names)
    on_the_real_node(real_cluster, pods)
    ranks = set()
    for worker in (f"{job}-worker-0", f"{job}-worker-1"):
        out = log(real_cluster, ns, worker, "mxnet")
        joined = re.search(r"^worker (\d): joined: (\d+) workers", out, re.M)
        assert joined, out
        rank = joined.group(1)
        ranks.add(rank)
        # Pushes of (rank + 1) * round from both workers, summed by the server.
        for round_ in (1, 2, 3):
            pushed = (int(rank) + 1) * round_
            line = f"worker {rank}: round {round_} pushed {pushed} pulled sum [{3.0 * round_}]"
            assert line in out, out
        # Then a Gluon network trained through the same kvstore: the loss
        # falls a hundredfold and the weights the data came from are found.
        epochs = [
            float(x) for x in re.findall(rf"^worker {rank}: epoch \d+ loss (\S+)$", out, re.M)
        ]
        assert len(epochs) == 10, out
        assert epochs[-1] < epochs[0] / 100, out
        assert re.search(rf"^worker {rank}: trained: largest weight error 0\.0[0-4]", out, re.M), (
            out
        )
        assert f"worker {rank}: done" in out, out
    # ps-lite gave the two workers two ranks.
    assert ranks == {"0", "1"}
    # The scheduler found the cluster by its Service's name and saw it through.
    out = log(real_cluster, ns, f"{job}-scheduler-0", "mxnet")
    assert f"scheduler: joining the scheduler at {job}-scheduler-0.{ns}.svc:9091" in out, out


# --- Caffe2: the redis rendezvous -----------------------------------------------------


def rendezvous_lines(out: str, run: str, shards: int) -> None:
    keys = " ".join(f"{run}/shard/{i}" for i in range(shards))
    assert f"rendezvous complete: {shards} shards registered: {keys}" in out, out


def caffe2_done(cluster: LocalCluster, submitted: dict[str, str], job: str) -> tuple[str, str]:
    """The namespace of the Caffe2 example and the job's run id, once the job is Done."""
    ns = submitted["caffe2job-rendezvous"]
    return ns, done(cluster, ns, "Caffe2Job", job)["runtimeId"]


def test_caffe2_shards_meet_in_the_redis_of_their_master(
    real_cluster: LocalCluster, submitted: dict[str, str]
) -> None:
    job = "caffe2job-in-master"
    ns, run = caffe2_done(real_cluster, submitted, job)
    shards = {f"{job}-master-0": 0, f"{job}-worker-0": 1, f"{job}-worker-1": 2}
    # Every shard is kept for its log, the MASTER too: the redis the
    # operator added is a native sidecar, which the kubelet stopped once
    # caffe2 had exited, so the MASTER pod completed.
    pods = all_succeeded(real_cluster, ns, job, set(shards))
    on_the_real_node(real_cluster, pods)
    for pod, shard in shards.items():
        out = log(real_cluster, ns, pod, "caffe2")
        assert f"shard {shard}: of 3, run {run}, redis {job}-redis.{ns}.svc:6379" in out, out
        rendezvous_lines(out, run, 3)
    assert "shard 0: all 3 shards done" in log(real_cluster, ns, f"{job}-master-0", "caffe2")
    # The redis ran from the configured image, served until caffe2 had
    # ended, and then stopped when asked: with nothing to save it exits 0 on
    # SIGTERM (killed after the grace period, it would end 137).
    master = pods[f"{job}-master-0"]
    [redis] = master["spec"]["initContainers"]
    assert (redis["name"], redis["image"], redis["restartPolicy"]) == ("redis", RUNTIME, "Always")
    [sidecar] = master["status"]["initContainerStatuses"]
    [caffe2] = master["status"]["containerStatuses"]
    stopped, ended = sidecar["state"]["terminated"], caffe2["state"]["terminated"]
    assert stopped["exitCode"] == 0, stopped
    assert stamp(stopped["finishedAt"]) >= stamp(ended["finishedAt"]), (stopped, ended)
    assert get_or_none(real_cluster, "service", f"{job}-redis", "-n", ns) is None


def test_caffe2_shards_meet_in_an_existing_redis(
    real_cluster: LocalCluster, submitted: dict[str, str]
) -> None:
    job = "caffe2job-redis-host"
    ns, run = caffe2_done(real_cluster, submitted, job)
    # No MASTER: every worker decided, and every one succeeded.
    pods = all_succeeded(real_cluster, ns, job, {f"{job}-worker-{i}" for i in range(3)})
    on_the_real_node(real_cluster, pods)
    for index in range(3):
        out = log(real_cluster, ns, f"{job}-worker-{index}", "caffe2")
        assert f"shard {index}: of 3, run {run}, redis caffe2-redis:6379" in out, out
        rendezvous_lines(out, run, 3)
    # What the server holds: one key per shard and one per finished shard,
    # each naming the pod that wrote it.
    scan = real_cluster.kubectl(
        "exec", "deploy/caffe2-redis", "-n", ns, "--",
        "sh", "-c", f"for k in $(redis-cli --scan --pattern '{run}/*'); do "
        "echo $k $(redis-cli get $k); done",
    ).stdout  # fmt: skip
    keys = dict(line.split(" ", 1) for line in scan.splitlines())
    assert keys == {
        f"{run}/{what}/{i}": f"{job}-worker-{i}" for what in ("shard", "done") for i in range(3)
    }, scan
