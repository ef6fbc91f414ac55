"""One autoscaler for both elastic kinds: PaddleJobs and elastic PyTorchJobs
read from API objects (autoscaler.manifests) and planned together by the
same rules: admission before growth, the most fulfilled shrinks first
whatever its kind, never below a minimum or above a maximum, no node
overcommitted; and each kind's count written to its own annotations."""

from __future__ import annotations

import copy
import random
from typing import Any

from dlk8s.autoscaler.cluster import ElasticJob, Node, Placement, Pod
from dlk8s.autoscaler.loop import AutoscalerLoop
from dlk8s.autoscaler.manifests import job_from_manifest, node_from_manifest, pod_from_manifest
from dlk8s.autoscaler.plan import Change, Plan, plan
from dlk8s.job.computeresources import Resources
from dlk8s.runtime.client import Kube

from ..support.elastic import GI, targets
from ..support.malformed import MANIFEST_JUNK, random_mutation

T0 = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T01:00:00Z"


def raw_node(name: str, gpu: int = 4) -> dict[str, Any]:
    allocatable = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(gpu)}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def container(name: str, gpu: int, cpu: str = "1") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpu)} if gpu else {}
    return {
        "name": name,
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits},
    }


def raw_pod(
    uid: str, job: str, role: str, index: int, node: str, gpu: int, created: str = T0
) -> dict[str, Any]:
    """A pod of a job as the operator makes it (labels, controller reference)."""
    spec: dict[str, Any] = {"containers": [container("main", gpu)]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": f"{job}-{role}-{index}",
            "namespace": "ns",
            "creationTimestamp": created,
            "labels": {"dlk8s.io/replica-type": role, "dlk8s.io/replica-index": str(index)},
            "ownerReferences": [{"uid": uid, "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _meta(name: str, uid: str, count: int | None, noun: str, created: str) -> dict[str, Any]:
    annotations = {} if count is None else {f"dlk8s.io/{noun}": str(count)}
    return {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "creationTimestamp": created,
        "annotations": annotations,
    }


def _status(running: bool) -> dict[str, Any]:
    return {"state": "Running", "phase": "Running" if running else "Creating"}


def paddlejob(
    uid: str, low: int, high: int, count: int | None, gpu: int, running: bool = True,
    created: str = T0,
) -> dict[str, Any]:  # fmt: skip
    return {
        "kind": "PaddleJob",
        "metadata": _meta(uid, uid, count, "trainers", created),
        "spec": {
            "faultTolerant": True,
            "trainer": {
                "minInstance": low,
                "maxInstance": high,
                "resources": container("paddle", gpu)["resources"],
            },
        },
        "status": _status(running),
    }


def pytorchjob(
    uid: str, low: int, high: int, count: int | None, gpu: int, running: bool = True,
    created: str = T0, replicas: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Elastic, with a CPU MASTER; the WORKER entry asks for `replicas` (low if None)."""
    worker = {"spec": {"containers": [container("pytorch", gpu)]}}
    master = {"spec": {"containers": [container("pytorch", 0)]}}
    return {
        "kind": "PyTorchJob",
        "metadata": _meta(uid, uid, count, "workers", created),
        "spec": {
            "elasticPolicy": {"minReplicas": low, "maxReplicas": high},
            "replicaSpecs": [
                {"pytorchReplicaType": "MASTER", "replicas": 1, "template": master},
                {"pytorchReplicaType": "WORKER", "replicas": replicas or low, "template": worker},
            ],
        },
        "status": _status(running),
    }


def read(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], jobs: list[dict[str, Any]]
) -> tuple[list[Node], list[Pod], list[ElasticJob]]:
    """The cluster as the loop hands it to the plan."""
    return (
        [n for n in map(node_from_manifest, nodes) if n is not None],
        [p for p in map(pod_from_manifest, pods) if p is not None],
        [j for j in map(job_from_manifest, jobs) if j is not None],
    )


def planned(*cluster: list[dict[str, Any]]) -> Plan:
    return plan(*read(*cluster))


# --- reading a PyTorchJob --------------------------------------------------------------


def test_an_elastic_pytorchjob_is_read_as_a_job_of_workers() -> None:
    raw = pytorchjob("t", 1, 4, None, gpu=2, replicas=3)
    sidecar = container("logs", 0, cpu="250m")
    worker_template = raw["spec"]["replicaSpecs"][1]["template"]["spec"]
    worker_template["containers"].append(sidecar)
    worker_template["nodeSelector"] = {"pool": "gpu"}
    raw["spec"]["replicaSpecs"][0]["template"]["spec"]["nodeSelector"] = {"pool": "cpu"}
    found = job_from_manifest(raw)
    assert found is not None
    assert (found.kind, found.role, found.min, found.max) == ("PyTorchJob", "worker", 1, 4)
    # No annotation: the WORKER entry's replicas, and not admitted yet.
    assert (found.trainers, found.admitted) == (3, False)
    # The WORKER's template, not the MASTER's, sizes and places a worker.
    assert found.trainer == Resources(1250, 2 * GI, 2)
    assert found.placement == Placement({"pool": "gpu"})
    raw["metadata"]["annotations"]["dlk8s.io/workers"] = "9"
    asked = job_from_manifest(raw)
    assert asked is not None
    assert (asked.trainers, asked.admitted) == (4, True)
    paddle = job_from_manifest(paddlejob("p", 1, 4, 2, gpu=1))
    assert paddle is not None
    assert (paddle.kind, paddle.role, paddle.trainers) == ("PaddleJob", "trainer", 2)


def test_only_active_pytorchjobs_that_can_move_are_scaled() -> None:
    def variant(**changes: Any) -> dict[str, Any]:
        raw = pytorchjob("t", 1, 4, 2, gpu=1)
        for path, value in changes.items():
            *parents, leaf = path.split("__")
            target = raw
            for key in parents:
                target = target.setdefault(key, {})
            target[leaf] = value
        return raw

    assert job_from_manifest(variant()) is not None
    static = variant()
    del static["spec"]["elasticPolicy"]
    assert job_from_manifest(static) is None
    fixed = {"minReplicas": 2, "maxReplicas": 2}
    assert job_from_manifest(variant(spec__elasticPolicy=fixed)) is None
    assert job_from_manifest(variant(spec__runPolicy={"suspend": True})) is None
    assert job_from_manifest(variant(status__state="Succeeded")) is None
    assert job_from_manifest(variant(metadata__deletionTimestamp=T0)) is None
    # A WORKER that exited 0: torchrun's group has finished, the job is ending.
    ending = [{"replicaType": "WORKER", "replicasStates": {"Running": 1, "Succeeded": 1}}]
    assert job_from_manifest(variant(status__replicaStatuses=ending)) is None
    master_done = [{"replicaType": "MASTER", "replicasStates": {"Succeeded": 1}}]
    assert job_from_manifest(variant(status__replicaStatuses=master_done)) is not None


def test_malformed_pytorchjobs_never_raise() -> None:
    rng = random.Random(5)
    base = pytorchjob("t", 1, 4, 2, gpu=1)
    for _ in range(2000):
        junk = random_mutation(base, rng)
        elastic = job_from_manifest(junk)
        if elastic is not None:
            assert 1 <= elastic.min <= elastic.trainers <= elastic.max
            assert elastic.min < elastic.max
            assert elastic.role == "worker"
    for junk in MANIFEST_JUNK:
        assert job_from_manifest({"kind": "PyTorchJob", "spec": junk}) is None


# --- planned together ------------------------------------------------------------------


def test_a_pytorchjob_is_admitted_by_shrinking_a_paddlejob() -> None:
    # One 4-GPU node, full with p's four trainers. t arrives (its MASTER and
    # two 1-GPU WORKERs pending): p gives back two, nothing grows.
    p = paddlejob("p", 1, 4, 4, gpu=1)
    pods = [raw_pod("p", "p", "trainer", i, "n0", 1) for i in range(4)]
    pods += [raw_pod("t", "t", "master", 0, "", 0, LATER)]
    pods += [raw_pod("t", "t", "worker", i, "", 1, LATER) for i in range(2)]
    t = pytorchjob("t", 2, 4, 2, gpu=1, running=False, created=LATER)
    result = planned([raw_node("n0")], pods, [p, t])
    assert targets(result) == {"p": 2}
    [change] = result.changes
    assert change.kind == "PaddleJob"
    assert change.reason == "making room for the pending pods of ns/t"
    assert result.unplaceable == ()


def test_the_most_fulfilled_gives_back_first_whatever_its_kind() -> None:
    # p (Paddle) is at 3 of 1..5, half fulfilled; t (PyTorch) at 3 of 1..3,
    # full. A newcomer PaddleJob needs one GPU: t gives it, not p.
    p = paddlejob("p", 1, 5, 3, gpu=1)
    t = pytorchjob("t", 1, 3, 3, gpu=1)
    pods = [raw_pod("p", "p", "trainer", i, "n0", 1) for i in range(3)]
    pods += [raw_pod("t", "t", "master", 0, "n1", 0)]
    pods += [raw_pod("t", "t", "worker", i, n, 1) for i, n in enumerate(("n0", "n1", "n1"))]
    pods += [raw_pod("x", "other", "x", 0, "n1", 2)]  # a pod of nobody we scale
    new = paddlejob("new", 1, 2, None, gpu=1, running=False, created=LATER)
    result = planned([raw_node("n0"), raw_node("n1")], pods, [p, t, new])
    assert targets(result) == {"t": 2, "new": 1}
    by_uid = {c.uid: c for c in result.changes}
    assert by_uid["t"].kind == "PyTorchJob"
    # The newcomer had no count: it is admitted at its minimum, in its words.
    assert by_uid["new"].reason.startswith("admitted at 1 trainers")
    # And the other way round: a PyTorchJob newcomer is admitted in workers.
    late = pytorchjob("late", 1, 2, None, gpu=1, running=False, created=LATER)
    result = planned([raw_node("n0"), raw_node("n1")], pods, [p, t, late])
    assert {c.uid: c.new for c in result.changes} == {"t": 2, "late": 1}
    assert [c.reason.split(" (")[0] for c in result.changes if c.uid == "late"] == [
        "admitted at 1 workers"
    ]


def test_growth_waits_for_admission_then_fills_both_kinds_least_fulfilled_first() -> None:
    p = paddlejob("p", 1, 4, 1, gpu=1)
    t = pytorchjob("t", 1, 4, 1, gpu=1, created=LATER)
    pods = [raw_pod("p", "p", "trainer", 0, "n0", 1), raw_pod("t", "t", "master", 0, "n0", 0)]
    pods += [raw_pod("t", "t", "worker", 0, "n0", 1)]
    waiting = raw_pod("w", "w", "worker", 0, "", 2)  # an admitted job's pod, not bound yet
    # While a pod given room waits for kube-scheduler, neither kind grows.
    assert planned([raw_node("n0", gpu=8)], [*pods, waiting], [p, t]).changes == ()
    # Then both grow, alternately (the least fulfilled first), into 6 GPUs.
    result = planned([raw_node("n0", gpu=8)], pods, [p, t])
    assert targets(result) == {"p": 4, "t": 4}
    assert {c.uid: c.kind for c in result.changes} == {"p": "PaddleJob", "t": "PyTorchJob"}
    result = planned([raw_node("n0", gpu=4)], pods, [p, t])
    assert targets(result) == {"p": 2, "t": 2}


def test_random_mixed_clusters_keep_every_invariant() -> None:
    rng = random.Random(11)
    for _ in range(200):
        nodes = [raw_node(f"n{i}", gpu=rng.choice([2, 4, 8])) for i in range(rng.randint(1, 4))]
        room = {
            n["metadata"]["name"]: int(n["status"]["allocatable"]["nvidia.com/gpu"]) for n in nodes
        }
        jobs, pods = [], []
        for j in range(rng.randint(1, 6)):
            torch = j % 2 == 1
            uid, role = (f"t{j}", "worker") if torch else (f"p{j}", "trainer")
            low = rng.randint(1, 3)
            high = low + rng.randint(1, 4)
            gpu = rng.choice([0, 1, 2])
            count = rng.randint(low, high)
            running = rng.random() < 0.8
            build = pytorchjob if torch else paddlejob
            jobs.append(build(uid, low, high, count, gpu, running))
            if torch:
                pods.append(raw_pod(uid, uid, "master", 0, rng.choice([*room, ""]), 0))
            for i in range(count if running else rng.randint(0, count)):
                fits = [n for n, free in room.items() if free >= gpu]
                where = rng.choice(fits) if fits and rng.random() < 0.85 else ""
                if where:
                    room[where] -= gpu
                pods.append(raw_pod(uid, uid, role, i, where, gpu))
        for k in range(rng.randint(0, 2)):
            pods.append(raw_pod(f"x{k}", f"x{k}", "x", 0, "", rng.randint(0, 4)))
        _check(planned(nodes, pods, jobs), jobs)


def _check(result: Plan, jobs: list[dict[str, Any]]) -> None:
    read_jobs = {j.uid: j for j in (job_from_manifest(raw) for raw in jobs) if j is not None}
    for change in result.changes:
        job = read_jobs[change.uid]
        assert job.min <= change.new <= job.max, change
        assert change.kind == job.kind
        assert ("trainer" in change.reason) <= (job.kind == "PaddleJob"), change
    for name, free in result.free_after.items():
        assert min(free.cpu, free.memory, free.gpu) >= 0, (name, free)


# --- the loop writes each kind's annotations ------------------------------------------------


class Recording(Kube):
    """Our client wrapper, answering patches from a list instead of the API."""

    def __init__(self) -> None:
        super().__init__(api_client=None)  # type: ignore[arg-type]
        self.patches: list[tuple[str, str, str | None, str, dict[str, Any]]] = []

    def patch(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        self.patches.append((api_version, kind, namespace, name, copy.deepcopy(patch)))
        return {"metadata": {"uid": patch["metadata"]["uid"], "resourceVersion": "2"}}


def test_the_loop_writes_each_kinds_count_to_its_own_annotations() -> None:
    kube = Recording()
    loop = AutoscalerLoop(kube, jobs=lambda: [])
    assert loop._apply(Change("u1", "ns/t", 2, 3, "room on the nodes", "PyTorchJob"))
    assert loop._apply(Change("u2", "ns/p", 4, 2, "making room", "PaddleJob"))
    assert kube.patches == [
        (
            "dlk8s.io/v1alpha1",
            "PyTorchJob",
            "ns",
            "t",
            {
                "metadata": {
                    "uid": "u1",
                    "annotations": {
                        "dlk8s.io/workers": "3",
                        "dlk8s.io/workers-reason": "3: room on the nodes",
                    },
                }
            },
        ),
        (
            "dlk8s.io/v1alpha1",
            "PaddleJob",
            "ns",
            "p",
            {
                "metadata": {
                    "uid": "u2",
                    "annotations": {
                        "dlk8s.io/trainers": "2",
                        "dlk8s.io/trainers-reason": "2: making room",
                    },
                }
            },
        ),
    ]
