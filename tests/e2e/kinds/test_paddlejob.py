"""PaddleJob end to end: EDL's example, the autoscaler on a small cluster,
and pod templates that put a job on a tainted node of its own.

The scaling tests run on their own cluster of two nodes with known room
(8 CPU, 16Gi, 4 GPUs each), with the chart installed and the operator
running as a local process with the chart's ServiceAccount, so the
autoscaler's RBAC (nodes, all pods, patching PaddleJobs and pods) is the
chart's. A sampler thread checks the invariants throughout: trainer counts
within [minInstance, maxInstance], no node with more requested than it has,
pservers never touched.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s.job.computeresources import from_list, pod_requests
from dlk8s.job.kinds.paddlejob.launch import LAUNCHER
from dlk8s_dev.localcluster import (
    LocalCluster,
    NodeSpec,
    leftover_processes,
    missing_tools,
    node_manifest,
)
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

from ...unit.support.paddle import EDL_EXAMPLE_ENV, ELASTIC_LAUNCHER_ENV
from ..helpers import (
    apply,
    example,
    get_json,
    holds_for,
    job_status,
    pods_of,
    services_of,
    wait_until,
    without_binding,
)

NODES = (
    NodeSpec("small-0", cpu="8", memory="16Gi", gpu=4),
    NodeSpec("small-1", cpu="8", memory="16Gi", gpu=4),
)
NAMESPACE = "elastic"


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "paddle")
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def role_pods(pods: dict[str, dict[str, Any]], role: str) -> dict[str, dict[str, Any]]:
    return {
        n: p for n, p in pods.items() if p["metadata"]["labels"]["dlk8s.io/replica-type"] == role
    }


# --- EDL's example, on the session cluster --------------------------------------------


@pytest.mark.usefixtures("operator")
def test_edl_example_makes_the_right_pods_and_variables(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("paddlejob-edl.yaml"))
    base = {"example-master-0", "example-pserver-0", "example-pserver-1"}

    def started() -> dict[str, dict[str, Any]] | None:
        pods = pods_of(cluster, namespace, "example")
        names = set(pods)
        ok = base <= names and {"example-trainer-0", "example-trainer-1"} <= names
        return pods if ok else None

    pods = wait_until(started, what="the example's master, pservers and trainers")
    trainer = pods["example-trainer-0"]
    etcd = f"etcd://example-master-0.{namespace}.svc:2379"
    assert env_of(trainer) == EDL_EXAMPLE_ENV | ELASTIC_LAUNCHER_ENV | {
        "PADDLE_MASTER": etcd,
        "PADDLE_TRAINING_ROLE": "TRAINER",
        "NAMESPACE": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
        "POD_IP": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
    }
    command = trainer["spec"]["containers"][0]["command"]
    assert command == ["sh", "-c", LAUNCHER, "paddle_k8s", "start_new_trainer"]
    assert trainer["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "200m",
        "memory": "200Mi",
    }
    pserver = pods["example-pserver-1"]["spec"]["containers"][0]
    assert pserver["resources"] == {
        "limits": {"cpu": "800m", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "600Mi"},
    }
    master = pods["example-master-0"]["spec"]["containers"]
    assert [c["name"] for c in master] == ["paddle", "etcd"]
    # A replica's Service follows its pod's address, a moment after the pod runs.
    wait_until(
        lambda: (
            base | {"example-trainer-0", "example-trainer-1"}
            <= services_of(cluster, namespace, "example").keys()
        ),
        what="the example's Services",
    )
    status = wait_until(
        lambda: (
            (s := job_status(cluster, namespace, "PaddleJob", "example")).get("phase") == "Running"
            and s
        ),
        what="the example to run",
    )
    assert 2 <= status["trainers"] <= 6


# --- the autoscaler, on a small cluster of known size ---------------------------------


@pytest.fixture(scope="module")
def small() -> Iterator[tuple[LocalCluster, OperatorProcess]]:
    if missing_tools():
        pytest.skip(f"local control plane tools missing: {missing_tools()} (run `make tools`)")
    local = LocalCluster(nodes=NODES)
    local.start()
    operator: OperatorProcess | None = None
    try:
        install = install_chart(local)
        operator = OperatorProcess(
            install,
            name="elastic-operator",
            # Nodes are kept for a job that cannot be placed after 4 s (the
            # first test never has one: everything it submits fits).
            env={"DLK8S_AUTOSCALER_PERIOD": "2", "DLK8S_AUTOSCALER_RESERVE_AFTER": "4"},
        ).start()
        local.kubectl("create", "namespace", NAMESPACE)
        yield local, operator
    finally:
        if operator is not None:
            operator.stop()
        workdir = str(local.workdir)
        local.stop()
        assert leftover_processes(workdir) == []


def elastic_job(name: str, low: int, high: int, gpus: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "PaddleJob",
        "metadata": {"name": name},
        "spec": {
            "image": "paddle:test",
            "faultTolerant": low < high,
            "trainer": {
                "entrypoint": "python train.py",
                "minInstance": low,
                "maxInstance": high,
                "resources": {
                    "requests": {"cpu": "500m", "memory": "1Gi"},
                    "limits": {"nvidia.com/gpu": gpus},
                },
            },
            "pserver": {
                "minInstance": 1,
                "maxInstance": 1,
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
            },
            "master": {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
        },
    }


class Sampler:
    """Checks the invariants on every sample, in the background."""

    def __init__(self, cluster: LocalCluster, bounds: dict[str, tuple[int, int]]) -> None:
        self.cluster = cluster
        self.bounds = bounds
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.pserver_uids: dict[str, set[str]] = {}
        # Samples begun, and the last complete one: its number and what it
        # saw (live trainer pods per job). A sample that raised checked nothing.
        self._begun = 0
        self._complete = (0, dict[str, int]())
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._begun += 1
            number = self._begun
            try:
                seen = self.sample()
            except Exception as err:  # a flaky read is no violation; keep sampling
                self.errors.append(repr(err))
            else:
                with self._changed:
                    self._complete = (number, seen)
                    self._changed.notify_all()
            self._stop.wait(0.3)

    def fresh(self, timeout: float = 120) -> dict[str, int]:
        """What a complete sample begun after this call saw: the invariants
        were checked on the state the caller has just reached."""
        after = self._begun
        with self._changed:
            if not self._changed.wait_for(lambda: self._complete[0] > after, timeout):
                raise AssertionError(f"no complete sample within {timeout}s: {self.errors[-3:]}")
            return self._complete[1]

    def sample(self) -> dict[str, int]:
        nodes = get_json(self.cluster, "nodes")["items"]
        pods = get_json(self.cluster, "pods", "-A")["items"]
        jobs = get_json(self.cluster, "paddlejobs", "-n", NAMESPACE)["items"]
        room = {n["metadata"]["name"]: from_list(n["status"]["allocatable"]) for n in nodes}
        used = {name: from_list({}) for name in room}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node in used and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                used[node] = used[node] + pod_requests(pod["spec"])
        for name, total in room.items():
            if not used[name].fits_in(total):
                self.violations.append(f"node {name}: {used[name]} requested of {total}")
        for job in jobs:
            name = job["metadata"]["name"]
            low, high = self.bounds[name]
            count = (job.get("status") or {}).get("trainers")
            if count is not None and not low <= count <= high:
                self.violations.append(f"{name}: status.trainers {count} outside [{low}, {high}]")
            asked = job["metadata"].get("annotations", {}).get("dlk8s.io/trainers")
            if asked is not None and not low <= int(asked) <= high:
                self.violations.append(f"{name}: the autoscaler asked for {asked}")
        trainers: dict[str, int] = {}
        for pod in pods:
            labels = pod["metadata"].get("labels", {})
            role, job = labels.get("dlk8s.io/replica-type"), labels.get("dlk8s.io/job-name", "")
            if role == "trainer" and not pod["metadata"].get("deletionTimestamp"):
                trainers[job] = trainers.get(job, 0) + 1
            if role == "pserver":
                self.pserver_uids.setdefault(job, set()).add(pod["metadata"]["uid"])
                if labels["dlk8s.io/replica-index"] != "0":
                    self.violations.append(f"{job}: a second pserver appeared")
        return trainers


def trainers_of(cluster: LocalCluster, job: str) -> dict[str, dict[str, Any]]:
    pods = role_pods(pods_of(cluster, NAMESPACE, job), "trainer")
    return {n: p for n, p in pods.items() if not p["metadata"].get("deletionTimestamp")}


def running_trainers(cluster: LocalCluster, job: str, count: int) -> dict[str, dict[str, Any]]:
    def check() -> dict[str, dict[str, Any]] | None:
        pods = trainers_of(cluster, job)
        expected = {f"{job}-trainer-{i}" for i in range(count)}
        ok = pods.keys() == expected and all(
            p["status"].get("phase") == "Running" for p in pods.values()
        )
        return pods if ok else None

    return wait_until(check, timeout=90, what=f"{job} to run exactly {count} trainers")


def annotation(pod: dict[str, Any]) -> str:
    return str(pod["metadata"].get("annotations", {}).get("dlk8s.io/trainers"))


def test_elastic_jobs_grow_shrink_and_make_room(
    small: tuple[LocalCluster, OperatorProcess],
) -> None:
    cluster, operator = small
    bounds = {"grow": (2, 6), "fixed": (4, 4)}
    with Sampler(cluster, bounds) as sampler:
        # (a) a lone elastic job grows to its max: 6 trainers of 1 GPU on 8 GPUs.
        apply(cluster, NAMESPACE, elastic_job("grow", 2, 6))
        # It starts at minInstance (trainer 0's count at creation), then grows.
        trainer0 = wait_until(
            lambda: trainers_of(cluster, "grow").get("grow-trainer-0"), what="trainer 0"
        )
        uid0 = trainer0["metadata"]["uid"]
        assert env_of(trainer0)["TRAINERS"] == "2"
        grown = running_trainers(cluster, "grow", 6)
        assert sampler.fresh().get("grow") == 6, "the invariants were checked at 6 trainers"
        status = job_status(cluster, NAMESPACE, "PaddleJob", "grow")
        assert status["trainers"] == 6
        assert "Scaled from" in status["lastScaleReason"]

        # (d) trainer 0 saw the count change without a restart: same pod,
        # annotation (the downward-API file's source) now 6; TRAINERS is still
        # the count at its start.
        same = grown["grow-trainer-0"]
        assert same["metadata"]["uid"] == uid0
        wait_until(
            lambda: annotation(trainers_of(cluster, "grow")["grow-trainer-0"]) == "6",
            what="trainer 0's annotation to read 6",
        )
        assert env_of(same)["TRAINERS"] == "2"
        volume = next(v for v in same["spec"]["volumes"] if v["name"] == "dlk8s-trainers")
        item = volume["downwardAPI"]["items"][0]
        assert item["fieldRef"]["fieldPath"] == "metadata.annotations['dlk8s.io/trainers']"

        # (b) a fixed job of 4 GPUs does not fit (2 free): grow shrinks toward
        # its min, by its highest trainers, and the newcomer starts.
        apply(cluster, NAMESPACE, elastic_job("fixed", 4, 4))
        running_trainers(cluster, "fixed", 4)
        shrunk = running_trainers(cluster, "grow", 4)
        assert shrunk.keys() == {f"grow-trainer-{i}" for i in range(4)}
        assert shrunk["grow-trainer-0"]["metadata"]["uid"] == uid0
        wait_until(
            lambda: annotation(trainers_of(cluster, "grow")["grow-trainer-0"]) == "4",
            what="trainer 0's annotation to read 4",
        )
        status = job_status(cluster, NAMESPACE, "PaddleJob", "grow")
        assert status["trainers"] == 4
        assert "pending" in status["lastScaleReason"]

        # It stays there: all 8 GPUs are in use.
        def stays_at_four() -> None:
            assert sampler.fresh() == {"grow": 4, "fixed": 4}

        holds_for(5, stays_at_four, "4 trainers each")

        # Events tell every change.
        events = get_json(cluster, "events", "-n", NAMESPACE)["items"]
        scaled = [
            e["message"]
            for e in events
            if e["reason"] == "TrainersScaled" and e["involvedObject"]["name"] == "grow"
        ]
        assert any("to 6" in m for m in scaled), scaled
        assert any("from 6 to" in m or "to 4" in m for m in scaled), scaled

    # (c) and (e): over every sample (complete ones at 6 trainers and at
    # 4 + 4 among them), the invariants held and pservers were never touched.
    assert sampler.violations == []
    assert {job: len(uids) for job, uids in sampler.pserver_uids.items()} == {"grow": 1, "fixed": 1}
    # The operator logged a summary of the cluster on its passes.
    lines = [json.loads(x) for x in operator.log_path.read_text().splitlines() if x.startswith("{")]
    passes = [x for x in lines if x.get("msg") == "autoscaler pass"]
    assert passes
    assert passes[-1]["cluster"]["gpu"]["total"] == 8
    assert passes[-1]["cluster"]["nodes"] == 2


def gates_of(cluster: LocalCluster, job: str) -> dict[str, list[str]]:
    return {
        name: [g["name"] for g in pod["spec"].get("schedulingGates", [])]
        for name, pod in trainers_of(cluster, job).items()
    }


def test_a_starving_job_has_a_node_kept_and_newcomers_wait_behind_the_gate(
    small: tuple[LocalCluster, OperatorProcess],
) -> None:
    cluster, operator = small
    cluster.kubectl("delete", "paddlejobs", "--all", "-n", NAMESPACE, "--wait=true")
    wait_until(lambda: not get_json(cluster, "pods", "-n", NAMESPACE)["items"], what="no pods")
    # hog leaves one GPU free; big needs 4 on one node and cannot be placed.
    apply(cluster, NAMESPACE, elastic_job("hog", 7, 7))
    running_trainers(cluster, "hog", 7)
    apply(cluster, NAMESPACE, elastic_job("big", 1, 1, gpus=4))
    logs = operator.log_path

    def kept() -> str | None:
        lines = [x for x in logs.read_text().splitlines() if "nodes kept for elastic/big" in x]
        return lines[-1] if lines else None

    wait_until(kept, timeout=30, what="a node kept for big")
    # small's one trainer would fit the free GPU, which is on the kept node.
    apply(cluster, NAMESPACE, elastic_job("small", 1, 2))
    wait_until(lambda: gates_of(cluster, "small"), what="small's trainer")

    def gated_and_unscheduled() -> None:
        assert gates_of(cluster, "small") == {"small-trainer-0": ["dlk8s.io/admission"]}
        assert not trainers_of(cluster, "small")["small-trainer-0"]["spec"].get("nodeName")

    # Passes come every 2 s; past reserve_after (4 s) small starves too, and
    # still may not take the room kept for the older big.
    holds_for(12, gated_and_unscheduled, "small's gate")

    # Nor may its owner push it in with a count of their own: the chart's
    # policy refuses it, and without the policy the count admits nothing.
    def annotate() -> Any:
        count = "dlk8s.io/trainers=1"
        return cluster.kubectl("annotate", "paddlejob/small", "-n", NAMESPACE, count, check=False)

    refused = annotate()
    assert refused.returncode != 0, "a count set by hand was let through"
    assert "are the autoscaler's" in refused.stderr, refused.stderr
    install = operator.install
    with without_binding(cluster, f"{install.release}-{install.namespace}-autoscaler-counts"):
        # The API server drops a deleted binding a moment later.
        wait_until(lambda: annotate().returncode == 0, timeout=60, what="a count set by hand")
        holds_for(8, gated_and_unscheduled, "small's gate under a count set by hand")
    # Room freed: big starts, nothing starves, small is admitted and runs
    # (and may grow at once into what big leaves: its count is no check).
    cluster.kubectl("delete", "paddlejob", "hog", "-n", NAMESPACE, "--wait=false")
    running_trainers(cluster, "big", 1)

    def small_runs() -> bool:
        pod = trainers_of(cluster, "small").get("small-trainer-0")
        return pod is not None and pod["status"].get("phase") == "Running"

    wait_until(small_runs, timeout=90, what="small's trainer 0 to run")
    assert gates_of(cluster, "small")["small-trainer-0"] == []
    admitted = [
        x
        for x in logs.read_text().splitlines()
        if "PaddleJob/elastic/small" in x and "admitted at 1 trainers" in x
    ]
    assert len(admitted) == 1, admitted


# --- placement: a tainted node of its own ----------------------------------------------

DEDICATED = "dedicated-0"
PLACEMENT: dict[str, Any] = {
    "nodeSelector": {"pool": "dedicated"},
    "tolerations": [
        {
            "key": "dlk8s.io/dedicated",
            "operator": "Equal",
            "value": "paddle",
            "effect": "NoSchedule",
        }
    ],
    "imagePullSecrets": [{"name": "regcred"}],
}


@pytest.fixture
def dedicated(small: tuple[LocalCluster, OperatorProcess]) -> Iterator[LocalCluster]:
    """A third node, tainted and labelled for one team: 2 CPUs, no GPU."""
    cluster, _ = small
    cluster.kubectl("delete", "paddlejobs", "--all", "-n", NAMESPACE, "--wait=true")
    wait_until(lambda: not get_json(cluster, "pods", "-n", NAMESPACE)["items"], what="no pods")
    node = node_manifest(NodeSpec(DEDICATED, cpu="2", memory="16Gi", gpu=0))
    node["metadata"]["labels"]["pool"] = "dedicated"
    # Tainted from its first moment: no other pod ever lands there.
    node["spec"]["taints"] = [
        {"key": "dlk8s.io/dedicated", "value": "paddle", "effect": "NoSchedule"}
    ]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "paddlejobs", "--all", "-n", NAMESPACE, "--wait=true")
        cluster.kubectl("delete", "node", DEDICATED, "--wait=false")


def test_templates_place_every_pod_on_the_tainted_node_and_the_autoscaler_sizes_for_it(
    dedicated: LocalCluster,
) -> None:
    cluster = dedicated
    job = elastic_job("placed", 1, 4, gpus=0)
    for role in ("trainer", "pserver", "master"):
        job["spec"][role]["template"] = {"spec": copy.deepcopy(PLACEMENT)}
    apply(cluster, NAMESPACE, job)
    # The master (100m) and the pserver (500m) leave room for two trainers of
    # 500m on the 2 CPUs; the other nodes' 16 CPUs are not the job's to use,
    # so the autoscaler grows it to 2 and no further (a third would pend).
    running_trainers(cluster, "placed", 2)
    # The status says so at the operator's next pass, which may come after
    # the second trainer runs (run 31: the first look saw trainers 1).
    wait_until(
        lambda: job_status(cluster, NAMESPACE, "PaddleJob", "placed").get("trainers") == 2,
        timeout=60,
        what="the status to count 2 trainers",
    )

    def two_trainers() -> None:
        assert set(trainers_of(cluster, "placed")) == {"placed-trainer-0", "placed-trainer-1"}
        assert job_status(cluster, NAMESPACE, "PaddleJob", "placed")["trainers"] == 2

    holds_for(6, two_trainers, "2 trainers")  # three autoscaler passes
    pods = pods_of(cluster, NAMESPACE, "placed")
    assert len(pods) == 4  # master, pserver, two trainers
    assert {n: p["spec"].get("nodeName") for n, p in pods.items()} == dict.fromkeys(pods, DEDICATED)
    secrets = {n: p["spec"].get("imagePullSecrets") for n, p in pods.items()}
    assert secrets == {key: [{"name": "regcred"}] for key in pods}
