"""MXNet, Caffe2's redis rendezvous and elastic Paddle, for real on the real node.

The examples under examples/mxjob-dist-sync, examples/caffe2job-rendezvous
and examples/paddlejob-elastic run as users run them (`kubectl apply -k`),
through their overlays in examples/local/ (the local runtime image in place
of the published one), in namespaces whose pods all land on the real node.
The operator runs as a local process with the chart's ServiceAccount and
config (config.images.redis and .etcd pointed at the runtime image, as
values/realnode.yaml does), its autoscaler on a short period. Every
assertion is on what the frameworks themselves report in their logs (the
sums MXNet's servers aggregated, the keys the shards found in redis, the
trainer counts read from the file the kubelet refreshes), never on the
variables the operator wrote.

MXNet and Caffe2 jobs run side by side; the elastic PaddleJobs run after
them, on a node with nothing else asking for its CPU.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import yaml

from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

from .helpers import get_or_none, job_status, pods_of, wait_until
from .training import POLICIES, delete_namespaces, free_cpu, real_namespace

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


# --- Paddle: elastic trainers that follow the live count ---------------------------------

PADDLE = "paddlejob-elastic"
# Each trainer's CPU request in the example (entry.sh's trainers ask for half a CPU).
TRAINER_MILLI = 500


def paddle_job(cluster: LocalCluster, name: str, low: int, high: int) -> dict[str, Any]:
    """The example as `kubectl apply -k` would apply it, renamed and re-bounded."""
    rendered = cluster.kubectl("kustomize", str(EXAMPLES / PADDLE)).stdout
    [job] = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "PaddleJob"]
    job["metadata"]["name"] = name
    job["spec"]["trainer"] |= {"minInstance": low, "maxInstance": high}
    return job


def trainers_run(cluster: LocalCluster, ns: str, job: str) -> int | None:
    """The count the operator runs (`status.trainers`, the TRAINERS column):
    the autoscaler's ask once applied, minInstance while it asks nothing."""
    found = get_or_none(cluster, "paddlejob", job, "-n", ns) or {}
    value = found.get("status", {}).get("trainers")
    return value if isinstance(value, int) else None


def running_trainers(cluster: LocalCluster, ns: str, job: str) -> set[str]:
    return {
        name
        for name, p in pods_of(cluster, ns, job).items()
        if p["metadata"]["labels"]["dlk8s.io/replica-type"] == "trainer"
        and p["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def wait_for_trainers(cluster: LocalCluster, ns: str, job: str, count: int) -> float:
    """Until the job runs `count` trainers, and exactly those pods run; when
    its status said so."""
    wanted = {f"{job}-trainer-{i}" for i in range(count)}
    try:
        asked = wait_until(
            lambda: trainers_run(cluster, ns, job) == count and time.time(),
            timeout=90,
            what=f"{job} to run {count} trainers",
        )
        wait_until(
            lambda: running_trainers(cluster, ns, job) == wanted,
            timeout=90,
            what=f"{job}'s trainers {sorted(wanted)} to run",
        )
    except AssertionError as err:
        raise AssertionError(f"{err}; it runs {trainers_run(cluster, ns, job)}; "
                             f"its pods: {pod_states(cluster, ns, job)}") from None  # fmt: skip
    return float(asked)


def pod_states(cluster: LocalCluster, ns: str, job: str) -> dict[str, str]:
    """Each pod's phase and, for a container that is not running, why."""
    states = {}
    for name, p in sorted(pods_of(cluster, ns, job).items()):
        why = [
            f"{c['name']} {kind} {d.get('reason', '')} {d.get('message', '')}"
            for c in p["status"].get("containerStatuses") or []
            for kind, d in c.get("state", {}).items()
            if kind != "running" and isinstance(d, dict)
        ]
        states[name] = " ".join([p["status"].get("phase", "?"), *why])
    return states


def counts_printed(cluster: LocalCluster, ns: str, pod: str) -> list[tuple[float, int]]:
    """(when, count) of each count the trainer printed, by its log's times
    (a trainer prints the count on its first pass and whenever it changes)."""
    out = cluster.kubectl("logs", pod, "-n", ns, "-c", "paddle", "--timestamps", check=False)
    found = []
    for line in out.stdout.splitlines():
        stamp, _, text = line.partition(" ")
        printed = re.search(r": pass \d+: trainers (\d+)\b", text)
        if printed:
            # Nanoseconds: more digits than fromisoformat takes.
            when = datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()
            found.append((when, int(printed.group(1))))
    return found


def sees_within(cluster: LocalCluster, ns: str, pod: str, count: int, since: float) -> float:
    """How long the trainer took to print `count` after `since` (when the
    test saw the job's new count), or after its first pass if it began its
    passes later: a trainer still starting (waiting for the master) reads
    nothing. The count changed a moment before the test looked, so a print
    up to a few seconds earlier is this change's."""

    def seen() -> tuple[float, float] | None:
        printed = counts_printed(cluster, ns, pod)
        first = printed[0][0] if printed else 0.0
        return next(((t, first) for t, c in printed if c == count and t >= since - 5), None)

    try:
        # The trainer may first wait up to a minute for its master.
        when, first = wait_until(seen, timeout=90, what=f"{pod} to print trainers {count}")
    except AssertionError as err:
        raise AssertionError(f"{err}; {count_problem(cluster, ns, pod)}") from None
    return max(0.0, when - max(since, first))


def count_problem(cluster: LocalCluster, ns: str, pod: str) -> str:
    """Where the count stopped: the pod's annotation, the file, the log."""
    found = get_or_none(cluster, "pod", pod, "-n", ns) or {}
    annotation = (found.get("metadata", {}).get("annotations") or {}).get("dlk8s.io/trainers")
    cat = ["cat", "/etc/dlk8s/trainers"]
    file = cluster.kubectl("exec", pod, "-n", ns, "-c", "paddle", "--", *cat, check=False)
    out = cluster.kubectl("logs", pod, "-n", ns, "-c", "paddle", "--timestamps", check=False)
    return (
        f"annotation {annotation!r}, file {file.stdout.strip()!r} {file.stderr.strip()}, "
        f"at {time.time():.1f}, log:\n{out.stdout}"
    )


def sees_the_count(cluster: LocalCluster, ns: str, pod: str, count: int, since: float) -> None:
    """The running trainer printed the new count (the kubelet refreshes the
    file when it syncs the pod: at once on the pod's change, and every
    syncFrequency, 10 s on the real node). How long it took is printed, not
    judged: the test asks that it comes, timings belong in benchmarks."""
    took = sees_within(cluster, ns, pod, count, since)
    print(f"[paddle] {pod} printed trainers {count} {took:.1f}s after the change")


def test_elastic_paddle_trainers_follow_the_autoscaler_on_the_real_node(
    real_cluster: LocalCluster, operator: OperatorProcess
) -> None:
    ns = real_namespace(real_cluster, "train-paddle")
    first, second = PADDLE, f"{PADDLE}-2"
    try:
        # What the node has room for: the example's master and pserver ask
        # for 50m each, each trainer for half a CPU.
        room = wait_until(
            lambda: (f := free_cpu(real_cluster)) >= 2 * 100 + 3 * TRAINER_MILLI and f,
            timeout=60,
            what="room on the real node for the example and its trainers",
        )
        fits = (room - 100) // TRAINER_MILLI
        # The first job may grow beyond what the node holds: it must stop at
        # what fits, however much room the kwok nodes beside it have.
        apply_manifest(real_cluster, ns, paddle_job(real_cluster, first, 1, fits + 1))
        grown = wait_for_trainers(real_cluster, ns, first, fits)
        pod = f"{first}-trainer-0"
        sees_the_count(real_cluster, ns, pod, fits, grown)
        steady(real_cluster, ns, {first: fits}, seconds=6)
        # A second job whose minimum needs what the first grew into: the
        # first gives back trainers (never below its minimum) until it fits.
        apply_manifest(real_cluster, ns, paddle_job(real_cluster, second, 2, 3))
        # The second's master and pserver take 100m, its two trainers need
        # what the first gives back, one trainer at a time.
        left = room - 2 * 100 - fits * TRAINER_MILLI
        shrunk_to = fits - math.ceil(max(0, 2 * TRAINER_MILLI - left) / TRAINER_MILLI)
        assert shrunk_to >= 1, f"the node's room ({room}m) does not fit this test"
        shrunk = wait_for_trainers(real_cluster, ns, first, shrunk_to)
        wait_for_trainers(real_cluster, ns, second, 2)
        sees_the_count(real_cluster, ns, pod, shrunk_to, shrunk)
        steady(real_cluster, ns, {first: shrunk_to, second: 2}, seconds=8)
        for trainer in (f"{second}-trainer-0", f"{second}-trainer-1"):
            sees_within(real_cluster, ns, trainer, 2, since=0)
        # The peers, as trainer 0 found them by their Services' names.
        out = log(real_cluster, ns, pod, "paddle")
        master, pserver = f"{first}-master-0", f"{first}-pserver-0"
        assert re.search(
            rf"master {master}\.{ns}\.svc:8080 says etcd 3\.\d+\.\d+ answers: "
            rf"paddle/master = {master}$",
            out,
            re.M,
        ), out
        assert f"pserver {pserver}.{ns}.svc:7164 answers: pserver {pserver}" in out, out
        pods = pods_of(real_cluster, ns, first) | pods_of(real_cluster, ns, second)
        on_the_real_node(real_cluster, {n: p for n, p in pods.items() if p["spec"].get("nodeName")})
    finally:
        delete_namespaces(real_cluster, ns)


def apply_manifest(cluster: LocalCluster, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def steady(cluster: LocalCluster, ns: str, counts: dict[str, int], seconds: float) -> None:
    """The jobs keep these counts, and no trainer waits for a node meanwhile
    (growth into room the trainers may not use would leave one Pending)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for job, count in counts.items():
            assert trainers_run(cluster, ns, job) == count, (job, count)
            pending = [
                n
                for n, p in pods_of(cluster, ns, job).items()
                if p["metadata"]["labels"]["dlk8s.io/replica-type"] == "trainer"
                and not p["spec"].get("nodeName")
            ]
            assert not pending, f"{job}: trainers without a node: {pending}"
        time.sleep(0.5)
