"""TensorFlow trains for real on the real node, run by the operator.

One module-wide setup submits every job at once, so that they run side by
side (the node has two cores; TensorFlow's start-up dominates): the chart
(with config.tfImage the local runtime image, for the PS's gRPC server and
TensorBoard) and the operator as a local process watching one namespace of
the real node. Then, one test per case, each asserting on what TensorFlow
reports (its log lines, exit codes, TensorBoard's HTTP answers):

- examples/tfjob-train: a MASTER and two WORKERs train between-graph, their
  variables on a PS that runs the chart's gRPC server; the loss falls, the
  MASTER exits 0, the job is Done and cleanPodPolicy Running stops the rest;
- the same program with a MASTER that SIGKILLs itself once (exit 137): it is
  recreated, resumes from the step the PS kept, and the job succeeds;
- examples/tfjob-multiworker: MultiWorkerMirroredStrategy, which accepts the
  MASTER only as `chief` (spec.tfConfig.masterTaskType); without it the
  same program exits 1 with TensorFlow's refusal, the job fails and nothing
  is recreated;
- that job's TensorBoard serves the loss the chief wrote, over its Service,
  to another pod.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from ..helpers import get_json, get_or_none, holds_for, wait_until
from ..realjobs import (
    Lab,
    Recorder,
    finished,
    kustomized,
    local_operator,
    replica,
    the_job,
    without,
)

RUNTIME = "localhost/dlk8s/runtime:local"
TRAIN = "tfjob-train"
RESTART = "tfjob-restart"
MULTI = "tfjob-multiworker"
AS_MASTER = "tfjob-as-master"
KILL_AT = 200
STEP_LOSS = re.compile(r"^(\S+): step (\d+) loss ([0-9.e+-]+)$", re.M)


# -- the jobs -----------------------------------------------------------------------


def restart_job(train: dict[str, Any]) -> dict[str, Any]:
    """examples/tfjob-train's program, MASTER and PS, the MASTER killing
    itself once at step KILL_AT (shareProcessNamespace: a container's PID 1
    cannot be killed from inside, even by itself)."""
    job = copy.deepcopy(train)
    job["metadata"]["name"] = RESTART
    without(job, "WORKER")
    spec = replica(job, "MASTER")["template"]["spec"]
    spec["shareProcessNamespace"] = True
    spec["containers"][0]["args"] = ["--steps=600", "--log-every=100", f"--kill-at-step={KILL_AT}"]
    return job


def as_master_job(multi: dict[str, Any]) -> dict[str, Any]:
    """examples/tfjob-multiworker's program with the default TF_CONFIG: the
    MASTER is `master`, as the seeds' programs expect."""
    job = copy.deepcopy(multi)
    job["metadata"]["name"] = AS_MASTER
    del job["spec"]["tfConfig"], job["spec"]["tensorboard"]
    without(job, "WORKER")
    return job


def share_logs_in(job: dict[str, Any], directory: Path) -> None:
    """The example's hostPath (the node's /tmp) moved to a folder of this run,
    which goes with the node."""
    pods = [r["template"]["spec"] for r in job["spec"]["replicaSpecs"] if "template" in r]
    volumes = [v for pod in pods for v in pod.get("volumes", [])]
    volumes += job["spec"].get("tensorboard", {}).get("volumes", [])
    for volume in volumes:
        if "hostPath" in volume:
            volume["hostPath"]["path"] = str(directory)


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster) -> Iterator[OperatorProcess]:
    """Named like conftest's fixture, so a failed test shows this operator's log."""
    sets = ("cloud=gke", f"config.tfImage={RUNTIME}")
    with local_operator(real_cluster, "train-tf", sets) as process:
        yield process


@pytest.fixture(scope="module")
def lab(real_cluster: LocalCluster, operator: OperatorProcess) -> Iterator[Lab]:
    """Every job of this module, submitted at once."""
    node = real_cluster.node
    assert node is not None
    namespace = operator.env["DLK8S_NAMESPACE"]
    logs = node.root / namespace
    logs.mkdir()
    logs.chmod(0o1777)  # as /tmp is: the chief writes there as nobody
    recorder = Recorder(real_cluster, namespace)
    try:
        train_docs = kustomized(real_cluster, TRAIN)
        multi_docs = kustomized(real_cluster, MULTI)
        share_logs_in(the_job(multi_docs), logs)
        jobs = [restart_job(the_job(train_docs)), as_master_job(the_job(multi_docs))]
        items = train_docs + multi_docs + jobs
        real_cluster.kubectl(
            "apply", "-n", namespace, "-f", "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )  # fmt: skip
        yield Lab(real_cluster, namespace, recorder, operator)
    finally:
        recorder.stop()
        shutil.rmtree(logs, ignore_errors=True)


def pods_left(lab: Lab, job: str) -> dict[str, dict[str, Any]]:
    items = get_json(lab.cluster, "pods", "-n", lab.namespace, "-l", f"dlk8s.io/job-name={job}")[
        "items"
    ]
    return {p["metadata"]["name"]: p for p in items}


def exit_code(pod: dict[str, Any]) -> int | None:
    for state in pod["status"].get("containerStatuses") or []:
        if state["name"] == "tensorflow":
            return (state["state"].get("terminated") or {}).get("exitCode")
    return None


def losses(log: str) -> list[tuple[int, float]]:
    """(shared step, loss) of every `step N loss L` line, by step."""
    return sorted((int(step), float(loss)) for _, step, loss in STEP_LOSS.findall(log))


def cleaned_up(lab: Lab, job: str) -> dict[str, dict[str, Any]]:
    """cleanPodPolicy Running: once nothing of the job runs any more."""

    def nothing_running() -> dict[str, dict[str, Any]] | None:
        pods = pods_left(lab, job)
        ended = all(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods.values())
        return pods if ended and pods else None

    return wait_until(nothing_running, timeout=60, what=f"{job}'s running pods to be stopped")


# -- the tests ------------------------------------------------------------------------


def test_master_and_two_workers_train_between_graph_on_the_default_ps(lab: Lab) -> None:
    status = finished(lab, TRAIN)
    assert status["state"] == "Succeeded", status
    assert status.get("restartCount", 0) == 0, status
    pods = cleaned_up(lab, TRAIN)
    # The PS ran until the end (the workers read the variables from it) and
    # was stopped; the MASTER's pod stays, its log readable.
    assert f"{TRAIN}-ps-0" not in pods, sorted(pods)
    assert lab.recorder.of(f"{TRAIN}-ps-0"), "the PS never ran"
    assert "grpc_tensorflow_server: serving ps/0" in lab.recorder.log(f"{TRAIN}-ps-0")
    master = pods[f"{TRAIN}-master-0"]
    assert exit_code(master) == 0
    kept_log = lab.cluster.kubectl("logs", f"{TRAIN}-master-0", "-n", lab.namespace).stdout
    assert re.search(r"^master-0: done: largest error 0\.\d+ <= 0\.05$", kept_log, re.M), kept_log
    trainers = {"master-0": "master", "worker-0": "worker", "worker-1": "worker"}
    steps: list[tuple[int, float]] = []
    for trainer, task in trainers.items():
        log = lab.recorder.log(f"{TRAIN}-{trainer}")
        # Its own TensorFlow server, at the address TF_CONFIG gave it.
        address = f"{TRAIN}-{trainer}.{lab.namespace}.svc:2222"
        assert f"{trainer}: serving {address}; cluster " in log, log
        shared = re.search(rf"^{trainer}: trained (\d+) of (\d+) shared steps", log, re.M)
        # Each logs its first step: every trainer ran steps of its own.
        assert losses(log), log
        if task == "worker":
            # (A worker stopped by the clean-up says nothing more.)
            assert f"{trainer}: found the variables on the PS" in log, log
        else:
            assert "master-0: initialised the variables on the PS" in log, log
            assert shared, log
            assert int(shared[1]) > 0, log
        steps += losses(log)
    steps.sort()
    first, last = steps[0], steps[-1]
    assert first[0] <= 10, steps  # the master's first step
    assert last[0] >= 2000, steps
    assert last[1] < first[1] / 100, steps
    assert last[1] < 0.01, steps


def test_a_master_killed_by_sigkill_is_recreated_and_resumes_from_the_ps(lab: Lab) -> None:
    status = finished(lab, RESTART)
    assert status["state"] == "Succeeded", status
    assert status["restartCount"] == 1, status
    first, second = lab.recorder.of(f"{RESTART}-master-0")
    assert first.exit_code == 137, first
    first_log = "\n".join(first.log)
    assert "master-0: initialised the variables on the PS" in first_log, first_log
    assert f"master-0: step {KILL_AT}: killing myself with SIGKILL" in first_log, first_log
    # A new pod, a new process: it found the model on the PS, where the
    # first one left it, and finished the job.
    assert second.uid != first.uid
    assert second.exit_code == 0, second
    second_log = "\n".join(second.log)
    resumed = re.search(r"^master-0: found the variables on the PS at step (\d+): resuming$",
                        second_log, re.M)  # fmt: skip
    assert resumed, second_log
    assert int(resumed[1]) >= KILL_AT
    # (Shown with -rA: whether the PS had to find the new MASTER first.)
    print("\n".join(line for line in second.log if line.startswith("master-0: ")))
    assert "master-0: initialised" not in second_log
    assert re.search(r"^master-0: done: largest error 0\.\d+ <= 0\.05$", second_log, re.M)
    # The PS, which kept the model, was never replaced.
    assert len(lab.recorder.of(f"{RESTART}-ps-0")) == 1


def test_multiworker_mirrored_strategy_trains_with_the_master_as_chief(lab: Lab) -> None:
    status = finished(lab, MULTI)
    assert status["state"] == "Succeeded", status
    assert status.get("restartCount", 0) == 0, status
    chief = lab.recorder.log(f"{MULTI}-master-0")
    worker = lab.recorder.log(f"{MULTI}-worker-0")
    # TensorFlow's strategy saw both tasks, and averaged their gradients in
    # every step: both report the same (global) loss at the same steps.
    assert "chief-0: replicas in sync: 2" in chief, chief
    assert "worker-0: replicas in sync: 2" in worker, worker
    chief_steps = losses(chief)
    assert chief_steps == losses(worker), (chief, worker)
    assert chief_steps[-1][0] == 300
    assert chief_steps[-1][1] < chief_steps[0][1] / 100, chief_steps
    assert re.search(r"^chief-0: done: largest error 0\.\d+ <= 0\.05$", chief, re.M), chief
    master = pods_left(lab, MULTI)[f"{MULTI}-master-0"]
    assert exit_code(master) == 0


def test_the_same_strategy_refuses_a_master_and_the_job_fails_without_a_restart(
    lab: Lab,
) -> None:
    """Why spec.tfConfig.masterTaskType exists: TensorFlow 2 rejects `master`."""
    status = finished(lab, AS_MASTER, "Failed")
    assert status["state"] == "Failed", status
    assert status.get("restartCount", 0) == 0, status
    master = f"{AS_MASTER}-master-0"
    [record] = lab.recorder.of(master)
    assert record.exit_code == 1, record
    log = "\n".join(record.log)
    # TensorFlow's own words (tensorflow/python/distribute/multi_worker_util.py).
    refusal = "ValueError: Disallowed task type found in cluster spec. Allowed types are "
    assert refusal + "('chief', 'worker', 'evaluator', 'ps', None)" in log, log
    assert "ClusterSpec({'master': [" in log, log

    # Exit 1 is the program's own failure: the pod stays, nothing replaces it.
    def kept_as_it_ended() -> None:
        assert [r.uid for r in lab.recorder.of(master)] == [record.uid]
        pod = get_or_none(lab.cluster, "pod", master, "-n", lab.namespace)
        assert pod is not None
        assert pod["metadata"]["uid"] == record.uid
        assert exit_code(pod) == 1

    holds_for(3, kept_as_it_ended, "the failed MASTER's pod")


TENSORBOARD_CLIENT = """
import json, sys, time, urllib.parse, urllib.request
base, last = sys.argv[1], int(sys.argv[2])
def get(path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)
deadline = time.monotonic() + 90
while True:  # TensorBoard reads new event files every few seconds
    try:
        tags = get("/data/plugin/scalars/tags")
        query = urllib.parse.urlencode({"run": "train", "tag": "loss"})
        points = get("/data/plugin/scalars/scalars?" + query) if "train" in tags else []
        if points and points[-1][1] >= last:
            break
    except OSError as err:
        print("retry", err, file=sys.stderr, flush=True)
    if time.monotonic() > deadline:
        sys.exit("TensorBoard never showed the last step")
    time.sleep(1)
print(json.dumps({"tags": tags, "points": points}))
"""


def test_tensorboard_serves_the_loss_the_chief_wrote_to_another_pod(lab: Lab) -> None:
    finished(lab, MULTI)
    service = f"{MULTI}-tensorboard"
    assert get_or_none(lab.cluster, "service", service, "-n", lab.namespace)
    client_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tensorboard-client", "namespace": lab.namespace},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "client",
                    "image": RUNTIME,
                    "command": ["python", "-c", textwrap.dedent(TENSORBOARD_CLIENT)],
                    "args": [f"http://{service}.{lab.namespace}.svc", "300"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }
    lab.cluster.kubectl("apply", "-f", "-", input=json.dumps(client_pod))

    def ended() -> str:
        pod = get_json(lab.cluster, "pod", "tensorboard-client", "-n", lab.namespace)
        phase = str((pod.get("status") or {}).get("phase"))
        return phase if phase in ("Succeeded", "Failed") else ""

    phase = wait_until(ended, timeout=150, what="the TensorBoard client to finish")
    out = lab.cluster.kubectl("logs", "tensorboard-client", "-n", lab.namespace).stdout
    assert phase == "Succeeded", out
    answer = json.loads(out.strip().splitlines()[-1])
    assert "loss" in answer["tags"]["train"], answer
    served = [(int(step), value) for _, step, value in answer["points"]]
    # What TensorBoard read from the shared volume is what the chief logged.
    chief = dict(losses(lab.recorder.log(f"{MULTI}-master-0")))
    assert [s for s, _ in served] == sorted(chief), (served, chief)
    for step, value in served:
        # The log prints six decimals.
        assert value == pytest.approx(chief[step], abs=1e-6), (step, value, chief[step])
    assert served[-1][1] < served[0][1] / 100
