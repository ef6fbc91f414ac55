"""Containers that cannot start, for real on the real node (issue 49).

The kubelet and containerd say why, and the job must say it too:

- a PyTorchJob whose command is not in its image: containerd refuses the
  container (the kubelet's StartError, exit code 128), the operator
  recreates the pod once (backoffLimit 1) and then fails the job as
  BackoffLimitExceeded, the runtime's message in its status and events and
  no pod called lost;
- a TFJob whose MASTER reads a ConfigMap that does not exist
  (CreateContainerConfigError): the job is not failed, its status names the
  pod and the kubelet's words; once the ConfigMap is made the kubelet starts
  the container and the job ends Done without being touched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

from ..helpers import apply, condition, job_manifest, job_status, wait_until
from ..realjobs import local_operator

RUNTIME = "localhost/dlk8s/runtime:local"
MISSING, WAITING = "not-in-image", "needs-config"
CONFIG = "late-config"


@pytest.fixture(scope="module")
def operator(real_cluster: LocalCluster) -> Iterator[OperatorProcess]:
    """Named like conftest's fixture, so a failed test shows this operator's log."""
    with local_operator(real_cluster, "start-failures", ("cloud=gke",)) as process:
        yield process


def only_master(kind: str, name: str, container: str, command: list[str]) -> dict[str, Any]:
    job = job_manifest(kind, name, {"MASTER": 1}, container)
    [pod] = [r["template"]["spec"] for r in job["spec"]["replicaSpecs"]]
    pod["containers"][0] |= {"image": RUNTIME, "command": command}
    pod["terminationGracePeriodSeconds"] = 1
    return job


@pytest.fixture(scope="module")
def submitted(real_cluster: LocalCluster, operator: OperatorProcess) -> str:
    """Both jobs at once, in the operator's namespace (its pods on the real node)."""
    ns = operator.env["DLK8S_NAMESPACE"]
    missing = only_master("PyTorchJob", MISSING, "pytorch", ["train-that-is-not-here"])
    missing["spec"]["runPolicy"] = {"backoffLimit": 1}
    waiting = only_master("TFJob", WAITING, "tensorflow", ["python3", "-c", "print('ran')"])
    [pod] = [r["template"]["spec"] for r in waiting["spec"]["replicaSpecs"]]
    pod["containers"][0]["env"] = [
        {"name": "STEPS", "valueFrom": {"configMapKeyRef": {"name": CONFIG, "key": "steps"}}}
    ]
    for job in (missing, waiting):
        apply(real_cluster, ns, job)
    return ns


def events_of(cluster: LocalCluster, ns: str, name: str) -> list[dict[str, Any]]:
    found = cluster.kubectl(
        "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}", "-o", "json"
    )
    return [e for e in json.loads(found.stdout)["items"] if e["involvedObject"]["kind"] != "Pod"]


def said(cluster: LocalCluster, ns: str, kind: str, name: str) -> str:
    status = job_status(cluster, ns, kind, name)
    pods = cluster.kubectl("get", "pods", "-n", ns, "-o", "wide").stdout
    words = [(e["type"], e["reason"], e["message"]) for e in events_of(cluster, ns, name)]
    return f"{json.dumps(status, indent=1)}\n{pods}\n{json.dumps(words, indent=1)}"


def test_a_command_missing_from_the_image_fails_the_job_with_the_runtime_s_words(
    real_cluster: LocalCluster, submitted: str
) -> None:
    ns = submitted
    try:
        status = wait_until(
            lambda: (
                (s := job_status(real_cluster, ns, "PyTorchJob", MISSING)).get("phase")
                in ("Done", "Failed")
                and s
            ),
            timeout=180,
            what=f"{MISSING} to end",
        )
    except AssertionError as err:
        raise AssertionError(f"{err}\n{said(real_cluster, ns, 'PyTorchJob', MISSING)}") from None
    context = said(real_cluster, ns, "PyTorchJob", MISSING)
    assert (status["state"], status["reason"]) == ("Failed", "BackoffLimitExceeded"), context
    assert status["restartCount"] == 1, context
    failed = condition(status, "Failed")
    assert failed is not None, context
    message = failed["message"]
    pod = f"{MISSING}-master-0"
    assert message.startswith(f"MASTER 0 (pod {pod}) failed: container pytorch could not start")
    assert "(StartError, exit code 128)" in message, context
    assert '"train-that-is-not-here": executable file not found' in message, context
    assert message.endswith("1 more pod restart(s) needed after 1, but backoffLimit is 1"), context
    events = events_of(real_cluster, ns, MISSING)
    restarting = [e["message"] for e in events if e["reason"] == "Restarting"]
    assert restarting, context
    assert all("could not start (StartError" in m for m in restarting), context
    recreating = [(e["type"], e["message"]) for e in events if e["reason"] == "Recreating"]
    assert recreating == [("Normal", "Recreating 1 pod(s) that failed (restarts: 1)")], context


def test_a_missing_config_map_is_named_and_the_job_goes_on_once_it_exists(
    real_cluster: LocalCluster, submitted: str
) -> None:
    ns = submitted

    def blocked() -> dict[str, Any] | None:
        status = job_status(real_cluster, ns, "TFJob", WAITING)
        return status if status.get("reason") == "PodNotStarting" else None

    try:
        status = wait_until(blocked, timeout=120, what=f"{WAITING} to say why it waits")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{said(real_cluster, ns, 'TFJob', WAITING)}") from None
    context = said(real_cluster, ns, "TFJob", WAITING)
    assert (status["state"], status["phase"]) == ("Running", "Creating"), context
    running = condition(status, "Running")
    assert running is not None, context
    assert (running["status"], running["reason"]) == ("False", "PodNotStarting"), context
    assert running["message"] == (
        f"MASTER 0 (pod {WAITING}-master-0) is not starting: container tensorflow is"
        f' waiting: CreateContainerConfigError: configmap "{CONFIG}" not found'
    ), context
    notices = [e for e in events_of(real_cluster, ns, WAITING) if e["reason"] == "PodNotStarting"]
    assert [(e["type"], e["message"]) for e in notices] == [("Warning", running["message"])]
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG},
        "data": {"steps": "1"},
    }
    apply(real_cluster, ns, config)
    try:
        wait_until(
            lambda: job_status(real_cluster, ns, "TFJob", WAITING).get("phase") == "Done",
            timeout=180,
            what=f"{WAITING} to run once its ConfigMap exists",
        )
    except AssertionError as err:
        raise AssertionError(f"{err}\n{said(real_cluster, ns, 'TFJob', WAITING)}") from None
    status = job_status(real_cluster, ns, "TFJob", WAITING)
    assert (status["state"], status.get("restartCount", 0)) == ("Succeeded", 0), context
