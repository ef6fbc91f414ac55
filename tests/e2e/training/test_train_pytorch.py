"""PyTorch trains for real on the real node, run by the operator.

examples/pytorchjob-ddp's program (through its overlay in examples/local/,
the local PyTorch image in place of the published one) under torchrun,
every job of the module submitted at once: the chart and the operator as a
local process watching one namespace of the real node. Then, one test per
case, each asserting on what PyTorch itself printed (the world size its
process group has, the loss DDP's averaged gradients bring down) and on the
exit codes torchrun gave:

- the example: a MASTER and two WORKERs, gloo, a world of 3; the loss falls
  and the job is Done;
- the same program with `nprocPerNode: 2` on a MASTER and a WORKER: two
  processes per pod, each calling init_process_group() with no argument,
  see a world of 4, and the job is Done;
- a MASTER whose program exits 1: torchrun exits 1, the job fails and
  nothing is recreated;
- an elastic job of two WORKERs with `maxRestarts: 3`, whose process in
  WORKER 1 SIGKILLs itself once: both torchruns restart their group and
  rendezvous again, no pod is recreated, and the job succeeds;
- a program written for Kubeflow's PyTorchJob, started with `python` (no
  torchrun) on a MASTER and 3 WORKERs, that calls
  init_process_group("gloo") from the environment the operator gives it:
  the four ranks exchange tensors around a ring and sum their ranks, and the
  job is Done;
- an elastic job of 2 to 3 WORKERs on a node that holds 3: the autoscaler
  grows it to 3, then takes one back for another job's pod; torchrun
  rendezvouses again each time, the processes print the world they see,
  and the job still ends Done.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from ..helpers import apply, get_or_none, holds_for, wait_until
from ..realjobs import (
    Lab,
    Recorder,
    finished,
    free_cpu,
    kustomized,
    local_operator,
    with_program,
)

EXAMPLE = "pytorchjob-ddp"
NPROC = "pytorchjob-nproc"
FAIL = "pytorchjob-fail"
KILL = "pytorchjob-kill"
KILL_AT = 100
PLAIN = "pytorchjob-plain"
PLAIN_PROGRAM = Path(__file__).parents[2] / "data" / "pytorch" / "plain_gloo.py"
GROW, SQUEEZE = "pytorchjob-elastic", "pytorchjob-squeeze"
STEP_LOSS = re.compile(r"^(\S+) rank (\d+)/(\d+): step (\d+) loss ([0-9.e+-]+)$", re.M)
WORLD = re.compile(r"^(\S+) rank (\d+)/(\d+): backend cpu:gloo, world size (\d+)$", re.M)


def the_job(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [job] = [d for d in docs if d["kind"] == "PyTorchJob"]
    return job


def variant(
    example: dict[str, Any], name: str, workers: int, args: list[str], **spec: Any
) -> dict[str, Any]:
    """The example's program and pod as another job: `workers` WORKERs (and
    the MASTER unless `spec` is elastic), the program's `args`, `spec` added."""
    job = copy.deepcopy(example)
    job["metadata"]["name"] = name
    entries = job["spec"]["replicaSpecs"]
    for entry in entries:
        entry["template"]["spec"]["containers"][0]["args"] = args
    [worker] = [e for e in entries if e["pytorchReplicaType"] == "WORKER"]
    worker["replicas"] = workers
    keep = [worker] if workers else []
    if "elasticPolicy" not in spec:
        keep.insert(0, entries[0])
    job["spec"]["replicaSpecs"] = keep
    job["spec"].update(spec)
    return job


def nproc_job(example: dict[str, Any]) -> dict[str, Any]:
    job = variant(example, NPROC, 1, ["--steps=100", "--log-every=50"], nprocPerNode=2)
    for entry in job["spec"]["replicaSpecs"]:
        # An agent and two processes, each with PyTorch loaded.
        entry["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "2Gi"
    return job


def kill_job(example: dict[str, Any]) -> dict[str, Any]:
    """Two WORKERs that rendezvous at WORKER 0, with torchrun's restarts;
    WORKER 1's process SIGKILLs itself once, at step KILL_AT."""
    args = [
        "--steps=300",
        "--log-every=50",
        f"--kill-at-step={KILL_AT}",
        f"--kill-on={KILL}-worker-1",
    ]
    elastic = {"minReplicas": 2, "maxReplicas": 2, "maxRestarts": 3}
    return variant(example, KILL, 2, args, elasticPolicy=elastic)


def plain_job(docs: list[dict[str, Any]], example: dict[str, Any]) -> list[dict[str, Any]]:
    """A MASTER and 3 WORKERs that start PLAIN_PROGRAM with `python`, as a
    Kubeflow PyTorchJob's pods do."""
    [code] = [d for d in docs if d["kind"] == "ConfigMap"]
    return with_program([code, variant(example, PLAIN, 3, [])], PLAIN, PLAIN_PROGRAM)


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster) -> Iterator[OperatorProcess]:
    """Named like conftest's fixture, so a failed test shows this operator's log."""
    with local_operator(real_cluster, "train-pt", ("cloud=gke",), autoscaler=True) as process:
        yield process


@pytest.fixture(scope="module")
def lab(real_cluster: LocalCluster, operator: OperatorProcess) -> Iterator[Lab]:
    """Every job of this module, submitted at once."""
    namespace = operator.env["DLK8S_NAMESPACE"]
    docs = kustomized(real_cluster, EXAMPLE)
    example = the_job(docs)
    fail = variant(example, FAIL, 0, ["--steps=300", "--fail-at-step=20"])
    recorder = Recorder(real_cluster, namespace, container="pytorch")
    try:
        # The ConfigMap with the program first: every job mounts it.
        for item in [*docs, nproc_job(example), kill_job(example), fail, *plain_job(docs, example)]:
            apply(real_cluster, namespace, item)
        yield Lab(real_cluster, namespace, recorder, operator)
    finally:
        recorder.stop()


def ended(lab: Lab, job: str, phase: str = "Done") -> dict[str, Any]:
    return finished(lab, job, phase, kind="PyTorchJob")


def losses(log: str) -> list[tuple[int, float]]:
    """(step, loss) of every `step N loss L` line, by step."""
    return sorted((int(m[3]), float(m[4])) for m in STEP_LOSS.findall(log))


def worlds(log: str) -> dict[int, int]:
    """The world size each rank's process group had, by rank."""
    return {int(rank): int(size) for _, rank, _, size in WORLD.findall(log)}


# -- the tests ------------------------------------------------------------------------


def test_a_master_and_two_workers_train_with_ddp_and_the_loss_falls(lab: Lab) -> None:
    status = ended(lab, EXAMPLE)
    assert status["state"] == "Succeeded", status
    assert status.get("restartCount", 0) == 0, status
    pods = ("master-0", "worker-0", "worker-1")
    logs = {pod: lab.recorder.log(f"{EXAMPLE}-{pod}") for pod in pods}
    seen = {rank: size for log in logs.values() for rank, size in worlds(log).items()}
    assert seen == {0: 3, 1: 3, 2: 3}, logs
    # The MASTER is rank 0 (Kubeflow's rank order).
    assert worlds(logs["master-0"]) == {0: 3}, logs["master-0"]
    steps = losses(logs["master-0"])
    assert [s for s, _ in steps] == [1, 50, 100, 150, 200, 250, 300], steps
    # Every process printed the same world-averaged loss.
    for pod in pods[1:]:
        assert [s for s, _ in losses(logs[pod])] == [s for s, _ in steps], logs[pod]
    assert steps[-1][1] < steps[0][1] / 100, steps
    done = re.search(r"rank 0/3: done after 0 restarts: largest error 0\.\d+ <= 0\.05$",
                     logs["master-0"], re.M)  # fmt: skip
    assert done, logs["master-0"]
    [master] = lab.recorder.of(f"{EXAMPLE}-master-0")
    assert master.exit_code == 0, master


def test_two_processes_in_each_of_two_pods_see_a_world_of_four(lab: Lab) -> None:
    status = ended(lab, NPROC)
    assert status["state"] == "Succeeded", status
    master = lab.recorder.log(f"{NPROC}-master-0")
    worker = lab.recorder.log(f"{NPROC}-worker-0")
    # torchrun numbers the processes node rank x 2 + local rank.
    assert worlds(master) == {0: 4, 1: 4}, master
    assert worlds(worker) == {2: 4, 3: 4}, worker
    assert len(re.findall(r"done after 0 restarts", master + worker)) == 4, (master, worker)
    for pod in ("master-0", "worker-0"):
        [record] = lab.recorder.of(f"{NPROC}-{pod}")
        assert record.exit_code == 0, record


def test_a_kubeflow_program_started_with_python_meets_its_world_from_the_environment(
    lab: Lab,
) -> None:
    status = ended(lab, PLAIN)
    assert (status["state"], status.get("restartCount", 0)) == ("Succeeded", 0), status
    pods = ["master-0", *(f"worker-{i}" for i in range(3))]
    for rank, pod in enumerate(pods):
        [record] = lab.recorder.of(f"{PLAIN}-{pod}")
        log = "\n".join(record.log)
        # The MASTER is rank 0 and the WORKERs follow in order (Kubeflow's ranks).
        said = (
            f"rank {rank}/4: received {(rank - 1) % 4} from the previous rank,"
            " all_reduce of the ranks 6"
        )
        assert said in log, log
        assert record.exit_code == 0, record


def test_exit_1_fails_the_job_and_recreates_nothing(lab: Lab) -> None:
    status = ended(lab, FAIL, "Failed")
    assert (status["state"], status.get("restartCount", 0)) == ("Failed", 0), status
    master = f"{FAIL}-master-0"
    [record] = lab.recorder.of(master)
    assert record.exit_code == 1, record
    assert "step 20: failing as asked" in "\n".join(record.log), record

    def kept_as_it_ended() -> None:
        assert [r.uid for r in lab.recorder.of(master)] == [record.uid]
        pod = get_or_none(lab.cluster, "pod", master, "-n", lab.namespace)
        assert pod is not None
        assert pod["metadata"]["uid"] == record.uid

    holds_for(3, kept_as_it_ended, "the failed MASTER's pod")


def test_a_worker_killed_by_sigkill_comes_back_within_max_restarts(lab: Lab) -> None:
    status = ended(lab, KILL)
    # torchrun brought it back: no pod was recreated.
    assert (status["state"], status.get("restartCount", 0)) == ("Succeeded", 0), status
    logs = {}
    for pod in ("worker-0", "worker-1"):
        [record] = lab.recorder.of(f"{KILL}-{pod}")
        assert record.exit_code == 0, record
        logs[pod] = "\n".join(record.log)
    killed = logs["worker-1"]
    assert f"step {KILL_AT}: killing myself with SIGKILL" in killed, killed
    # torchrun's own words for a process it lost to signal 9.
    assert re.search(r"failed \(exitcode: -9\) local_rank: 0", killed), killed
    for pod, log in logs.items():
        # Each agent restarted its group and the two rendezvoused again (as
        # often as the agents' timing took, within maxRestarts: 3): groups of
        # 2, the last one finished.
        sizes = [size for *_, size in WORLD.findall(log)]
        assert len(sizes) >= 2, (pod, log)
        assert set(sizes) == {"2"}, (pod, log)
        done = r"done after [123] restarts: largest error 0\.\d+ <= 0\.05$"
        assert re.search(done, log, re.M), log


def sized(job: dict[str, Any], cpu: int) -> dict[str, Any]:
    """Every pod of `job` asking for `cpu` millicores."""
    for entry in job["spec"]["replicaSpecs"]:
        entry["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu}m"
    return job


def worker_count(lab: Lab, job: str) -> int | None:
    found = get_or_none(lab.cluster, "pytorchjob", job, "-n", lab.namespace) or {}
    value = found.get("status", {}).get("workers")
    return value if isinstance(value, int) else None


def test_the_autoscaler_grows_an_elastic_job_and_takes_a_worker_back(lab: Lab) -> None:
    cluster, ns = lab.cluster, lab.namespace
    example = the_job(kustomized(cluster, EXAMPLE))
    # A WORKER's size: three fit in what the node has free, four do not.
    room = wait_until(
        lambda: (f := free_cpu(cluster)) >= 900 and f, timeout=120, what="room on the real node"
    )
    cpu = room * 10 // 32
    # examples/pytorchjob-elastic, from 2 WORKERs rather than 1.
    grow = the_job(kustomized(cluster, GROW))
    grow["spec"]["elasticPolicy"]["minReplicas"] = 2
    apply(cluster, ns, sized(grow, cpu))
    wait_until(lambda: worker_count(lab, GROW) == 3, timeout=120, what=f"{GROW} grown to 3")
    third = f"{GROW}-worker-2"
    wait_until(
        lambda: re.search(r"world size 3$", lab.recorder.log(third), re.M),
        timeout=120,
        what=f"{third} in a world of 3",
    )
    # A pod that only fits in a WORKER's room: the autoscaler takes one back.
    squeeze = variant(example, SQUEEZE, 0, ["--steps=900", "--log-every=100", "--pace=0.1"])
    apply(cluster, ns, sized(squeeze, cpu))
    wait_until(lambda: worker_count(lab, GROW) == 2, timeout=120, what=f"{GROW} back at 2")
    status = ended(lab, GROW)
    assert status["state"] == "Succeeded", status
    kept = lab.recorder.log(f"{GROW}-worker-0")
    sizes = [size for *_, size in WORLD.findall(kept)]
    # Grown to 3 (or started there, if the autoscaler was quicker than the
    # first rendezvous), later back to 2: a group of each, the last one done.
    assert "3" in sizes, kept
    assert "2" in sizes[sizes.index("3") :], kept
    assert re.search(r"done after \d+ restarts: largest error 0\.\d+ <= 0\.05$", kept, re.M), kept
    events = cluster.kubectl(
        "get", "events", "-n", ns, "--field-selector",
        f"involvedObject.name={GROW},reason=WorkersScaled", "-o", "json",
    )  # fmt: skip
    said = [e["message"] for e in json.loads(events.stdout)["items"]]
    assert any(m.startswith("Scaling workers from 2 to 3") for m in said), said
    assert any(m.startswith("Scaling workers from 3 to 2") for m in said), said
    assert ended(lab, SQUEEZE)["state"] == "Succeeded"
