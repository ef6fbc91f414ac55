"""The local control plane is a real one: scheduling, controllers, GC, RBAC, kwok."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from dlk8s.runtime.client import Kube
from dlk8s.runtime.errors import NotFoundError
from dlk8s_dev.localcluster import (
    EXIT_CODE_ANNOTATION,
    ClusterError,
    LocalCluster,
    NodeSpec,
    leftover_processes,
    pinned_versions,
)

from ..helpers import get_json, holds_for, wait_until


def pod_manifest(name: str, namespace: str, **container: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "busybox", **container}]},
        }
    )


def test_version_reports_pinned_kubernetes(cluster: LocalCluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    pinned = pinned_versions()["KUBERNETES_VERSION"]
    assert version["gitVersion"] == pinned
    assert f"v{version['major']}.{version['minor']}" == pinned.rsplit(".", 1)[0]


def test_deployment_becomes_available(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3", "-n", namespace)
    cluster.kubectl(
        "wait", "deployment/web", "--for=condition=Available", "--timeout=90s", "-n", namespace
    )
    deployment = get_json(cluster, "deployment", "web", "-n", namespace)
    assert deployment["status"]["availableReplicas"] == 3
    pods = get_json(cluster, "pods", "-n", namespace, "-l", "app=web")["items"]
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    assert all(p["spec"]["nodeName"].startswith("kwok-node-") for p in pods)


def probe_crd(plural: str, kind: str) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object"}}
    version = {"name": "v1", "served": True, "storage": True, "schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.probe.dlk8s.dev"},
        "spec": {
            "group": "probe.dlk8s.dev",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
            "versions": [version],
        },
    }


def test_wait_established_waits_for_served_crds_and_names_the_one_never_served(
    cluster: LocalCluster,
) -> None:
    # The second CRD takes the first one's kind: the API server never serves it.
    crds = [probe_crd("widgets", "Widget"), probe_crd("gadgets", "Widget")]
    names = [f"crd/{crd['metadata']['name']}" for crd in crds]
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": crds})
    cluster.kubectl("apply", "-f", "-", input=items)
    try:
        cluster.wait_established(names[0])
        with pytest.raises(ClusterError, match=r"crd/gadgets\.probe\.dlk8s\.dev"):
            cluster.wait_established(*names, seconds=3)
        conditions = get_json(cluster, names[1])["status"]["conditions"]
        assert {c["type"]: c["status"] for c in conditions}["NamesAccepted"] == "False"
    finally:
        cluster.kubectl("delete", *names, "--ignore-not-found", "--wait=false")


def test_too_many_gpus_stays_pending(cluster: LocalCluster, namespace: str) -> None:
    most = max(node.gpu for node in cluster.nodes)
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=pod_manifest(
            "greedy", namespace, resources={"limits": {"nvidia.com/gpu": str(most + 1)}}
        ),
    )

    def failed_scheduling() -> bool:
        events = get_json(
            cluster, "events", "-n", namespace, "--field-selector", "involvedObject.name=greedy"
        )["items"]
        return any(e["reason"] == "FailedScheduling" for e in events)

    def scheduling_verdict() -> list[dict[str, object]]:
        pod = get_json(cluster, "pod", "greedy", "-n", namespace)
        assert pod["status"]["phase"] == "Pending"
        conditions = pod["status"].get("conditions") or []
        return [c for c in conditions if c["type"] == "PodScheduled"]

    wait_until(failed_scheduling, what="a FailedScheduling event")
    # The scheduler sends the event and patches the pod's condition each on
    # its own: under load the event has been seen first.
    scheduled = wait_until(scheduling_verdict, what="the pod's PodScheduled condition")
    assert scheduled[0]["status"] == "False"
    assert scheduled[0]["reason"] == "Unschedulable"
    assert "nvidia.com/gpu" in scheduled[0]["message"]


def test_deleting_owner_collects_dependents(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    owner = get_json(cluster, "configmap", "owner", "-n", namespace)
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(dependent))
    cluster.kubectl("delete", "configmap", "owner", "-n", namespace)

    def dependent_gone() -> bool:
        out = cluster.kubectl("get", "configmap", "dependent", "-n", namespace, check=False)
        return out.returncode != 0 and "NotFound" in out.stderr

    wait_until(dependent_gone, what="the garbage collector to delete the dependent")


def test_rbac_forbids_until_bound(cluster: LocalCluster, namespace: str, tmp_path: Any) -> None:
    cluster.kubectl("create", "serviceaccount", "robot", "-n", namespace)
    token = cluster.kubectl("create", "token", "robot", "-n", namespace).stdout.strip()
    as_robot = cluster.write_kubeconfig(tmp_path / "robot.kubeconfig", token, user="robot")
    manifest = pod_manifest("by-robot", namespace)

    denied = cluster.kubectl(
        "--kubeconfig", str(as_robot), "apply", "-f", "-", input=manifest, check=False
    )
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()
    assert f"system:serviceaccount:{namespace}:robot" in denied.stderr

    cluster.kubectl(
        "create", "role", "pod-maker", "--verb=create,get,patch", "--resource=pods", "-n", namespace
    )
    cluster.kubectl(
        "create", "rolebinding", "robot-makes-pods", "--role=pod-maker",
        f"--serviceaccount={namespace}:robot", "-n", namespace,
    )  # fmt: skip
    allowed = wait_until(
        lambda: (
            cluster.kubectl(
                "--kubeconfig", str(as_robot), "apply", "-f", "-", input=manifest, check=False
            ).returncode
            == 0
        ),
        timeout=30,
        what="the RoleBinding to take effect",
    )
    assert allowed


@pytest.mark.parametrize(("code", "phase"), [(137, "Failed"), (0, "Succeeded")])
def test_kwok_finishes_pod_with_exit_code(
    cluster: LocalCluster, namespace: str, code: int, phase: str
) -> None:
    cluster.kubectl("apply", "-f", "-", input=pod_manifest("trainer", namespace))
    wait_until(
        lambda: (
            get_json(cluster, "pod", "trainer", "-n", namespace)["status"].get("phase") == "Running"
        ),
        what="the pod to run",
    )
    cluster.kubectl("annotate", "pod", "trainer", f"{EXIT_CODE_ANNOTATION}={code}", "-n", namespace)
    pod = wait_until(
        lambda: (
            (p := get_json(cluster, "pod", "trainer", "-n", namespace))["status"]["phase"] == phase
            and p
        ),
        what=f"the pod to reach {phase}",
    )
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == code


def _phase(kube: Kube, namespace: str, name: str) -> str | None:
    try:
        return str(kube.get("v1", "Pod", namespace, name).get("status", {}).get("phase", ""))
    except NotFoundError:
        return None


def _gone(kube: Kube, namespace: str, name: str, timeout: float = 30) -> None:
    """Polled without a pause: the new pod must follow the old one's end as
    closely as an operator's does, or the race this test is about is missed."""
    deadline = time.monotonic() + timeout
    while _phase(kube, namespace, name) is not None:
        assert time.monotonic() < deadline, f"pod {name} still there after {timeout}s"


@pytest.mark.parametrize("ended", [True, False], ids=["failed", "running"])
def test_a_fake_node_deletes_only_the_pod_it_was_asked_to(
    cluster: LocalCluster, namespace: str, ended: bool
) -> None:
    """A pod deleted and at once recreated under its name, as an operator
    replaces a pod: the new one stays. kwok as released deletes by name, and
    the delete it queued for the old pod removed the new one (9 of 60 failed
    pods, 3 of 60 running ones in one run; tools/patches/kwok-delete-by-uid.patch)."""
    kube = Kube(cluster.api_client())
    names = [f"p{i}" for i in range(60)]

    def manifest(name: str, code: str | None) -> dict[str, Any]:
        annotations = {EXIT_CODE_ANNOTATION: code} if code else {}
        return json.loads(pod_manifest(name, namespace)) | {
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations}
        }

    for name in names:
        kube.create(manifest(name, "1" if ended else None))
    old = "Failed" if ended else "Running"
    wait_until(lambda: all(_phase(kube, namespace, n) == old for n in names), what=f"pods {old}")
    uids = {}
    for name in names:
        kube.delete("v1", "Pod", namespace, name, None)
        # A failed pod goes at once; a running one once the node has stopped it.
        if not ended:
            _gone(kube, namespace, name)
        uids[name] = kube.create(manifest(name, None))["metadata"]["uid"]
    wait_until(
        lambda: all(_phase(kube, namespace, n) in ("Running", None) for n in names),
        what="the new pods to run or vanish",
    )

    def the_new_pods_stay() -> None:
        items = get_json(cluster, "pods", "-n", namespace)["items"]
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in items} == uids

    # A stale delete of the node's comes within milliseconds; watch ample time.
    holds_for(1, the_new_pods_stay, "the new pods")


def test_stop_leaves_no_process_behind() -> None:
    """A second, one-node cluster: after stop() none of its processes remain."""
    own = LocalCluster(nodes=[NodeSpec("solo")])
    own.start()
    pids, workdir = own.pids, str(own.workdir)
    assert len(pids) == 5
    assert leftover_processes(workdir), "the running cluster should be visible to the check"
    removed = own.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert leftover_processes(workdir) == []
    # It says what it removed (the last line of `make cluster` and `make demo`).
    started = "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"
    assert removed[0] == f"processes {started}"
    assert removed[-1].startswith(f"{workdir} (")
    assert own.stop() == [], "stopping again removes nothing more"
