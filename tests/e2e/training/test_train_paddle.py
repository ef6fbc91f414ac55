"""PaddlePaddle trains for real on the real node, run by the operator.

examples/paddlejob-elastic and examples/paddlejob-ps (through their
overlays in examples/local/, the local Paddle image in place of the
published one), with the chart and the operator as a local process watching
one namespace of the real node, its autoscaler on. Every assertion is on what
Paddle itself printed (the world size its launcher formed, the epoch the
group resumed from, the loss) and on how the pods ended:

- the elastic example starts at its minimum of 2 trainers (a pod of another
  owner takes the third one's room), grows to 3 when that pod goes, gives
  one back for another such pod, and loses a trainer pod to an eviction
  after its passes were lowered: Paddle re-forms the group each time (world
  sizes 2, 3, 2), every start resumes from the newest checkpoint a trainer
  holds, the group ends at the lowered passes, the loss falls, no restart is
  counted, and the job is Done;
- a Paddle program that raises fails the job, its status naming the trainer;
- the parameter-server example trains to Done on 2 pservers and 2 trainers.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from ..helpers import apply, evict, get_or_none, wait_until
from ..realjobs import Lab, Recorder, finished, free_cpu, kustomized, local_operator

ELASTIC, SQUEEZE, BLOCKER = "paddlejob-elastic", "paddle-squeeze", "paddle-blocker"
FAIL = "paddlejob-raises"
PS = "paddlejob-ps"
RUNTIME = "localhost/dlk8s/runtime:local"
WORLD = re.compile(r"^trainer (\d+): world size (\d+), from epoch (\d+) \(trainer \d+'s\)$", re.M)
EPOCH = re.compile(r"^epoch (\d+): world size (\d+), loss ([0-9.]+)$", re.M)
TRAINED = re.compile(r"^trainer \d+: trained: largest weight error ([0-9.]+), tolerance", re.M)
# Epochs of the elastic job, and the seconds of each (train.py reads both):
# more than its changes take on a slow machine, since the test ends it
# sooner (LAST_EPOCHS after the group's newest when a trainer is evicted).
EPOCHS, EPOCH_SECONDS, LAST_EPOCHS = 600, "0.5", 20


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster) -> Iterator[OperatorProcess]:
    """Named like conftest's fixture, so a failed test shows this operator's log."""
    sets = ("cloud=gke", f"config.images.etcd={RUNTIME}")  # the master's etcd
    with local_operator(real_cluster, "train-paddle", sets, autoscaler=True) as process:
        yield process


@pytest.fixture(scope="module")
def lab(real_cluster: LocalCluster, operator: OperatorProcess) -> Iterator[Lab]:
    namespace = operator.env["DLK8S_NAMESPACE"]
    recorder = Recorder(real_cluster, namespace, container="paddle")
    try:
        yield Lab(real_cluster, namespace, recorder, operator)
    finally:
        recorder.stop()


def the_job(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [job] = [d for d in docs if d["kind"] == "PaddleJob"]
    return job


def trainers_run(lab: Lab, job: str) -> int | None:
    found = get_or_none(lab.cluster, "paddlejob", job, "-n", lab.namespace) or {}
    value = found.get("status", {}).get("trainers")
    return value if isinstance(value, int) else None


def holder(name: str, cpu: int) -> dict[str, Any]:
    """A pod of no job's that asks for `cpu` millicores of the real node."""
    container = {
        "name": "hold",
        "image": RUNTIME,
        "command": ["sleep", "infinity"],
        "resources": {"requests": {"cpu": f"{cpu}m", "memory": "16Mi"}},
    }
    spec = {"containers": [container], "terminationGracePeriodSeconds": 1}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def said(lab: Lab, job: str) -> str:
    """What the job's status and its pods say, for an assertion's message."""
    found = get_or_none(lab.cluster, "paddlejob", job, "-n", lab.namespace) or {}
    pods = lab.cluster.kubectl("get", "pods", "-n", lab.namespace, "-o", "wide").stdout
    status = json.dumps(found.get("status"), indent=1)
    return f"{status}\n{pods}\n{lab.recorder.dump(job)}"


def at_count(lab: Lab, job: str, count: int) -> None:
    try:
        wait_until(lambda: trainers_run(lab, job) == count, timeout=120, what=f"{job} at {count}")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{said(lab, job)}") from None


# When the program fails, Paddle's launcher prints its log again (under a
# header "ERROR LOG DETAIL" that its buffering may print after the log, and
# with no line of its own after it when it starts the program again). Every
# line the program prints is its own (a world's size and the epoch it
# resumed from, an epoch's loss), so a pod's lines are read once each. One
# pod at a time: a pod replaced under the same name says it all again. (A
# regex from the header to the launcher's "Exit code" line, read across an
# evicted pod's log and its replacement's, took a world of 3 with it in CI.)


def program_log(lab: Lab, pod: str) -> str:
    """What the program in `pod` (each pod of that name) printed, each line once."""
    return "\n".join("\n".join(dict.fromkeys(r.log)) for r in lab.recorder.of(pod))


def worlds(lab: Lab, pod: str) -> list[tuple[int, int]]:
    """(world size, epoch resumed from) at each start of the program in `pod`."""
    return [(int(size), int(epoch)) for _, size, epoch in WORLD.findall(program_log(lab, pod))]


def printed_world(lab: Lab, pod: str, size: int, after: int) -> None:
    try:
        wait_until(
            lambda: [w for w, _ in worlds(lab, pod)][after:].count(size) > 0,
            timeout=180,
            what=f"{pod}'s program in a world of {size}",
        )
    except AssertionError as err:
        raise AssertionError(f"{err}\n{said(lab, ELASTIC)}") from None


def job_log(lab: Lab, job: str) -> str:
    return "\n".join(program_log(lab, f"{job}-trainer-{i}") for i in range(3))


def test_an_elastic_paddle_job_trains_through_growth_shrinking_and_a_lost_trainer(
    lab: Lab,
) -> None:
    cluster, ns = lab.cluster, lab.namespace
    room = wait_until(
        lambda: (f := free_cpu(cluster)) >= 900 and f, timeout=120, what="room on the real node"
    )
    # A trainer's size: the master (50m) and three fit, four do not; with a
    # holder of a trainer's size, two.
    cpu = (room - 60) * 10 // 32
    docs = kustomized(cluster, ELASTIC)
    job = the_job(docs)
    trainer = job["spec"]["trainer"]
    trainer["passes"] = EPOCHS
    trainer["resources"]["requests"]["cpu"] = f"{cpu}m"
    [main] = trainer["template"]["spec"]["containers"]
    main["env"] = [{"name": "EPOCH_SECONDS", "value": EPOCH_SECONDS}]
    apply(cluster, ns, holder(BLOCKER, cpu))
    wait_until(lambda: free_cpu(cluster) <= room - cpu, timeout=60, what="the blocker bound")
    for item in docs:
        apply(cluster, ns, item)
    first = f"{ELASTIC}-trainer-0"
    printed_world(lab, first, 2, after=0)
    # The blocker goes: the autoscaler grows the job, Paddle re-forms at 3.
    cluster.kubectl("delete", "pod", BLOCKER, "-n", ns, "--wait=false")
    at_count(lab, ELASTIC, 3)
    printed_world(lab, first, 3, after=1)
    # A pod that only fits in a trainer's room: the autoscaler takes one back.
    apply(cluster, ns, holder(SQUEEZE, cpu))
    at_count(lab, ELASTIC, 2)
    shrunk = len(worlds(lab, first))
    printed_world(lab, first, 2, after=shrunk - 1)
    # Fewer passes, which only the trainer created next carries: the group
    # re-formed with it ends there, not after the EPOCHS it started with.
    passes = max(int(n) for n, _, _ in EPOCH.findall(job_log(lab, ELASTIC))) + LAST_EPOCHS
    patch = json.dumps({"spec": {"trainer": {"passes": passes}}})
    cluster.kubectl("patch", "paddlejob", ELASTIC, "-n", ns, "--type=merge", "-p", patch)
    # A trainer evicted mid-training (a disruption, as `kubectl drain` makes
    # one): recreated without counting a restart, and the group re-forms.
    evict(cluster, ns, first)
    wait_until(
        lambda: len(lab.recorder.of(first)) == 2 and worlds(lab, first)[shrunk:],
        timeout=180,
        what=f"the new {first} in a group",
    )
    status = finished(lab, ELASTIC, "Done", kind="PaddleJob")
    assert status["state"] == "Succeeded", status
    # Short enough to survive pytest's truncation, with what traces a count.
    counted = {k: status.get(k) for k in ("restartCount", "uncountedRestarts", "lastScaleReason")}
    events = cluster.kubectl("get", "events", "-n", ns, "--sort-by=.lastTimestamp").stdout
    assert not status.get("restartCount"), f"{counted}\n{events[-6000:]}"
    [disrupted] = status["uncountedRestarts"]
    assert (disrupted["pod"], disrupted["replicaType"]) == (first, "TRAINER"), status
    log = job_log(lab, ELASTIC)
    sizes = [w for w, _ in worlds(lab, first)]
    assert sizes[:1] == [2], log
    assert 3 in sizes, log
    assert 2 in sizes[sizes.index(3) :], log
    # Each re-formation resumed where the group was; the new trainer 0, with
    # no checkpoint of its own, from another trainer's.
    resumed = [epoch for _, epoch in worlds(lab, first)[1:]]
    assert resumed, log
    assert all(epoch > 0 for epoch in resumed), log
    # By epoch: rank 0, which prints them, moves between pods.
    epochs = sorted(EPOCH.findall(log), key=lambda e: int(e[0]))
    assert int(epochs[-1][0]) == passes, log
    losses = [float(loss) for _, _, loss in epochs]
    assert losses, log
    assert losses[-1] < losses[0] / 100, log
    errors = [float(e) for e in TRAINED.findall(log)]
    assert len(errors) == 2, log
    assert max(errors) <= 0.05, log
    # The two trainers left (trainer 0's second pod among them) exited 0.
    ended = [lab.recorder.of(f"{ELASTIC}-trainer-{i}")[-1].exit_code for i in range(2)]
    assert ended == [0, 0], log


def test_a_paddle_program_that_raises_fails_the_job_naming_the_trainer(lab: Lab) -> None:
    job = copy.deepcopy(the_job(kustomized(lab.cluster, ELASTIC)))
    job["metadata"]["name"] = FAIL
    job["spec"]["runPolicy"] = {"backoffLimit": 0}
    trainer = job["spec"]["trainer"]
    trainer |= {"minInstance": 1, "maxInstance": 1}
    # No program to mount, no workspace: the program is the entrypoint.
    del trainer["template"], trainer["workspace"]
    trainer["entrypoint"] = (
        "python -c 'import paddle.distributed as dist; dist.init_parallel_env();"
        ' raise RuntimeError("a bad batch")\''
    )
    apply(lab.cluster, lab.namespace, job)
    status = finished(lab, FAIL, "Failed", kind="PaddleJob")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["message"].startswith(f"TRAINER 0 (pod {FAIL}-trainer-0) failed"), status
    assert "exited with code 1" in failed["message"], status
    assert "RuntimeError: a bad batch" in lab.recorder.log(f"{FAIL}-trainer-0")


def test_the_parameter_server_example_trains_on_two_pservers(lab: Lab) -> None:
    for item in kustomized(lab.cluster, PS):
        apply(lab.cluster, lab.namespace, item)
    status = finished(lab, PS, "Done", kind="PaddleJob")
    assert status["state"] == "Succeeded", status
    for i in range(2):
        log = lab.recorder.log(f"{PS}-trainer-{i}")
        assert re.search(rf"^trainer {i} of 2, pservers 2$", log, re.M), log
        fell = re.search(rf"^trainer {i}: trained: loss ([0-9.]+) -> ([0-9.]+)$", log, re.M)
        assert fell, log
        assert float(fell[2]) < float(fell[1]) / 10, log
    for i in range(2):
        log = lab.recorder.log(f"{PS}-pserver-{i}")
        assert f"pserver {i} of 2 serving" in log, log
