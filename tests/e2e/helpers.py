"""Small helpers the end-to-end tests share."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import yaml

from dlk8s.runtime.errors import NotFoundError
from dlk8s_dev.localcluster import EXIT_CODE_ANNOTATION, REPO_ROOT, LocalCluster

from . import reads

T = TypeVar("T")
EXAMPLES = REPO_ROOT / "tests" / "data" / "kwok"  # tests/data/kwok/README.md


def wait_until(predicate: Callable[[], T], timeout: float = 60, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def holds_for(seconds: float, check: Callable[[], object], what: str, looks: int = 3) -> int:
    """Watches a state that must hold over a while: `check` (which asserts)
    runs again and again until `seconds` have passed and it has run at least
    `looks` times, so a slow machine stretches the while instead of leaving
    it unwatched. Returns how many looks there were."""
    deadline, done = time.monotonic() + seconds, 0
    while done < looks or time.monotonic() < deadline:
        try:
            check()
        except AssertionError as err:
            raise AssertionError(f"{what} stopped holding after {done} look(s): {err}") from err
        done += 1
        time.sleep(0.25)
    return done


def get_json(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    """`kubectl get ARGS -o json`, read in this process when it can be (reads.py)."""
    query = reads.parse(args)
    if query is not None:
        found = reads.reader(cluster).get(query)
        if found is not None:
            return found
    out = cluster.kubectl("get", *args, "-o", "json")
    printed: dict[str, Any] = json.loads(out.stdout)
    return printed


def get_or_none(cluster: LocalCluster, *args: str) -> dict[str, Any] | None:
    """get_json, or None where kubectl would say NotFound."""
    query = reads.parse(args)
    if query is not None:
        try:
            found = reads.reader(cluster).get(query)
        except reads.NotFoundError:
            return None
        if found is not None:
            return found
    out = cluster.kubectl("get", *args, "-o", "json", check=False)
    if out.returncode != 0:
        if "NotFound" in out.stderr:
            return None
        raise AssertionError(out.stderr)
    printed: dict[str, Any] = json.loads(out.stdout)
    return printed


def apply(cluster: LocalCluster, namespace: str, manifest: dict[str, Any]) -> None:
    """`kubectl apply -n NAMESPACE` of one object: made in this process when
    it is new (reads.py), by kubectl otherwise."""
    if not reads.reader(cluster).create(manifest, namespace):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def pods_of(cluster: LocalCluster, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    items = get_json(cluster, "pods", "-n", namespace, "-l", f"dlk8s.io/job-name={job}")["items"]
    return {p["metadata"]["name"]: p for p in items}


def finish_pod(cluster: LocalCluster, namespace: str, pod: str, exit_code: int) -> None:
    """Have kwok end the pod's containers with this exit code."""
    wait_until(
        lambda: (
            (get_or_none(cluster, "pod", pod, "-n", namespace) or {}).get("status", {}).get("phase")
            == "Running"
        ),
        what=f"pod {pod} to run",
    )
    cluster.kubectl(
        "annotate",
        "pod",
        pod,
        "-n",
        namespace,
        f"{EXIT_CODE_ANNOTATION}={exit_code}",
        "--overwrite",
    )


def job_status(cluster: LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    job = get_or_none(cluster, kind.lower(), name, "-n", namespace)
    status: dict[str, Any] = (job or {}).get("status") or {}
    return status


def wait_for_state(
    cluster: LocalCluster, namespace: str, kind: str, name: str, state: str, timeout: float = 60
) -> dict[str, Any]:
    return _wait_for_status(cluster, namespace, kind, name, "state", state, timeout)


def wait_for_phase(
    cluster: LocalCluster, namespace: str, kind: str, name: str, phase: str, timeout: float = 60
) -> dict[str, Any]:
    return _wait_for_status(cluster, namespace, kind, name, "phase", phase, timeout)


def _wait_for_status(
    cluster: LocalCluster,
    namespace: str,
    kind: str,
    name: str,
    key: str,
    value: str,
    timeout: float,
) -> dict[str, Any]:
    """The job's status once its `key` is `value`."""
    return wait_until(
        lambda: (s := job_status(cluster, namespace, kind, name)).get(key) == value and s,
        timeout=timeout,
        what=f"{kind} {name} to reach {key} {value}",
    )


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def read(path: Path) -> str:
    return path.read_text()


def wait_for_pods(
    cluster: LocalCluster,
    ns: str,
    job: str,
    names: set[str],
    phase: str = "Running",
    timeout: float = 60,
):
    return wait_until(
        lambda: (
            (pods := pods_of(cluster, ns, job)).keys() == names
            and all(p["status"].get("phase") == phase for p in pods.values())
            and pods
        ),
        timeout=timeout,
        what=f"pods {sorted(names)} {phase}",
    )


def wait_for_replacement(cluster: LocalCluster, ns: str, job: str, pod: str, old_uid: str) -> None:
    def replaced() -> bool:
        found = pods_of(cluster, ns, job).get(pod)
        return bool(found and found["metadata"]["uid"] != old_uid)

    wait_until(replaced, what=f"{pod} to be recreated")


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def container(pod: dict[str, Any], name: str = "tensorflow") -> dict[str, Any]:
    """A container of the pod by name, native sidecars (init containers) included."""
    spec = pod["spec"]
    return next(
        c for c in [*spec["containers"], *spec.get("initContainers", [])] if c["name"] == name
    )


def services_of(cluster: LocalCluster, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    items = get_json(cluster, "services", "-n", namespace, "-l", f"dlk8s.io/job-name={job}")
    return {s["metadata"]["name"]: s for s in items["items"]}


def wait_for_services(
    cluster: LocalCluster, namespace: str, job: str, names: set[str]
) -> dict[str, dict[str, Any]]:
    """The job's Services, once they are these: a replica's Service follows its
    pod's address (reconcile.changes), a moment after the pod runs."""
    return wait_until(
        lambda: (s := services_of(cluster, namespace, job)).keys() == names and s,
        what=f"services {sorted(names)}",
    )


@contextmanager
def temporary_namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace, deleted afterwards without waiting for it to go."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    # In this process, as reads.py reads: two kubectl runs a test add up over the suite.
    kube = reads.reader(cluster).kube
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    try:
        yield name
    finally:
        with suppress(NotFoundError):
            kube.request("DELETE", f"/api/v1/namespaces/{name}")


def job_manifest(
    kind: str, name: str, roles: dict[str, int], container: str, **spec: Any
) -> dict[str, Any]:
    """A job of `kind` with `roles` {role: replicas}, each pod one `container`."""
    type_field = {
        "TFJob": "tfReplicaType",
        "MXJob": "mxReplicaType",
        "PyTorchJob": "pytorchReplicaType",
    }[kind]
    pod = {"containers": [{"name": container, "image": f"{container}:latest"}]}
    # A template of its own per replica: tests change one replica's pods.
    replica_specs = [
        {"replicas": count, type_field: role, "template": {"spec": copy.deepcopy(pod)}}
        for role, count in roles.items()
    ]
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"replicaSpecs": replica_specs, **spec},
    }


# Every CRD the chart ships, by name.
CRDS = (
    "tfjobs.dlk8s.io",
    "mxjobs.dlk8s.io",
    "caffe2jobs.dlk8s.io",
    "paddlejobs.dlk8s.io",
    "pytorchjobs.dlk8s.io",
)


@contextmanager
def without_binding(cluster: LocalCluster, name: str) -> Iterator[None]:
    """A ValidatingAdmissionPolicyBinding of the chart taken away for a
    while, as a cluster admin might, so that what the operator holds on its
    own shows; put back as it was."""
    binding = get_json(cluster, "validatingadmissionpolicybinding", name)
    cluster.kubectl("delete", "validatingadmissionpolicybinding", name)
    try:
        yield
    finally:
        kept = {k: binding["metadata"][k] for k in ("name", "labels", "annotations")}
        binding["metadata"] = {k: v for k, v in kept.items() if v}
        cluster.kubectl("create", "-f", "-", input=json.dumps(binding))


def evict(cluster: LocalCluster, ns: str, pod: str) -> None:
    """POST the pod's eviction subresource, as `kubectl drain` does for each pod."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns},
    }
    path = f"/api/v1/namespaces/{ns}/pods/{pod}/eviction"
    cluster.kubectl("create", "--raw", path, "-f", "-", input=json.dumps(body))
