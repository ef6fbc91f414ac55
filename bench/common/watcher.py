"""The benchmarks' watcher: a separate process that watches one namespace's
pods, services and TFJobs (dlk8s's, or with ``KUBEFLOW_TFJOBS``
training-operator's, or with ``trainjob_kind`` Kubeflow Trainer's TrainJobs)
and records when each event arrived (its own receipt
time on the system-wide monotonic clock; creationTimestamp has only 1 s
resolution). A process of its own, so it never competes for the GIL with
the creator it measures.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time
from collections import Counter
from dataclasses import dataclass, fields
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from bench.common.api import Api, Endpoint

JOB_LABEL = "dlk8s.io/job-name"
ROLE_LABEL = "dlk8s.io/replica-type"


@dataclass(frozen=True)
class JobKind:
    """Where the TFJobs are, how their pods and Services name them, and
    whether their phase comes from their conditions (training-operator's
    jobs have no phase: their Running condition turns True once the Chief
    runs) or, for TrainJobs, from their JobSet's status (`replicated_jobs`
    of them, each ready)."""

    path: str
    job_label: str
    role_label: str
    conditions: bool = False
    replicated_jobs: int = 0


DLK8S_TFJOBS = JobKind("/apis/dlk8s.io/v1alpha1/namespaces/{ns}/tfjobs", JOB_LABEL, ROLE_LABEL)
KUBEFLOW_TFJOBS = JobKind(
    "/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs",
    "training.kubeflow.org/job-name",
    "training.kubeflow.org/replica-type",
    conditions=True,
)


def trainjob_kind(replicated_jobs: int) -> JobKind:
    """Kubeflow Trainer's TrainJobs, whose runtime has `replicated_jobs`
    replicated Jobs: their pods carry their JobSet's labels (the JobSet has
    the TrainJob's name)."""
    return JobKind(
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
        "jobset.sigs.k8s.io/jobset-name",
        "jobset.sigs.k8s.io/replicatedjob-name",
        replicated_jobs=replicated_jobs,
    )


WATCHED = {
    "pods": "/api/v1/namespaces/{ns}/pods",
    "services": "/api/v1/namespaces/{ns}/services",
    # kube-controller-manager's Endpoints of those Services: whether each
    # was made with its pod's address or updated to it (servercosts).
    "endpoints": "/api/v1/namespaces/{ns}/endpoints",
    "tfjobs": DLK8S_TFJOBS.path,
}
# Watched too with Watcher(workloads=True): the jobs' Kueue Workloads.
WORKLOADS = {"workloads": "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"}


@dataclass
class Progress:
    """Counters the watcher keeps up to date for the driving process."""

    pods_added: Synchronized[int]
    pods_running: Synchronized[int]
    services_added: Synchronized[int]
    jobs_running: Synchronized[int]  # status.phase Running
    jobs_finished: Synchronized[int]  # status.phase Done or Failed
    pods_gone: Synchronized[int]
    jobs_running_now: Synchronized[int]  # status.phase Running at present
    pods_finished: Synchronized[int]  # status.phase Succeeded or Failed
    jobs_succeeded: Synchronized[int]  # status.state Succeeded
    jobs_modified: Synchronized[int]  # MODIFIED events of TFJobs (a status write shows here)
    workloads_admitted: Synchronized[int]  # Workloads seen Admitted at least once
    workloads_finished: Synchronized[int]  # Workloads seen Finished
    endpoints_addressed: Synchronized[int]  # Endpoints seen holding an address


class Watcher:
    """Start before submitting; ``stop()`` returns what it recorded.
    `workloads`: Kueue's Workloads too (the cluster must serve their API);
    `jobs`: which TFJobs."""

    def __init__(
        self,
        endpoint: Endpoint,
        namespace: str,
        out: Path,
        workloads: bool = False,
        jobs: JobKind = DLK8S_TFJOBS,
    ) -> None:
        ctx = mp.get_context("spawn")
        self.out = out
        watched = WATCHED | {"tfjobs": jobs.path} | (WORKLOADS if workloads else {})
        self.progress = Progress(*(ctx.Value("i", 0) for _ in fields(Progress)))
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._proc: Any = ctx.Process(
            target=_watch_main,
            args=(
                endpoint,
                namespace,
                str(out),
                self.progress,
                self._ready,
                self._stop,
                watched,
                jobs,
            ),
            name=f"watch-{namespace}",
            daemon=True,
        )

    def start(self, timeout: float = 60) -> Watcher:
        self._proc.start()
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.2):
            if not self._proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("watcher did not start")
        return self

    @property
    def pid(self) -> int:
        return int(self._proc.pid)

    def value(self, name: str) -> int:
        return int(getattr(self.progress, name).value)

    def wait(self, name: str, target: int, timeout: float, step: float = 0.05) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.value(name) >= target:
                return True
            time.sleep(step)
        return False

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._proc.join(60)
        if self._proc.is_alive():
            self._proc.kill()
            raise RuntimeError("watcher did not stop")
        data: dict[str, Any] = json.loads(self.out.read_text())
        return data


def _watch_main(
    endpoint: Endpoint,
    namespace: str,
    out: str,
    progress: Progress,
    ready: Any,
    stop: Any,
    watched: dict[str, str] = WATCHED,
    jobs: JobKind = DLK8S_TFJOBS,
) -> None:
    api = Api(endpoint, maxsize=8)
    lock = threading.Lock()
    # pods: name -> {job, role, added, running, finished, phase, gone};
    # services: name -> {job, added}; tfjobs: name -> {added, running,
    # finished, succeeded, phase}; workloads: name -> {job, added, admitted,
    # admitted_rv, admissions, finished}
    seen: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in watched}
    events: Counter[str] = Counter()
    started = []
    for kind, template in watched.items():
        path = template.format(ns=namespace)
        rv = api.json("GET", path)["metadata"]["resourceVersion"]
        thread = threading.Thread(
            target=_watch_loop,
            args=(api, kind, path, rv, seen[kind], events, lock, progress, jobs),
            daemon=True,
        )
        thread.start()
        started.append(thread)
    ready.set()
    stop.wait()
    with lock:
        Path(out).write_text(json.dumps({"seen": seen, "events": events}))


def _watch_loop(
    api: Api,
    kind: str,
    path: str,
    rv: str,
    seen: dict[str, dict[str, Any]],
    events: Counter[str],
    lock: threading.Lock,
    progress: Progress,
    jobs: JobKind,
) -> None:
    while True:
        resp = api.stream(f"{path}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}")
        buffer = b""
        for chunk in resp.stream(65536, decode_content=False):
            now = time.monotonic()
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                with lock:
                    events[f"{kind} {event.get('type')}"] += 1
                    _record(kind, event.get("type", ""), obj, now, seen, progress, jobs)
        resp.release_conn()


def _record(
    kind: str,
    type_: str,
    obj: dict[str, Any],
    now: float,
    seen: dict[str, dict[str, Any]],
    progress: Progress,
    jobs: JobKind = DLK8S_TFJOBS,
) -> None:
    if type_ not in ("ADDED", "MODIFIED", "DELETED"):
        return
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    entry = seen.get(name)
    if entry is None:
        labels = meta.get("labels") or {}
        job = labels.get(jobs.job_label)
        if job is None and kind == "workloads":
            # Kueue's own Workloads (a TrainJob's) name their job as owner.
            owners = meta.get("ownerReferences") or [{}]
            job = owners[0].get("name")
        entry = seen[name] = {"added": now, "job": job}
        if kind == "pods":
            entry["role"] = labels.get(jobs.role_label)
            # Its creation's place in etcd's order, to compare with a Workload's admission.
            entry["rv"] = int(meta.get("resourceVersion") or 0)
            progress.pods_added.value += 1
        elif kind == "services":
            progress.services_added.value += 1
    if type_ == "DELETED" and kind == "pods" and "gone" not in entry:
        entry["gone"] = now
        progress.pods_gone.value += 1
    status = obj.get("status") or {}
    if kind == "tfjobs" and jobs.replicated_jobs:
        status = status_of_trainjob(status, jobs.replicated_jobs)
    elif kind == "tfjobs" and jobs.conditions:
        status = status_of_conditions(status)
    if kind == "pods":
        _record_pod(entry, status.get("phase"), now, progress)
    if kind == "endpoints":
        _record_endpoints(entry, type_, bool(obj.get("subsets")), now, progress)
    if kind == "workloads":
        _record_workload(entry, status, int(meta.get("resourceVersion") or 0), now, progress)
    if kind == "tfjobs":
        _record_tfjob(entry, type_, status, now, progress, jobs)


def _record_endpoints(
    entry: dict[str, Any], type_: str, addressed: bool, now: float, progress: Progress
) -> None:
    """Whether the Endpoints were made with their pod's address or updated to
    it, and when they were first seen holding it."""
    if type_ == "ADDED":
        entry["addressed_when_made"] = addressed
    elif type_ == "MODIFIED":
        entry["updates"] = entry.get("updates", 0) + 1
    if addressed and "addressed" not in entry:
        entry["addressed"] = now
        progress.endpoints_addressed.value += 1


def _record_tfjob(
    entry: dict[str, Any],
    type_: str,
    status: dict[str, Any],
    now: float,
    progress: Progress,
    jobs: JobKind,
) -> None:
    """Every status the job showed, and when it was first seen Running,
    Succeeded and finished; how many jobs run at present."""
    if type_ == "MODIFIED":
        progress.jobs_modified.value += 1
    if not jobs.conditions and type_ != "DELETED":
        # Every status the job showed, for what each write changed
        # (servercosts.status_changes).
        statuses = entry.setdefault("statuses", [])
        if not statuses or statuses[-1] != status:
            statuses.append(status)
    if status.get("state") == "Succeeded" and "succeeded" not in entry:
        entry["succeeded"] = now
        progress.jobs_succeeded.value += 1
    phase = status.get("phase")
    if type_ == "DELETED":
        phase = None
    if entry.get("phase") == "Running" and phase != "Running":
        progress.jobs_running_now.value -= 1
    elif entry.get("phase") != "Running" and phase == "Running":
        progress.jobs_running_now.value += 1
    entry["phase"] = phase
    if phase == "Running" and "running" not in entry:
        entry["running"] = now
        progress.jobs_running.value += 1
    if phase in ("Done", "Failed") and "finished" not in entry:
        entry["finished"] = now
        progress.jobs_finished.value += 1


def status_of_conditions(status: dict[str, Any]) -> dict[str, Any]:
    """A training-operator job's status in dlk8s's terms (phase, state),
    from its conditions: Failed, then Succeeded, then Running decide."""
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    for condition, phase, state in (
        ("Failed", "Failed", "Failed"),
        ("Succeeded", "Done", "Succeeded"),
        ("Running", "Running", "Running"),
    ):
        if condition in true:
            return {"phase": phase, "state": state}
    return {"phase": "Creating" if true else None}


def status_of_trainjob(status: dict[str, Any], replicated_jobs: int) -> dict[str, Any]:
    """A TrainJob's status in dlk8s's terms: Failed or Complete decide (its
    JobSet's conditions, copied); Running once its JobSet's status (which
    Trainer copies into ``jobsStatus``) shows all `replicated_jobs`
    replicated Jobs ready, every one of their Jobs' pods ready or done."""
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    if "Failed" in true:
        return {"phase": "Failed", "state": "Failed"}
    if "Complete" in true:
        return {"phase": "Done", "state": "Succeeded"}
    jobs = status.get("jobsStatus") or []
    ready = [j for j in jobs if (j.get("ready") or 0) + (j.get("succeeded") or 0) >= 1]
    if len(jobs) >= replicated_jobs and len(ready) == len(jobs):
        return {"phase": "Running", "state": "Running"}
    return {"phase": "Creating" if status else None}


def _record_pod(entry: dict[str, Any], phase: str | None, now: float, progress: Progress) -> None:
    """When the pod was first seen Running, and first seen finished."""
    entry["phase"] = phase
    if phase == "Running" and "running" not in entry:
        entry["running"] = now
        progress.pods_running.value += 1
    if phase in ("Succeeded", "Failed") and "finished" not in entry:
        entry["finished"] = now
        progress.pods_finished.value += 1


def _record_workload(
    entry: dict[str, Any], status: dict[str, Any], rv: int, now: float, progress: Progress
) -> None:
    """When the Workload was first seen Admitted (and at which resourceVersion),
    how often it became Admitted, and when it was first seen Finished."""
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    admitted = "Admitted" in true
    if admitted and not entry.get("admitted_now"):
        entry["admissions"] = entry.get("admissions", 0) + 1
        if "admitted" not in entry:
            entry["admitted"], entry["admitted_rv"] = now, rv
            progress.workloads_admitted.value += 1
    entry["admitted_now"] = admitted
    if "Finished" in true and "finished" not in entry:
        entry["finished"] = now
        progress.workloads_finished.value += 1
