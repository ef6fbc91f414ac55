"""dlk8s jobs across clusters with Kueue's MultiKueue (docs/multicluster.md):
a manager and two workers (dlk8s_dev.multicluster, `make cluster
MULTIKUEUE=1`), each a control plane of its own with Kueue's pinned release
beside it, the chart installed with kueue.enabled=true and an operator
running with the chart's ServiceAccount. The manager's ClusterQueue sends
every job it admits to a worker through MultiKueue's admission check.

What Kueue decides is Kueue's: the tests submit jobs to the manager, play
kwok's containers on the workers, and read what each cluster shows.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev import kueue
from dlk8s_dev.localcluster import LocalCluster, missing_tools
from dlk8s_dev.localdeploy import OperatorProcess
from dlk8s_dev.multicluster import MULTIKUEUE, MultiCluster

from ..helpers import (
    finish_pod,
    get_or_none,
    holds_for,
    job_status,
    pods_of,
    services_of,
    wait_until,
)
from ..queues import kind_specs

QUEUE = "team"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
# The manager's view of a job reaches the worker's within MultiKueue's
# round trips; a lost worker waits out workerLostTimeout first: 15 s here
# (Kueue's default is 15 min), so that the suite spends little time waiting.
WORKER_LOST_TIMEOUT = "15s"
DISPATCH_WAIT, LOST_WAIT = 90, 180


@pytest.fixture(scope="module")
def clusters() -> Iterator[MultiCluster]:
    probe = LocalCluster()
    missing = missing_tools(probe.tools_bin) + kueue.missing_tools(probe.tools_bin)
    if missing:
        pytest.skip(f"tools missing: {missing} (run `make tools`)")
    with MultiCluster(worker_lost_timeout=WORKER_LOST_TIMEOUT) as own:
        yield own


@pytest.fixture(scope="module")
def operators(clusters: MultiCluster) -> dict[str, OperatorProcess]:
    """The chart and an operator on every cluster, as a user installs them
    (stopped with the clusters)."""
    return clusters.operators


@pytest.fixture
def namespace(clusters: MultiCluster, operators: dict[str, OperatorProcess]) -> Iterator[str]:
    """The same namespace with its LocalQueue on every cluster, as MultiKueue needs."""
    name = f"mk-{uuid.uuid4().hex[:8]}"
    for cluster in clusters.clusters.values():
        cluster.kubectl("create", "namespace", name)
        clusters.local_queue(cluster, name, QUEUE)
    yield name
    for cluster in clusters.clusters.values():
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def dispatched(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}}
    body = copy.deepcopy(spec) | {"managedBy": MULTIKUEUE}
    return {"apiVersion": "dlk8s.io/v1alpha1", "kind": kind, "metadata": meta, "spec": body}


def submit(cluster: LocalCluster, namespace: str, job: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job))


def copies(clusters: MultiCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    """The workers that hold a copy of the job, and their copies."""
    found = {}
    for worker, cluster in clusters.members.items():
        job = get_or_none(cluster, kind.lower(), name, "-n", namespace)
        if job is not None:
            found[worker] = job
    return found


def the_worker(clusters: MultiCluster, namespace: str, kind: str, name: str) -> str:
    """The one worker MultiKueue sent the job to (its copy's pods created)."""

    def one() -> str | None:
        held = copies(clusters, namespace, kind, name)
        if len(held) != 1:
            return None
        [(worker, job)] = held.items()
        assert PREBUILT in job["metadata"]["labels"], job["metadata"]
        assert "managedBy" not in job["spec"]
        return worker if pods_of(clusters.members[worker], namespace, name) else None

    return wait_until(one, timeout=DISPATCH_WAIT, what=f"{kind} {name} on one worker")


def finish(cluster: LocalCluster, namespace: str, name: str) -> None:
    """Every pod of the job exits 0, as its training would."""
    for pod in sorted(pods_of(cluster, namespace, name)):
        finish_pod(cluster, namespace, pod, 0)


def test_every_kind_runs_on_a_worker_and_ends_on_the_manager(
    clusters: MultiCluster, namespace: str
) -> None:
    specs = kind_specs()
    elastic = copy.deepcopy(specs["PaddleJob"])
    elastic["trainer"] |= {"minInstance": 1, "maxInstance": 3}
    jobs = {
        "TFJob": dispatched("TFJob", "tf", specs["TFJob"]),
        "PyTorchJob": dispatched("PyTorchJob", "torch", specs["PyTorchJob"]),
        "PaddleJob": dispatched("PaddleJob", "paddle", elastic),
    }
    for job in jobs.values():
        submit(clusters.manager, namespace, job)
    for kind, job in jobs.items():
        name = job["metadata"]["name"]
        worker = clusters.members[the_worker(clusters, namespace, kind, name)]
        assert pods_of(clusters.manager, namespace, name) == {}
        pods = pods_of(worker, namespace, name)
        roles = {p["metadata"]["labels"]["dlk8s.io/replica-type"].upper() for p in pods.values()}
        finish(worker, namespace, name)
        ended = wait_until(
            lambda k=kind, n=name: (
                (s := job_status(clusters.manager, namespace, k, n)).get("state") == "Succeeded"
                and s
            ),
            timeout=DISPATCH_WAIT,
            what=f"{kind} {name} Succeeded on the manager",
        )
        # The worker's counts, copied: every pod it ran exited 0.
        assert (ended["succeededPods"], ended["failedPods"]) == (len(pods), 0), kind
        counted = {r["replicaType"].upper() for r in ended["replicaStatuses"]}
        assert counted == roles, kind
        assert services_of(clusters.manager, namespace, name) == {}
        # Its end removes the worker's copy, and its pods with it.
        wait_until(
            lambda k=kind, n=name, w=worker: (
                not copies(clusters, namespace, k, n) and not pods_of(w, namespace, n)
            ),
            timeout=DISPATCH_WAIT,
            what=f"{kind} {name}'s copy removed from its worker",
        )


def test_a_full_worker_sends_the_next_job_to_the_other(
    clusters: MultiCluster, namespace: str
) -> None:
    # Each worker admits 8 GPUs: a job of 6 fills one, the next goes to the other.
    gpus = {"requests": {"cpu": "100m", "nvidia.com/gpu": "6"}, "limits": {"nvidia.com/gpu": "6"}}
    spec = kind_specs()["TFJob"]
    spec["replicaSpecs"] = spec["replicaSpecs"][:1]
    spec["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = gpus
    submit(clusters.manager, namespace, dispatched("TFJob", "first", spec))
    first = the_worker(clusters, namespace, "TFJob", "first")
    submit(clusters.manager, namespace, dispatched("TFJob", "second", spec))
    second = the_worker(clusters, namespace, "TFJob", "second")
    assert second != first


def test_deleting_a_job_on_the_manager_removes_its_copy_and_pods(
    clusters: MultiCluster, namespace: str
) -> None:
    submit(clusters.manager, namespace, dispatched("TFJob", "gone", kind_specs()["TFJob"]))
    worker = clusters.members[the_worker(clusters, namespace, "TFJob", "gone")]
    clusters.manager.kubectl("delete", "tfjob", "gone", "-n", namespace)
    wait_until(
        lambda: (
            get_or_none(worker, "tfjob", "gone", "-n", namespace) is None
            and not pods_of(worker, namespace, "gone")
        ),
        timeout=DISPATCH_WAIT,
        what="the worker's copy and its pods removed",
    )


def test_a_job_without_managed_by_runs_on_the_manager(
    clusters: MultiCluster, namespace: str
) -> None:
    job = dispatched("TFJob", "here", kind_specs()["TFJob"])
    del job["spec"]["managedBy"], job["metadata"]["labels"]
    submit(clusters.manager, namespace, job)
    wait_until(
        lambda: len(pods_of(clusters.manager, namespace, "here")) == 2,
        what="the job's pods on the manager",
    )
    holds_for(3, lambda: _no_copy(clusters, namespace, "here"), "no worker holds a copy")
    finish(clusters.manager, namespace, "here")
    wait_until(
        lambda: (
            job_status(clusters.manager, namespace, "TFJob", "here").get("state") == "Succeeded"
        ),
        what="the job Succeeded on the manager",
    )


def _no_copy(clusters: MultiCluster, namespace: str, name: str) -> None:
    assert copies(clusters, namespace, "TFJob", name) == {}


def test_a_job_on_a_lost_worker_runs_again_on_the_other(
    clusters: MultiCluster, namespace: str, operators: dict[str, OperatorProcess]
) -> None:
    """The worker that runs a job stops answering (its API server down past
    workerLostTimeout): the job runs again on the other and ends there.
    When the lost worker comes back, its stale copy goes, and nothing of it
    is created there again. (Back before the job ended elsewhere, Kueue
    v0.17.0 keeps the stale copy and removes the new one:
    docs/multicluster.md, "A worker lost".)"""
    submit(clusters.manager, namespace, dispatched("TFJob", "moved", kind_specs()["TFJob"]))
    lost_name = the_worker(clusters, namespace, "TFJob", "moved")
    lost = clusters.members[lost_name]
    # The worker runs the job when it is lost: every pod of it created there.
    # (Lost halfway through creating them, its operator creates the rest when
    # the worker comes back: its copy is admitted there, and only the
    # manager's Kueue knows that copy is stale.)
    replicas = sum(r["replicas"] for r in kind_specs()["TFJob"]["replicaSpecs"])

    def all_created() -> set[str] | None:
        uids = {p["metadata"]["uid"] for p in pods_of(lost, namespace, "moved").values()}
        return uids if len(uids) == replicas else None

    before = wait_until(
        all_created,
        timeout=DISPATCH_WAIT,
        what=f"the job's {replicas} pods on {lost_name}",
    )
    with lost.api_server_down():
        other = wait_until(
            lambda: next(
                (
                    w
                    for w, c in clusters.members.items()
                    if w != lost_name and pods_of(c, namespace, "moved")
                ),
                None,
            ),
            timeout=LOST_WAIT,
            what="the job dispatched again to the other worker",
        )
        finish(clusters.members[other], namespace, "moved")
        wait_until(
            lambda: (
                job_status(clusters.manager, namespace, "TFJob", "moved").get("state")
                == "Succeeded"
            ),
            timeout=DISPATCH_WAIT,
            what="the moved job Succeeded on the manager",
        )
    # The lost worker's operator gave up its Lease and exited, as it does
    # when it cannot renew it: its Deployment would start it again.
    if operators[lost_name].popen is None or operators[lost_name].popen.poll() is not None:
        operators[lost_name].start()
    wait_until(
        lambda: get_or_none(lost, "tfjob", "moved", "-n", namespace) is None,
        timeout=DISPATCH_WAIT,
        what="the returned worker's stale copy removed",
    )
    after = {p["metadata"]["uid"] for p in pods_of(lost, namespace, "moved").values()}
    assert after <= before, (
        f"pods created on the returned worker: {after - before}\n{events_of(lost, namespace)}"
        + "\n".join(
            line for line in operators[lost_name].tail(400_000).splitlines() if "moved" in line
        )
    )


def events_of(cluster: LocalCluster, namespace: str) -> str:
    """The namespace's events, oldest first: what a failure needs to be read."""
    columns = "custom-columns=AT:.lastTimestamp,OBJ:.involvedObject.name,WHY:.reason,MSG:.message"
    done = cluster.kubectl(
        "get", "events", "-n", namespace, "--sort-by=.lastTimestamp", "-o", columns, check=False
    )
    return done.stdout + done.stderr
