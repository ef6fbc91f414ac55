"""Success that tells the truth, with real MXNet and TensorFlow on the real node (issue 30).

Programs of our own (tests/data/endings), run from the local runtime image
in the pods of the examples (examples/local: mxjob-dist-sync and
tfjob-train, their programs swapped), all three jobs at once:

- an MXJob whose two WORKERs raise an exception after joining the
  dist_sync kvstore: MXNet shuts the kvstore down cleanly and the
  SCHEDULER exits 0. The job ends Failed, its reason naming both WORKERs
  and their exit code 1;
- a TFJob whose WORKER raises (exit 1) while its MASTER, having run a step
  on it, exits 0 once it is gone: Failed under the default success policy;
- the same TFJob under `successPolicy: DecidingReplica`, the seeds' rule:
  Succeeded, as the seed documents say, its message still naming the WORKER.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

from ..helpers import job_status, pods_of, wait_until
from ..realjobs import (
    POLICIES,
    delete_namespaces,
    kustomized,
    real_namespace,
    replica,
    with_program,
    without,
)

PROGRAMS = REPO_ROOT / "tests" / "data" / "endings"
TIMEOUT = 300
MX, TF, SEEDS = "mx-crash", "tf-dies", "tf-dies-seeds-rule"
RELEASE = "train-endings"


def tf_jobs(cluster: LocalCluster) -> list[dict[str, Any]]:
    """A MASTER and one WORKER running worker_dies.py, with and without the seeds' rule."""
    docs = with_program(kustomized(cluster, "tfjob-train"), TF, PROGRAMS / "worker_dies.py")
    job = docs[1]
    without(job, "PS")
    replica(job, "WORKER")["replicas"] = 1
    seeds = copy.deepcopy(job)
    seeds["metadata"]["name"] = SEEDS
    seeds["spec"]["runPolicy"]["successPolicy"] = "DecidingReplica"
    return [*docs, seeds]


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster) -> Iterator[OperatorProcess]:
    """The chart, its Deployment on a kwok node where it runs nothing, and the
    operator as a local process with its ServiceAccount (named like
    conftest's fixture, so that a failed test shows its log)."""
    system = f"{RELEASE}-system"
    install = install_chart(
        real_cluster, release=RELEASE, namespace=system, sets=("cloud=gke", POLICIES)
    )
    process = OperatorProcess(install, name=RELEASE, args=("--no-autoscaler",))
    try:
        yield process.start()
    finally:
        process.stop()
        real_cluster.helm("uninstall", RELEASE, "-n", system, check=False)
        delete_namespaces(real_cluster, system)


@pytest.fixture(scope="module")
def submitted(real_cluster: LocalCluster, operator: OperatorProcess) -> Iterator[str]:
    """The three jobs, in one namespace whose pods all land on the real node."""
    ns = real_namespace(real_cluster, "train-endings")
    items = with_program(
        kustomized(real_cluster, "mxjob-dist-sync"), MX, PROGRAMS / "kvstore_crash.py"
    )
    items += tf_jobs(real_cluster)
    try:
        real_cluster.kubectl(
            "apply", "-n", ns, "-f", "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )  # fmt: skip
        yield ns
    finally:
        delete_namespaces(real_cluster, ns)


def ended(cluster: LocalCluster, ns: str, kind: str, name: str) -> dict[str, Any]:
    """The job's status once it has ended; if it never does, its pods' logs say why."""
    try:
        return wait_until(
            lambda: (
                (s := job_status(cluster, ns, kind, name)).get("phase") in ("Done", "Failed") and s
            ),
            timeout=TIMEOUT,
            what=f"{kind} {name} to end",
        )
    except AssertionError as err:
        logs = [
            f"--- {pod}:\n" + log(cluster, ns, pod)[-2000:] for pod in pods_of(cluster, ns, name)
        ]
        raise AssertionError("\n".join([str(err), *logs])) from err


def log(cluster: LocalCluster, ns: str, pod: str) -> str:
    return cluster.kubectl("logs", pod, "-n", ns, "--all-containers", check=False).stdout


def exit_codes(cluster: LocalCluster, ns: str, job: str, container: str) -> dict[str, int | None]:
    """The main container's exit code of each pod of the job left."""
    codes = {}
    for name, pod in pods_of(cluster, ns, job).items():
        [main] = [s for s in pod["status"]["containerStatuses"] if s["name"] == container]
        codes[name] = (main["state"].get("terminated") or {}).get("exitCode")
    return codes


def failed_for_good(
    cluster: LocalCluster, ns: str, kind: str, name: str
) -> tuple[dict[str, Any], str]:
    """The status of the job, which must have failed because replicas other
    than the one that decides did, and the message of its Failed condition."""
    status = ended(cluster, ns, kind, name)
    assert (status["state"], status["reason"]) == ("Failed", "OtherReplicasFailed"), status
    [failed] = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed["status"] == "True"
    return status, str(failed["message"])


def test_an_mxjob_whose_workers_crash_after_joining_the_kvstore_fails(
    real_cluster: LocalCluster, submitted: str
) -> None:
    status, message = failed_for_good(real_cluster, submitted, "MXJob", MX)
    ends = {
        name: (pod["status"].get("phase"), pod["status"].get("containerStatuses"))
        for name, pod in pods_of(real_cluster, submitted, MX).items()
    }
    logs = {name: log(real_cluster, submitted, name)[-1500:] for name in ends}
    assert message.startswith("SCHEDULER 0 succeeded, but 2 other replica(s) failed for good"), (
        json.dumps({"status": status, "pods": ends, "logs": logs}, indent=1)
    )
    for index in (0, 1):
        assert f"WORKER {index} (pod {MX}-worker-{index}, exit code 1)" in message, message
    assert {(e["replicaType"], e["exitCode"]) for e in status["failedReplicas"]} == {("WORKER", 1)}
    codes = exit_codes(real_cluster, submitted, MX, "mxnet")
    assert codes[f"{MX}-scheduler-0"] == 0, codes
    for index in (0, 1):
        out = log(real_cluster, submitted, f"{MX}-worker-{index}")
        assert "joined 2 workers, pulled [" in out, out
        assert "RuntimeError: worker" in out, out
        assert "broke after joining the kvstore" in out, out


def test_a_tfjob_whose_worker_failed_while_its_master_succeeded_fails(
    real_cluster: LocalCluster, submitted: str
) -> None:
    _, message = failed_for_good(real_cluster, submitted, "TFJob", TF)
    assert message.startswith("MASTER 0 succeeded, but 1 other replica(s) failed for good")
    assert f"WORKER 0 (pod {TF}-worker-0, exit code 1)" in message, message
    out = log(real_cluster, submitted, f"{TF}-master-0")
    assert "master-0: worker-0 computed 45" in out, out
    assert "master-0: worker-0 is gone; done" in out, out


def test_the_seeds_rule_calls_the_same_tfjob_a_success(
    real_cluster: LocalCluster, submitted: str
) -> None:
    status = ended(real_cluster, submitted, "TFJob", SEEDS)
    assert (status["state"], status["phase"], status["reason"]) == (
        "Succeeded",
        "Done",
        "Succeeded",
    )
    [succeeded] = [c for c in status["conditions"] if c["type"] == "Succeeded"]
    why = "\n".join(
        [succeeded["message"], log(real_cluster, submitted, f"{SEEDS}-master-0")[-1500:]]
    )
    assert "successPolicy DecidingReplica" in succeeded["message"], why
    assert f"WORKER 0 (pod {SEEDS}-worker-0, exit code 1)" in succeeded["message"], why
