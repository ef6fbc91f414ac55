"""What the modules that train on the real node share: a recorder of what
each pod printed and how it ended, the examples as kustomize builds them for
the local images, the operator as a local process on a namespace of the real
node, and waiting for a job to end."""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, watch

from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

from .helpers import get_json, job_status, wait_until

# How long a job that trains on the real node may take to end.
JOB_TIMEOUT = 300


# -- what the pods said and how they ended, as it happened -------------------------


@dataclass
class PodRecord:
    name: str
    uid: str
    log: list[str] = field(default_factory=list)
    exit_code: int | None = None
    following: bool = False


class Recorder:
    """Every pod of a namespace, by uid: its `tensorflow` (or `container`)
    log, followed from the start (pods that cleanPodPolicy deletes, or that
    the operator replaces, take their logs with them) and its exit code. One
    watch, one log stream per pod; no polling."""

    def __init__(
        self, cluster: LocalCluster, namespace: str, container: str = "tensorflow"
    ) -> None:
        self.api = client.CoreV1Api(cluster.api_client())
        self.namespace = namespace
        # The container of the job's kind whose log and exit code count.
        self.container = container
        self.pods: dict[str, PodRecord] = {}
        self._lock = threading.Lock()
        self._watch = watch.Watch()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                stream = self._watch.stream(
                    self.api.list_namespaced_pod, self.namespace, timeout_seconds=60
                )
                for event in stream:
                    self._saw(event["object"])
            except Exception:  # a dropped watch: list and watch again
                time.sleep(0.5)

    def _saw(self, pod: client.V1Pod) -> None:
        uid, status = pod.metadata.uid, pod.status
        if not any(c.name == self.container for c in pod.spec.containers):
            return  # e.g. TensorBoard's
        with self._lock:
            record = self.pods.setdefault(uid, PodRecord(pod.metadata.name, uid))
            for state in status.container_statuses or []:
                if state.name == self.container and state.state and state.state.terminated:
                    record.exit_code = state.state.terminated.exit_code
            start = not record.following and status.phase in ("Running", "Succeeded", "Failed")
            record.following |= start
        if start:
            threading.Thread(target=self._follow, args=(record,), daemon=True).start()

    def _follow(self, record: PodRecord) -> None:
        try:
            response = self.api.read_namespaced_pod_log(
                record.name, self.namespace, container=self.container, follow=True,
                _preload_content=False,
            )  # fmt: skip
            for line in response:
                with self._lock:
                    record.log.append(line.decode(errors="replace").rstrip("\n"))
        except Exception as err:  # the pod went away: what we have is its log
            record.log.append(f"[recorder: log stream ended: {err}]")

    def of(self, pod: str) -> list[PodRecord]:
        """The records of every pod that had this name, oldest first."""
        with self._lock:
            return [copy.deepcopy(r) for r in self.pods.values() if r.name == pod]

    def log(self, pod: str) -> str:
        return "\n".join(line for r in self.of(pod) for line in r.log)

    def dump(self, job: str) -> str:
        """Every pod of the job: name, uid, exit code and the log's tail."""
        with self._lock:
            records = [copy.deepcopy(r) for r in self.pods.values()]
        return "\n".join(
            f"--- {r.name} {r.uid} exit {r.exit_code}\n" + "\n".join(r.log[-40:])
            for r in records
            if r.name.startswith(f"{job}-")
        )

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()


def kustomized(cluster: LocalCluster, example: str) -> list[dict[str, Any]]:
    """What `kubectl apply -k examples/local/<example>` would apply: the
    example with the local runtime image."""
    out = cluster.kubectl("kustomize", str(REPO_ROOT / "examples" / "local" / example)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def the_job(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [job] = [d for d in docs if d["kind"] == "TFJob"]
    return job


def replica(job: dict[str, Any], role: str) -> dict[str, Any]:
    [spec] = [r for r in job["spec"]["replicaSpecs"] if r["tfReplicaType"] == role]
    return spec


def without(job: dict[str, Any], role: str) -> None:
    job["spec"]["replicaSpecs"] = [
        r for r in job["spec"]["replicaSpecs"] if r["tfReplicaType"] != role
    ]


@dataclass
class Lab:
    cluster: LocalCluster
    namespace: str
    recorder: Recorder
    operator: OperatorProcess


def with_program(docs: list[dict[str, Any]], name: str, program: Path) -> list[dict[str, Any]]:
    """An example's job and its program's ConfigMap, renamed `name`, every
    replica running `python <program>` (from a ConfigMap of its own) instead
    of the example's program."""
    [code] = [copy.deepcopy(d) for d in docs if d["kind"] == "ConfigMap"]
    [job] = [copy.deepcopy(d) for d in docs if d["kind"] != "ConfigMap"]
    code["metadata"]["name"] = f"{name}-code"
    code["data"] = {program.name: program.read_text()}
    job["metadata"]["name"] = name
    for entry in job["spec"]["replicaSpecs"]:
        pod = entry.get("template", {}).get("spec")
        if pod is None:
            continue
        pod["containers"][0]["command"] = ["python", f"/code/{program.name}"]
        pod["containers"][0]["args"] = []
        for volume in pod["volumes"]:
            if "configMap" in volume:
                volume["configMap"]["name"] = code["metadata"]["name"]
    return [code, job]


# The chart's value that gives every job its NetworkPolicy: the jobs on the
# real node train with their network closed to all but their own pods.
POLICIES = "networkPolicy.enabled=true"


@contextlib.contextmanager
def local_operator(
    real_cluster: LocalCluster, release: str, sets: tuple[str, ...], autoscaler: bool = False
) -> Iterator[OperatorProcess]:
    """The chart (release namespace on kwok's nodes, where its Deployment
    runs nothing) and the operator as a local process with its ServiceAccount,
    watching only a namespace of its own on the real node; with `autoscaler`,
    its autoscaler passes every second. Every job gets its NetworkPolicy,
    which the real node enforces (POLICIES), as values/realnode.yaml has it."""
    assert real_cluster.node is not None
    suffix = uuid.uuid4().hex[:8]
    release_ns, namespace = f"{release}-system-{suffix}", f"{release}-{suffix}"
    process: OperatorProcess | None = None
    try:
        install = install_chart(
            real_cluster, release=release, namespace=release_ns, sets=(*sets, POLICIES)
        )
        real_cluster.node.real_namespace(real_cluster, namespace)
        process = OperatorProcess(
            install,
            name=release,
            args=() if autoscaler else ("--no-autoscaler",),
            env={"DLK8S_NAMESPACE": namespace, "DLK8S_AUTOSCALER_PERIOD": "1"},
        ).start()
        yield process
    finally:
        if process is not None:
            process.stop()
        real_cluster.helm("uninstall", release, "-n", release_ns, check=False)
        for ns in (namespace, release_ns):
            real_cluster.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")


def finished(lab: Lab, job: str, phase: str = "Done", kind: str = "TFJob") -> dict[str, Any]:
    """The job's status once it ended, which must be in `phase`; if not, or
    if it never ends, the assertion shows the status and what each of its
    pods printed."""
    try:
        status = wait_until(
            lambda: (
                (s := job_status(lab.cluster, lab.namespace, kind, job)).get("phase")
                in ("Done", "Failed")
                and s
            ),
            timeout=JOB_TIMEOUT,
            what=f"{kind} {job} to end",
        )
    except AssertionError as hung:
        status = job_status(lab.cluster, lab.namespace, kind, job)
        raise AssertionError(
            f"{hung}\n{json.dumps(status, indent=1)}\n{lab.recorder.dump(job)}"
        ) from None
    assert status["phase"] == phase, f"{json.dumps(status, indent=1)}\n{lab.recorder.dump(job)}"
    return status


def real_namespace(cluster: LocalCluster, name: str) -> str:
    assert cluster.node is not None
    return cluster.node.real_namespace(cluster, name)


def delete_namespaces(cluster: LocalCluster, *names: str) -> None:
    for name in names:
        cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


def milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def free_cpu(cluster: LocalCluster) -> int:
    """The real node's allocatable CPU less what the pods bound there ask for
    (terminating ones too: the scheduler counts them until they are gone)."""
    assert cluster.node is not None
    node = get_json(cluster, "node", cluster.node.name)
    pods = get_json(cluster, "pods", "-A", "--field-selector", f"spec.nodeName={cluster.node.name}")
    asked = sum(
        milli(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
        for p in pods["items"]
        if p["status"].get("phase") not in ("Succeeded", "Failed")
        for c in p["spec"]["containers"]
    )
    return milli(node["status"]["allocatable"]["cpu"]) - asked
