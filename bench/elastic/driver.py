"""The elastic replay's driver: it submits each job at its arrival time,
plays the trainers and WORKERs (credits their work, ends them once it is
done), and samples the cluster every tick: GPUs held, the checks, why each
waiting job waits and every count the autoscaler writes."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bench.common.devtools import EXIT_CODE_ANNOTATION, LocalCluster
from bench.common.operator import JOB_RESOURCES, Informer, Kube, Selectors, from_list, resource_for
from bench.elastic.causes import idle_gpus, wait_cause
from bench.elastic.manifests import NAMESPACE, manifest
from bench.elastic.podviews import PodView, is_sized, out_of_bounds, overcommitted, pod_view
from bench.elastic.traces import PADDLE, kind_of


@dataclass
class JobRun:
    spec: dict[str, Any]
    submitted: float | None = None
    first_running: float | None = None
    done: float | None = None
    succeeded: float | None = None
    progress: float = 0.0
    finished_pods: set[str] = field(default_factory=set)
    max_trainers_seen: int = 0
    asked: str | None = None  # the last trainer (WORKER) count seen on the job
    waiting: Counter[str] = field(default_factory=Counter)  # cause -> trace seconds


@dataclass(frozen=True)
class Decision:
    """A trainer (WORKER) count written on a job (by the autoscaler), as the job showed it."""

    t: float
    job: str
    old: int | None
    new: int
    reason: str


class Driver:
    def __init__(self, cluster: LocalCluster, trace: dict[str, Any], scale: float) -> None:
        self.kube = Kube(cluster.api_client())
        self.scale = scale
        self.capacity = trace["cluster"]["nodes"] * trace["cluster"]["gpusPerNode"]
        self.jobs = {j["name"]: JobRun(j) for j in trace["jobs"]}
        self.mins = {j["name"]: j["minTrainers"] for j in trace["jobs"]}
        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        self.allocatable = {
            n["metadata"]["name"]: from_list(n["status"].get("allocatable")) for n in nodes
        }
        self.gpus = {name: r.gpu for name, r in self.allocatable.items()}
        # Every pod of the cluster that has not terminated: the overcommit
        # check must count pods of any namespace.
        self.pods = Informer(
            self.kube,
            resource_for("v1", "Pod"),
            None,
            Selectors(field="status.phase!=Succeeded,status.phase!=Failed"),
        )
        kinds = {kind_of(j).name for j in trace["jobs"]}
        self.informers = {
            kind: Informer(self.kube, JOB_RESOURCES[kind], NAMESPACE) for kind in sorted(kinds)
        }
        self.samples: list[tuple[float, int, int, int]] = []  # t, gpus, demand, running jobs
        self.decisions: list[Decision] = []
        self.overcommits: Counter[str] = Counter()
        self.out_of_bounds: Counter[str] = Counter()
        self.ticks = 0
        self.idle: Counter[str] = Counter()  # GPU-seconds idle while saturated, by cause
        self.sample_trainer: str | None = None
        self._views: dict[tuple[str, str], PodView | None] = {}
        self.pool = ThreadPoolExecutor(16)
        self.t0 = 0.0

    def now(self) -> float:
        return (time.monotonic() - self.t0) / self.scale

    def run(self, limit_seconds: float) -> None:
        informers = (self.pods, *self.informers.values())
        for informer in informers:
            informer.start()
        while not all(i.has_synced() for i in informers):
            time.sleep(0.05)
        self.t0 = time.monotonic()
        last = 0.0
        pending = sorted(self.jobs.values(), key=lambda j: j.spec["arrival"])
        while True:
            now = self.now()
            while pending and pending[0].spec["arrival"] <= now:
                job = pending.pop(0)
                job.submitted = now
                self.pool.submit(self._create, manifest(job.spec))
            self._tick(now, now - last)
            last = now
            if all(j.succeeded is not None for j in self.jobs.values()):
                return
            if time.monotonic() - self.t0 > limit_seconds:
                left = [n for n, j in self.jobs.items() if j.succeeded is None]
                print(f"  time limit reached; unfinished: {left}", flush=True)
                return
            time.sleep(0.05)

    def _live_pods(self) -> list[PodView]:
        """The pod cache as views, parsed once per pod version."""
        views, seen = [], set()
        for obj in self.pods.cache.list():
            meta = obj["metadata"]
            key = (meta["uid"], meta.get("resourceVersion", ""))
            seen.add(key)
            if key not in self._views:
                self._views[key] = pod_view(obj)
                self._keep_sample(obj, self._views[key])
            view = self._views[key]
            if view is not None:
                views.append(view)
        for stale in self._views.keys() - seen:
            del self._views[stale]
        return views

    def _keep_sample(self, obj: dict[str, Any], view: PodView | None) -> None:
        """A Running trainer as the API returned it, for the pod-cache memory
        measure (finished pods leave the cache, so take one while it runs)."""
        if (
            self.sample_trainer is None
            and view is not None
            and view.running
            and view.pod.role == PADDLE.role
        ):
            self.sample_trainer = json.dumps(obj)

    def _tick(self, now: float, dt: float) -> None:
        views = self._live_pods()
        by_job: dict[str, list[PodView]] = {}
        for view in views:
            if view.job:
                by_job.setdefault(view.job, []).append(view)
        self._check(views, by_job)
        gpus = demand = active = 0
        for name, job in self.jobs.items():
            mine = by_job.get(name, [])
            per = job.spec["gpusPerTrainer"]
            running = sum(1 for v in mine if is_sized(v) and v.running and not v.pod.terminating)
            gpus += per * running
            if job.submitted is not None and job.done is None:
                demand += per * job.spec["maxTrainers"]
                active += 1
                self._progress(job, now, dt, running, mine, views)
            if job.done is not None:
                self._finish(job, mine)
            self._observe_job(name, job, now)
        self.samples.append((now, gpus, demand, active))
        if demand >= self.capacity:
            self.idle.update(idle_gpus(self.gpus, views, self._growable(by_job), dt))

    def _growable(self, by_job: dict[str, list[PodView]]) -> list[int]:
        """GPUs per trainer (WORKER) of each started job below its maximum."""
        return [
            job.spec["gpusPerTrainer"]
            for name, job in self.jobs.items()
            if job.first_running is not None
            and job.done is None
            and sum(1 for v in by_job.get(name, []) if is_sized(v) and not v.pod.terminating)
            < job.spec["maxTrainers"]
        ]

    def _progress(
        self,
        job: JobRun,
        now: float,
        dt: float,
        running: int,
        mine: list[PodView],
        views: list[PodView],
    ) -> None:
        if running and job.first_running is None:
            job.first_running = now
        if job.first_running is None:
            job.waiting[wait_cause(job.spec, mine, self.gpus, views, self.mins)] += dt
        job.max_trainers_seen = max(job.max_trainers_seen, running)
        job.progress += running * dt
        if job.progress >= job.spec["work"]:
            job.done = now

    def _check(self, views: list[PodView], by_job: dict[str, list[PodView]]) -> None:
        self.ticks += 1
        for problem in overcommitted(self.allocatable, views):
            self.overcommits[problem] += 1
        for name, job in self.jobs.items():
            if job.submitted is None or job.done is not None:
                continue
            members = [v for v in by_job.get(name, []) if is_sized(v)]
            for problem in out_of_bounds(job.spec, self._job(name), members):
                self.out_of_bounds[problem] += 1

    def _observe_job(self, name: str, job: JobRun, now: float) -> None:
        """Record each trainer (WORKER) count written on the job, and check its state."""
        obj = self._job(name)
        if obj is None:
            return
        counts = kind_of(job.spec).counts
        annotations = obj["metadata"].get("annotations") or {}
        asked = annotations.get(counts.count)
        if asked is not None and asked != job.asked:
            old = int(job.asked) if job.asked and job.asked.isdigit() else None
            reason = annotations.get(counts.reason, "").partition(": ")[2]
            self.decisions.append(Decision(round(now, 1), name, old, int(asked), reason))
            job.asked = asked
        state = obj.get("status", {}).get("state")
        if job.succeeded is None and state == "Succeeded":
            job.succeeded = now
        elif state == "Failed":
            raise RuntimeError(f"{name} failed: {obj}")

    def _job(self, name: str) -> dict[str, Any] | None:
        informer = self.informers[kind_of(self.jobs[name].spec).name]
        found: dict[str, Any] | None = informer.cache.get_by_key(f"{NAMESPACE}/{name}")
        return found

    def _finish(self, job: JobRun, mine: list[PodView]) -> None:
        """The work is done: every trainer or WORKER (and any that starts late) exits 0."""
        for view in mine:
            key = f"{view.pod.name}/{view.uid}"
            if not is_sized(view) or view.pod.terminating or key in job.finished_pods:
                continue
            job.finished_pods.add(key)
            patch = {"metadata": {"uid": view.uid, "annotations": {EXIT_CODE_ANNOTATION: "0"}}}
            self.pool.submit(self._patch, view.pod.name, patch)

    def _create(self, obj: dict[str, Any]) -> None:
        try:
            self.kube.create(obj)
        except Exception as err:
            print(f"  create {obj['metadata']['name']}: {err}", file=sys.stderr)

    def _patch(self, name: str, patch: dict[str, Any]) -> None:
        try:
            self.kube.patch("v1", "Pod", NAMESPACE, name, patch)
        except Exception as err:  # gone already: fine
            print(f"  patch {name}: {err}", file=sys.stderr)

    def stop(self) -> None:
        for informer in (self.pods, *self.informers.values()):
            informer.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
