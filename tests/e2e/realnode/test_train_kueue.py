"""A queued TFJob trains on the real node once Kueue admits it (docs/kueue.md).

Kueue's pinned release runs beside the session's real-node cluster for
this module only; the chart is installed with kueue.enabled=true and the
operator runs with its ServiceAccount, watching a namespace of the real
node. examples/tfjob-train (with the local runtime image) goes to a
LocalQueue whose ClusterQueue has room for it: it waits for its Workload,
is admitted, trains to Done, and its Workload is finished, giving the
quota back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev import kueue
from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from ..helpers import condition, get_json, wait_until
from ..queues import cluster_queue_spec, is_true, kueue_object
from ..realjobs import Lab, Recorder, finished, kustomized, local_operator, the_job

RUNTIME = "localhost/dlk8s/runtime:local"
TRAIN = "tfjob-train"
QUEUE = "train"


@pytest.fixture(scope="module")
def kueue_run(real_cluster: LocalCluster) -> Iterator[kueue.Kueue]:
    missing = kueue.missing_tools(real_cluster.tools_bin)
    if missing:
        pytest.skip(f"Kueue's tools missing: {missing} (run `make tools`)")
    run = kueue.Kueue(real_cluster).start()
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster, kueue_run: kueue.Kueue) -> Iterator[OperatorProcess]:
    """Named like conftest's fixture, so a failed test shows this operator's log."""
    sets = ("cloud=gke", f"config.tfImage={RUNTIME}", "kueue.enabled=true")
    with local_operator(real_cluster, "train-kueue", sets) as process:
        yield process


@pytest.fixture(scope="module")
def lab(real_cluster: LocalCluster, operator: OperatorProcess) -> Iterator[Lab]:
    namespace = operator.env["DLK8S_NAMESPACE"]
    quota = {"cpu": "8", "memory": "16Gi"}
    cq = f"{namespace}-cq"
    objects = [
        kueue_object("ResourceFlavor", "real-node", {}),
        kueue_object("ClusterQueue", cq, cluster_queue_spec(quota, "real-node", namespace)),
        kueue_object("LocalQueue", QUEUE, {"clusterQueue": cq}, namespace),
    ]
    for obj in objects:
        real_cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    recorder = Recorder(real_cluster, namespace)
    try:
        docs = kustomized(real_cluster, TRAIN)
        the_job(docs)["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = QUEUE
        items = {"apiVersion": "v1", "kind": "List", "items": docs}
        real_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(items))
        yield Lab(real_cluster, namespace, recorder, operator)
    finally:
        recorder.stop()
        real_cluster.kubectl("delete", "clusterqueue", cq, "--ignore-not-found", "--wait=false")


def test_a_queued_tfjob_is_admitted_and_trains_to_done(lab: Lab) -> None:
    status = finished(lab, TRAIN)
    admitted = condition(status, "Admitted")
    assert admitted is not None, status
    assert admitted["status"] == "True"
    assert admitted["message"] == f"Admitted by ClusterQueue {lab.namespace}-cq"
    assert status.get("restartCount", 0) == 0
    [workload] = get_json(
        lab.cluster,
        "workloads.kueue.x-k8s.io",
        "-n",
        lab.namespace,
        "-l",
        f"dlk8s.io/job-name={TRAIN}",
    )["items"]
    assert {ps["name"] for ps in workload["spec"]["podSets"]} == {"master", "worker", "ps"}
    wait_until(lambda: is_true(workload_now(lab, workload), "Finished"), what="Finished")
    finished_at = condition(workload_now(lab, workload)["status"], "Finished")
    assert finished_at is not None
    assert finished_at["reason"] == "Succeeded"
    # PodsReady as the pods last had it: all ran (a finished job's is left).
    ready = condition(workload_now(lab, workload)["status"], "PodsReady")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("True", "Started")
    queue = get_json(lab.cluster, "clusterqueue", f"{lab.namespace}-cq")
    wait_until(
        lambda: all(
            r["total"] in ("0", 0)
            for f in get_json(lab.cluster, "clusterqueue", f"{lab.namespace}-cq")["status"].get(
                "flavorsReservation", []
            )
            for r in f["resources"]
        ),
        what="the quota given back",
    )
    assert queue["status"].get("admittedWorkloads", 0) <= 1


def workload_now(lab: Lab, workload: dict[str, Any]) -> dict[str, Any]:
    return get_json(
        lab.cluster, "workloads.kueue.x-k8s.io", workload["metadata"]["name"], "-n", lab.namespace
    )
