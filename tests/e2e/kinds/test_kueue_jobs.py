"""dlk8s jobs through Kueue's queues (docs/kueue.md): a cluster of this
module's own, with Kueue's pinned release beside it (waitForPodsReady on),
the chart installed with kueue.enabled=true, and the operator running with
the chart's ServiceAccount, so its Kueue RBAC is the chart's. Kueue's pod
integration is on and dlk8s's kinds are its externalFrameworks, as
docs/kueue.md asks of users.

What Kueue decides is Kueue's: the tests only submit jobs and read what
Kueue and the operator made of them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster, NodeSpec
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

from ..helpers import (
    apply,
    condition,
    finish_pod,
    get_json,
    holds_for,
    job_status,
    pods_of,
    temporary_namespace,
    wait_for_state,
    wait_until,
    without_binding,
)
from ..permissions import granted, used
from ..queues import cluster_queue_spec, is_true, kind_specs, kueue_cluster, kueue_object

GPU = "nvidia.com/gpu"
QUOTA_GPUS = 8
FLAVOR, TAINTED = "gpus", "tainted-gpus"
POOL = {"pool": "team-gpus"}
TOLERATION = {"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}
# Kueue's waitForPodsReady timeout: an admitted job whose pods do not all
# run by then is evicted; the test waits past it.
PODS_READY_TIMEOUT = 20


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    nodes = [NodeSpec(f"gpu-node-{i}", gpu=8) for i in range(2)]
    wait = {"timeout": f"{PODS_READY_TIMEOUT}s", "blockAdmission": False}
    # Kueue's pod integration on, as many clusters run it: its webhook must
    # leave the pods of dlk8s's kinds (its externalFrameworks) to dlk8s.
    with kueue_cluster(nodes, wait_for_pods_ready=wait, frameworks=("batch/job", "pod")) as own:
        yield own


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster) -> Iterator[OperatorProcess]:
    install = install_chart(cluster, sets=("cloud=gke", "kueue.enabled=true"))
    process = OperatorProcess(install, name="kueue-operator").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def namespace(cluster: LocalCluster, operator: OperatorProcess) -> Iterator[str]:
    with temporary_namespace(cluster) as name:
        yield name


def make_queue(
    cluster: LocalCluster, namespace: str, name: str, flavor: str, preemption: bool = False
) -> str:
    """A ClusterQueue of QUOTA_GPUS on `flavor` only for `namespace`, and its LocalQueue."""
    quota = {"cpu": "64", "memory": "256Gi", GPU: str(QUOTA_GPUS)}
    spec = cluster_queue_spec(quota, flavor, namespace, preemption)
    cq = f"{namespace}-{name}"
    cluster.kubectl("apply", "-f", "-", input=json.dumps(kueue_object("ClusterQueue", cq, spec)))
    apply(cluster, namespace, kueue_object("LocalQueue", name, {"clusterQueue": cq}, namespace))
    wait_until(lambda: is_true(get_json(cluster, "clusterqueue", cq), "Active"), what=f"{cq}")
    return name


@pytest.fixture(scope="module")
def flavors(cluster: LocalCluster) -> None:
    plain = kueue_object("ResourceFlavor", FLAVOR, {})
    tainted = kueue_object(
        "ResourceFlavor", TAINTED, {"nodeLabels": POOL, "tolerations": [TOLERATION]}
    )
    for flavor in (plain, tainted):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(flavor))


def tfjob(name: str, queue: str, gpus_per_pod: int = 1, workers: int = 3) -> dict[str, Any]:
    """A TFJob of 1 MASTER and `workers` WORKERs in `queue`."""
    resources = {
        "requests": {"cpu": "100m", GPU: str(gpus_per_pod)},
        "limits": {GPU: str(gpus_per_pod)},
    }
    container = {"name": "tensorflow", "image": "tensorflow:latest", "resources": resources}
    specs = [
        {
            "tfReplicaType": role,
            "replicas": count,
            "template": {"spec": {"containers": [copy.deepcopy(container)]}},
        }
        for role, count in (("MASTER", 1), ("WORKER", workers))
    ]
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"replicaSpecs": specs},
    }


def edit_tfjob(
    cluster: LocalCluster, namespace: str, name: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    """`edit` the job as a user would (get, change, replace), read again when
    a status write came between the get and the replace."""

    def replaced() -> bool:
        job = get_json(cluster, "tfjob", name, "-n", namespace)
        edit(job)
        done = cluster.kubectl("replace", "-f", "-", input=json.dumps(job), check=False)
        assert done.returncode == 0 or "Conflict" in done.stderr, done.stderr
        return done.returncode == 0

    wait_until(replaced, what=f"{name} edited")


def workload_of(cluster: LocalCluster, namespace: str, job: str) -> dict[str, Any] | None:
    items = get_json(
        cluster, "workloads.kueue.x-k8s.io", "-n", namespace, "-l", f"dlk8s.io/job-name={job}"
    )["items"]
    return items[0] if items else None


def admitted_gpus(cluster: LocalCluster, namespace: str) -> int:
    items = get_json(cluster, "workloads.kueue.x-k8s.io", "-n", namespace)["items"]
    return sum(
        int(a["resourceUsage"].get(GPU, 0))
        for w in items
        if is_true(w, "QuotaReserved")
        for a in w["status"]["admission"]["podSetAssignments"]
    )


def test_a_quota_of_8_gpus_admits_two_tfjobs_of_4_and_the_third_when_one_goes(
    cluster: LocalCluster, namespace: str, flavors: None
) -> None:
    queue = make_queue(cluster, namespace, "team", FLAVOR)
    names = ["tf-a", "tf-b", "tf-c"]
    samples: list[int] = []
    for name in names:
        apply(cluster, namespace, tfjob(name, queue))

    def two_running() -> set[str]:
        samples.append(admitted_gpus(cluster, namespace))
        return {n for n in names if len(pods_of(cluster, namespace, n)) == 4}

    running = wait_until(lambda: len(two_running()) == 2 and two_running(), what="two jobs' pods")
    (third,) = set(names) - running
    waiting = workload_of(cluster, namespace, third)
    assert waiting is not None
    assert not is_true(waiting, "QuotaReserved")
    assert pods_of(cluster, namespace, third) == {}
    status = job_status(cluster, namespace, "TFJob", third)
    assert status["phase"] == "Queued"
    queued = condition(status, "Queued")
    assert queued is not None
    assert queued["status"] == "True"
    assert "insufficient unused quota" in queued["message"]
    for name in running:
        assert (
            condition(job_status(cluster, namespace, "TFJob", name), "Admitted")["status"] == "True"
        )
    gone = sorted(running)[0]
    cluster.kubectl("delete", "tfjob", gone, "-n", namespace, "--wait=true")
    wait_until(lambda: len(two_running() & {third}) == 1, what=f"{third} admitted once {gone} went")
    assert max(samples) <= QUOTA_GPUS, "never more admitted than the quota"


def requests_of(containers: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return sorted((c["name"], c.get("resources", {}).get("requests", {})) for c in containers)


def test_every_kind_waits_in_a_queue_and_asks_for_what_its_pods_do(
    cluster: LocalCluster, namespace: str, flavors: None
) -> None:
    queue = make_queue(cluster, namespace, "kinds", FLAVOR)
    for kind, spec in kind_specs().items():
        name = f"{kind.lower()}-q"
        meta = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}}
        apply(
            cluster,
            namespace,
            {"apiVersion": "dlk8s.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec},
        )
    for kind in kind_specs():
        name = f"{kind.lower()}-q"
        workload = wait_until(
            lambda n=name: (
                (w := workload_of(cluster, namespace, n)) and is_true(w, "Admitted") and w
            ),
            what=f"{kind}'s Workload admitted",
        )
        pod_sets = {ps["name"]: ps for ps in workload["spec"]["podSets"]}
        want = sum(ps["count"] for ps in pod_sets.values())
        pods = wait_until(
            lambda n=name, k=want: len(p := pods_of(cluster, namespace, n)) == k and p,
            what=f"{kind}'s {want} pods",
        )
        for pod in pods.values():
            role = pod["metadata"]["labels"]["dlk8s.io/replica-type"]
            pod_set = pod_sets[role]
            assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == role
            template = pod_set["template"]["spec"]
            assert requests_of(template["containers"]) == requests_of(pod["spec"]["containers"]), (
                kind,
                role,
            )
            assert requests_of(template.get("initContainers", [])) == requests_of(
                pod["spec"].get("initContainers", [])
            ), (kind, role)
            # Kueue's pod webhook left the pod to dlk8s: no gate, no Workload of its own.
            assert "kueue.x-k8s.io/managed" not in pod["metadata"]["labels"]


def test_a_higher_priority_job_preempts_a_running_one_which_comes_back_and_completes(
    cluster: LocalCluster, namespace: str, flavors: None
) -> None:
    queue = make_queue(cluster, namespace, "prio", FLAVOR, preemption=True)
    for name, value in (("low", 10), ("high", 1000)):
        wpc = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"{namespace}-{name}"},
            "value": value,
        }
        cluster.kubectl("apply", "-f", "-", input=json.dumps(wpc))
    low, high = tfjob("victim", queue, gpus_per_pod=2), tfjob("urgent", queue, gpus_per_pod=2)
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{namespace}-low"
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{namespace}-high"
    low["spec"]["runPolicy"] = {"backoffLimit": 0}
    apply(cluster, namespace, low)
    wait_until(lambda: len(pods_of(cluster, namespace, "victim")) == 4, what="the victim's pods")
    apply(cluster, namespace, high)
    wait_until(
        lambda: len(pods_of(cluster, namespace, "urgent")) == 4, what="the urgent job's pods"
    )
    assert pods_of(cluster, namespace, "victim") == {}, "the victim's pods are gone"
    status = job_status(cluster, namespace, "TFJob", "victim")
    evicted = condition(status, "Evicted")
    assert evicted is not None
    assert evicted["status"] == "True"
    assert evicted["reason"] == "Preempted"
    assert status["phase"] == "Queued"
    assert status.get("restartCount", 0) == 0
    wl = workload_of(cluster, namespace, "victim")
    assert wl is not None
    assert not is_true(wl, "QuotaReserved"), "the quota was given back"
    cluster.kubectl("delete", "tfjob", "urgent", "-n", namespace, "--wait=true")
    pods = wait_until(
        lambda: len(p := pods_of(cluster, namespace, "victim")) == 4 and p, what="the victim back"
    )
    for pod in pods:
        finish_pod(cluster, namespace, pod, 0)
    done = wait_for_state(cluster, namespace, "TFJob", "victim", "Succeeded")
    assert done.get("restartCount", 0) == 0
    wl = wait_until(
        lambda: (w := workload_of(cluster, namespace, "victim")) and is_true(w, "Finished") and w,
        what="the victim's Workload finished",
    )
    assert condition(wl["status"], "Finished")["reason"] == "Succeeded"


def test_a_flavors_labels_and_tolerations_reach_the_pods_which_stay_admitted_while_running(
    cluster: LocalCluster, namespace: str, flavors: None
) -> None:
    for node in ("gpu-node-0", "gpu-node-1"):
        cluster.kubectl("label", "node", node, "pool=team-gpus", "--overwrite")
    queue = make_queue(cluster, namespace, "tainted", TAINTED)
    apply(cluster, namespace, tfjob("placed", queue))
    pods = wait_until(
        lambda: len(p := pods_of(cluster, namespace, "placed")) == 4 and p, what="the pods"
    )
    for pod in pods.values():
        assert pod["spec"]["nodeSelector"]["pool"] == POOL["pool"]
        assert TOLERATION in pod["spec"]["tolerations"]
    wait_until(
        lambda: (
            (w := workload_of(cluster, namespace, "placed")) is not None and is_true(w, "PodsReady")
        ),
        what="PodsReady on the Workload",
    )

    def still_admitted() -> None:
        wl = workload_of(cluster, namespace, "placed")
        assert wl is not None
        assert is_true(wl, "Admitted")
        assert not is_true(wl, "Evicted")
        assert len(pods_of(cluster, namespace, "placed")) == 4

    holds_for(PODS_READY_TIMEOUT + 5, still_admitted, "the admission, past waitForPodsReady")


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def queue_label(cluster: LocalCluster, namespace: str, job: str) -> str | None:
    found = get_json(cluster, "tfjob", job, "-n", namespace)
    label: str | None = found["metadata"].get("labels", {}).get(QUEUE_LABEL)
    return label


def test_an_admitted_jobs_queue_is_fixed_and_it_leaves_when_preempted_whatever_its_label(
    cluster: LocalCluster, namespace: str, flavors: None, operator: OperatorProcess
) -> None:
    queue = make_queue(cluster, namespace, "fixed", FLAVOR, preemption=True)
    make_queue(cluster, namespace, "elsewhere", FLAVOR)
    for name, value in (("low", 10), ("high", 1000)):
        wpc = kueue_object("WorkloadPriorityClass", f"{namespace}-{name}", {})
        wpc["value"] = value
        del wpc["spec"]
        cluster.kubectl("apply", "-f", "-", input=json.dumps(wpc))
    low, high = tfjob("leaver", queue, gpus_per_pod=2), tfjob("urgent", queue, gpus_per_pod=2)
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{namespace}-low"
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{namespace}-high"
    apply(cluster, namespace, low)
    wait_until(lambda: len(pods_of(cluster, namespace, "leaver")) == 4, what="the leaver's pods")
    wait_for_state(cluster, namespace, "TFJob", "leaver", "Running")
    for change in (f"{QUEUE_LABEL}-", f"{QUEUE_LABEL}=elsewhere"):
        refused = cluster.kubectl(
            "label", "tfjob", "leaver", "-n", namespace, change, "--overwrite", check=False
        )
        assert refused.returncode != 0, f"{change} was let through"
        assert "cannot change once Kueue has admitted the job" in refused.stderr, refused.stderr
    assert queue_label(cluster, namespace, "leaver") == queue
    install = operator.install
    with without_binding(cluster, f"{install.release}-{install.namespace}-fixed-queue"):
        # The API server drops a deleted binding a moment later.
        wait_until(
            lambda: (
                cluster.kubectl(
                    "label", "tfjob", "leaver", "-n", namespace, f"{QUEUE_LABEL}-", check=False
                ).returncode
                == 0
            ),
            timeout=60,
            what="the label taken off without the policy",
        )
        # The operator keeps the job in its Workload's queue, and says so on it.
        wait_until(
            lambda: queue_label(cluster, namespace, "leaver") == queue, what="the label set back"
        )
        cluster.kubectl("label", "tfjob", "leaver", "-n", namespace, f"{QUEUE_LABEL}-")
        apply(cluster, namespace, high)
        wait_until(
            lambda: len(pods_of(cluster, namespace, "urgent")) == 4, what="the urgent job's pods"
        )
        wait_until(
            lambda: pods_of(cluster, namespace, "leaver") == {}, what="the leaver's pods gone"
        )
    status = job_status(cluster, namespace, "TFJob", "leaver")
    assert status["phase"] == "Queued", status
    evicted = condition(status, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")


def pod_gpus(cluster: LocalCluster, namespace: str, job: str) -> int:
    """The GPUs the job's pods that still hold them ask for."""
    return sum(
        int(c.get("resources", {}).get("limits", {}).get(GPU, 0))
        for pod in pods_of(cluster, namespace, job).values()
        if pod["status"].get("phase") not in ("Succeeded", "Failed")
        for c in pod["spec"]["containers"]
    )


def test_an_admitted_job_that_asks_for_more_gpus_is_requeued_and_never_runs_past_its_quota(
    cluster: LocalCluster, namespace: str, flavors: None
) -> None:
    queue = make_queue(cluster, namespace, "capped", FLAVOR)
    apply(cluster, namespace, tfjob("greedy", queue))  # 4 pods of 1 GPU
    wait_until(lambda: pod_gpus(cluster, namespace, "greedy") == 4, what="the admitted pods")
    samples = [pod_gpus(cluster, namespace, "greedy")]

    def more_gpus(job: dict[str, Any]) -> None:
        """Each WORKER asks for 3 GPUs: 1 + 3 x 3 = 10 in all."""
        worker = job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]
        worker["resources"] = {"requests": {"cpu": "100m", GPU: "3"}, "limits": {GPU: "3"}}

    edit_tfjob(cluster, namespace, "greedy", more_gpus)
    workers = "dlk8s.io/job-name=greedy,dlk8s.io/replica-type=worker"
    cluster.kubectl("delete", "pods", "-n", namespace, "-l", workers)

    def requeued() -> dict[str, Any] | None:
        samples.append(pod_gpus(cluster, namespace, "greedy"))
        wl = workload_of(cluster, namespace, "greedy")
        return wl if wl is not None and wl_gpus(wl) == 10 else None

    wait_until(requeued, what="the job requeued with a Workload of 10 GPUs")
    status = job_status(cluster, namespace, "TFJob", "greedy")
    assert (status["phase"], status.get("restartCount", 0)) == ("Queued", 0), status
    events = get_json(
        cluster, "events", "-n", namespace, "--field-selector",
        "involvedObject.name=greedy,reason=Requeued",
    )["items"]  # fmt: skip
    assert events, "no Requeued event on the job"
    assert "other pods than ClusterQueue" in events[0]["message"], events[0]

    def never_past_the_quota() -> None:
        samples.append(pod_gpus(cluster, namespace, "greedy"))
        assert samples[-1] == 0, "a pod of the new spec runs without an admission"
        wl = workload_of(cluster, namespace, "greedy")
        assert wl is not None
        assert not is_true(wl, "QuotaReserved"), "10 GPUs admitted in a quota of 8"

    holds_for(10, never_past_the_quota, "the requeued job, waiting")
    assert max(samples) <= QUOTA_GPUS, samples


def wl_gpus(workload: dict[str, Any]) -> int:
    """The GPUs a Workload asks for in all."""
    return sum(
        ps["count"] * int(c.get("resources", {}).get("limits", {}).get(GPU, 0))
        for ps in workload["spec"]["podSets"]
        for c in ps["template"]["spec"]["containers"]
    )


KUEUE_RESOURCES = {
    f"{plural}.kueue.x-k8s.io"
    for plural in ("workloads", "localqueues", "resourceflavors", "workloadpriorityclasses")
} | {"workloads.kueue.x-k8s.io/status", "priorityclasses.scheduling.k8s.io"}
# Granted though a run seldom needs it: a create that finds the Workload's
# name taken (a cache behind the API server) looks whose it is.
SELDOM = {("workloads.kueue.x-k8s.io", "get")}


def kueue_permissions(found: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {
        (r, v) for r, v in found if r in KUEUE_RESOURCES or (r, v) == ("jobs.dlk8s.io", "patch")
    }


def test_the_operator_is_granted_exactly_the_kueue_calls_it_makes(
    cluster: LocalCluster, namespace: str, flavors: None, operator: OperatorProcess
) -> None:
    """Last in the module: after the tests above, the paths they did not
    take: a namespace's default LocalQueue (the job labelled), a waiting
    job's replicas changed (its Workload patched), and a suspension (the
    Workload deleted)."""
    make_queue(cluster, namespace, "default", FLAVOR)
    unlabelled = tfjob("by-default", "default")
    del unlabelled["metadata"]["labels"]
    apply(cluster, namespace, unlabelled)
    wait_until(lambda: len(pods_of(cluster, namespace, "by-default")) == 4, what="its pods")
    labels = get_json(cluster, "tfjob", "by-default", "-n", namespace)["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "default"
    # With a LocalQueue "default" in the namespace, Kueue's pod webhook
    # would queue any pod whose owner it does not know; these it leaves.
    for pod in pods_of(cluster, namespace, "by-default").values():
        assert "kueue.x-k8s.io/managed" not in pod["metadata"]["labels"]
        assert not pod["spec"].get("schedulingGates")
    apply(cluster, namespace, tfjob("too-big", "default", gpus_per_pod=4))

    def worker_count() -> int | None:
        wl = workload_of(cluster, namespace, "too-big")
        sets = {ps["name"]: ps["count"] for ps in (wl or {}).get("spec", {}).get("podSets", [])}
        return sets.get("worker")

    wait_until(lambda: worker_count() == 3, what="the waiting job's Workload")

    def one_worker(job: dict[str, Any]) -> None:
        job["spec"]["replicaSpecs"][1]["replicas"] = 1

    edit_tfjob(cluster, namespace, "too-big", one_worker)
    wait_until(lambda: worker_count() == 1, what="the Workload asking for one WORKER")
    suspend = json.dumps({"spec": {"runPolicy": {"suspend": True}}})
    cluster.kubectl("patch", "tfjob", "too-big", "-n", namespace, "--type=merge", "-p", suspend)
    wait_until(lambda: workload_of(cluster, namespace, "too-big") is None, what="Workload gone")
    assert pods_of(cluster, namespace, "too-big") == {}
    install = operator.install
    cluster.kubectl("create", "serviceaccount", "bare", "-n", namespace)
    baseline = granted(cluster, f"system:serviceaccount:{namespace}:bare", install.namespace)
    sa = f"system:serviceaccount:{install.namespace}:{install.service_account}"
    chart = kueue_permissions(granted(cluster, sa, install.namespace) - baseline)
    calls = kueue_permissions(used(operator))
    assert calls <= chart, f"used but not granted: {sorted(calls - chart)}"
    assert chart - SELDOM == calls, f"granted but not used: {sorted(chart - SELDOM - calls)}"
