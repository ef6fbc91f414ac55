"""Elastic PyTorchJobs and PaddleJobs with and without the autoscaler, replayed on kwok.

    make bench-elastic                                   # every trace, both modes
    make bench-elastic ELASTIC_ARGS="--trace heavy"      # one trace
    make bench-elastic ELASTIC_ARGS="--replays 1"        # one replay of each trace
    make bench-elastic ELASTIC_ARGS="--paddle-only"      # every job a PaddleJob
    .tools/venv/bin/python bench/elastic.py generate     # rewrite the traces (deterministic)
    .tools/venv/bin/python bench/elastic.py report       # tables and plots from elastic.json

The traces (bench/elastic-trace*.json) list elastic jobs: arrival time,
minInstance / maxInstance trainers, GPUs per trainer, and the work to do in
trainer-seconds. They come from one generator and one seed, so they hold the
same 36 jobs and differ only in when the jobs arrive:

- committed: Poisson arrivals, a mean gap of 60 s (bench/elastic-trace.json);
- heavy: the same arrivals 1.5x as often (a mean gap of 40 s);
- burst: the committed trace with a third of the jobs (the 13th to the
  24th) arriving within one minute; the others keep their times.

The heavy trace is replayed three times in both modes (its targets are the
median of three ratios to static: bench/elastic_traces.py), the others once.

Every other job of a trace (job-01, job-03, ...) is replayed as an elastic
PyTorchJob, the others as PaddleJobs, as bench/elastic_model.py's mixed
replays do: one plan sizes both kinds. A PaddleJob has minInstance /
maxInstance trainers (plus its pserver and master); a PyTorchJob has no
MASTER and one WORKER entry whose elasticPolicy minReplicas / maxReplicas are
the trace's bounds (replicas: the minimum), each WORKER asking what a
trainer asks. --paddle-only replays every job as a PaddleJob.

Each mode of each trace gets a fresh local control plane of 8 kwok nodes
with 8 GPUs each, the chart installed, and the operator running as a local
process with the chart's ServiceAccount:

- autoscaler: the operator as shipped (autoscaler on);
- static: the same operator with --no-autoscaler, so every job keeps its
  minimum: minInstance trainers, minReplicas WORKERs (EDL without its
  controller).

The driver submits each job at its arrival time and plays the trainers and
WORKERs alike: it watches the pods, credits every job with one
trainer-second of work per second for each of its trainers (WORKERs) that is
Running, and once the work is done annotates them with
kwok.dlk8s.io/exit-code=0 so kwok ends them and the operator sees the job
succeed (a PyTorchJob without a MASTER succeeds when every WORKER has). The
driver does not model torchrun's new rendezvous after each change of a
PyTorchJob's count (the model does): a WORKER works from the moment it runs.
Time is compressed (one trace second = --scale wall seconds), the cluster,
the scheduler and the operator are not: their reaction times are real
wall-clock time and so weigh 1/scale times more in trace time than they
would in a real cluster. The one exception is kube-scheduler's back-off
before it retries a pod that did not fit: its longest (10 s by default) is
compressed with the trace, to the 1 s its config allows at the default
scale, for both modes alike; left at 10 s it would leave a pod pending up
to 125 trace seconds after its room appeared.

Measured per job: wait (submission to the first Running trainer or
WORKER) and completion time (submission to the work done); per run: the GPUs
held by Running trainers and WORKERs over time. Utilization is reported over
the whole run and over the window in which the jobs present could use the
whole cluster (the sum of their maximum x GPUs is at least the cluster's
GPUs); the target applies to the latter: when demand is below capacity, idle
GPUs are nobody's fault.

The sampler checks on every tick (every 50 ms of wall time) that no node
has more requested than it has (every pod of the cluster counts), that
every job's count (dlk8s.io/trainers and status.trainers of a PaddleJob,
dlk8s.io/workers and status.workers of a PyTorchJob) stays within its
bounds, that no job has more live trainers (WORKERs) than its maximum, and
that none below its minimum is ever deleted.

It also records why each waiting job waits, tick by tick (see wait_cause),
and every count (trainers, WORKERs) the autoscaler writes, with its reason: the
replay's own account of where waiting time goes.

Results: bench/results/elastic.{json,md} and elastic-<trace>.png (--out puts
them elsewhere; bench/elastic_report.py writes them); operator logs and the
unthinned samples under <out>/raw/elastic/ (not committed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import shutil
import statistics
import sys
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_report import RESULTS, RESULTS_JSON, median_replay, write_report
from elastic_traces import (
    IDLE_CAUSES,
    KINDS,
    PADDLE,
    PYTORCH,
    SIZED_ROLES,
    TRACES,
    WAIT_CAUSES,
    assign_kinds,
    kind_of,
    write_traces,
)

from dlk8s.autoscaler.cluster import Pod
from dlk8s.autoscaler.manifests import pod_from_manifest
from dlk8s.job.computeresources import Resources, from_list
from dlk8s.job.vocabulary import API_VERSION
from dlk8s.runtime.apiresources import JOB_RESOURCES, resource_for
from dlk8s.runtime.client import Kube, Selectors
from dlk8s.runtime.informer import Informer
from dlk8s_dev.localcluster import EXIT_CODE_ANNOTATION, LocalCluster, NodeSpec
from dlk8s_dev.localdeploy import OperatorProcess, install_chart
from dlk8s_dev.stopping import interrupt_on_termination

RAW = RESULTS / "raw" / "elastic"
NAMESPACE = "elastic-bench"
GIB = 2**30
DEFAULT_SCALE = 0.08  # wall seconds per trace second: a replay of both modes in about 12 minutes
# Trace seconds a job that cannot be placed waits before a node is kept for
# it (--autoscaler-reserve-after, scaled). The operator's default (600 s)
# suits jobs of hours; the traces' jobs run for a few thousand trace
# seconds. Autoscaler-only replays of the heavy trace while this was
# chosen: at 200, mean wait 135.6 and 152.6, max 917.5 and 882.3 (nodes
# kept for many jobs hold newcomers back); at 450, mean 121.1, max 661.8.
# With every other job a PyTorchJob (2026-11-26, three replays each, as
# shares of static's): at 450, mean 0.68, 0.71, 0.69 and max 0.56, 0.55,
# 0.56; at 700, mean 0.76, 0.67, 0.63 and max 0.61, 0.67, 0.70.
DEFAULT_RESERVE_AFTER = 450.0
# kube-scheduler's default podMaxBackoffSeconds (see scheduler_backoff).
SCHEDULER_MAX_BACKOFF = 10


def manifest(job: dict[str, Any]) -> dict[str, Any]:
    return pytorchjob(job) if kind_of(job) is PYTORCH else paddlejob(job)


def member_resources(gpus: int) -> dict[str, Any]:
    """What a trainer or a WORKER asks for: CPU and memory in step with its GPUs."""
    return {
        "requests": {"cpu": str(2 * gpus), "memory": f"{8 * gpus}Gi"},
        "limits": {"nvidia.com/gpu": gpus},
    }


def paddlejob(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "PaddleJob",
        "metadata": {"name": job["name"], "namespace": NAMESPACE},
        "spec": {
            "image": "paddlepaddle/paddlecloud-job",
            "faultTolerant": True,
            "trainer": {
                "entrypoint": "python train.py",
                "workspace": "/workspace",
                "minInstance": job["minTrainers"],
                "maxInstance": job["maxTrainers"],
                "resources": member_resources(job["gpusPerTrainer"]),
            },
            "pserver": {
                "minInstance": 1,
                "maxInstance": 1,
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
            },
            "master": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        },
    }


def pytorchjob(job: dict[str, Any]) -> dict[str, Any]:
    """WORKERs only (WORKER 0's agent hosts the rendezvous), started at the minimum."""
    container = {
        "name": "pytorch",
        "image": "pytorch/pytorch",
        "command": ["torchrun", "train.py"],
        "resources": member_resources(job["gpusPerTrainer"]),
    }
    return {
        "apiVersion": API_VERSION,
        "kind": PYTORCH.name,
        "metadata": {"name": job["name"], "namespace": NAMESPACE},
        "spec": {
            "elasticPolicy": {
                "minReplicas": job["minTrainers"],
                "maxReplicas": job["maxTrainers"],
            },
            "replicaSpecs": [
                {
                    "pytorchReplicaType": "WORKER",
                    "replicas": job["minTrainers"],
                    "template": {"spec": {"containers": [container]}},
                }
            ],
        },
    }


# --- what the sampler sees ---------------------------------------------------------------------


@dataclass(frozen=True)
class PodView:
    """A pod that has not terminated, as the sampler needs it."""

    pod: Pod  # node, requests, terminating, role, index
    uid: str
    job: str  # the bench job it belongs to ("" for any other pod)
    running: bool


def pod_view(obj: dict[str, Any]) -> PodView | None:
    pod = pod_from_manifest(obj)
    if pod is None:
        return None
    labels = obj["metadata"].get("labels") or {}
    job = labels.get("dlk8s.io/job-name", "") if pod.namespace == NAMESPACE else ""
    running = obj.get("status", {}).get("phase") == "Running"
    return PodView(pod, obj["metadata"].get("uid", ""), job, running)


def is_sized(view: PodView) -> bool:
    """A trainer of a PaddleJob or a WORKER of a PyTorchJob."""
    return view.pod.role in SIZED_ROLES


def overcommitted(allocatable: Mapping[str, Resources], pods: Iterable[PodView]) -> list[str]:
    """Nodes whose bound pods (terminating ones too: they still hold their
    room) request more than the node has."""
    used = dict.fromkeys(allocatable, Resources())
    for view in pods:
        if view.pod.node in used:
            used[view.pod.node] = used[view.pod.node] + view.pod.requests
    return [
        f"{name}: {used[name]} requested of {total}"
        for name, total in allocatable.items()
        if not used[name].fits_in(total)
    ]


def out_of_bounds(
    spec: Mapping[str, Any], obj: Mapping[str, Any] | None, members: Sequence[PodView]
) -> list[str]:
    """What of one job is outside its bounds right now (a PaddleJob's
    [minInstance, maxInstance] trainers, a PyTorchJob's [minReplicas,
    maxReplicas] WORKERs); `members`: its sized pods."""
    low, high, name = spec["minTrainers"], spec["maxTrainers"], spec["name"]
    kind = kind_of(spec)
    noun, (low_name, high_name) = kind.counts.noun, kind.bounds
    found = []
    meta, status = (obj or {}).get("metadata", {}), (obj or {}).get("status", {})
    asked = (meta.get("annotations") or {}).get(kind.counts.count)
    if asked is not None and not (asked.isdigit() and low <= int(asked) <= high):
        found.append(f"{name}: asked for {asked} {noun}, bounds [{low}, {high}]")
    count = status.get(noun)
    if count is not None and not low <= count <= high:
        found.append(f"{name}: status.{noun} {count}, bounds [{low}, {high}]")
    live = [v for v in members if not v.pod.terminating]
    if len(live) > high:
        found.append(f"{name}: {len(live)} live {noun}, {high_name} {high}")
    below = sorted(v.pod.index for v in members if v.pod.terminating and v.pod.index < low)
    if below:
        found.append(f"{name}: {kind.role}(s) {below} below {low_name} {low} deleted")
    return found


# --- why a job waits ---------------------------------------------------------------------------


def wait_cause(
    spec: Mapping[str, Any],
    mine: Sequence[PodView],
    gpus: Mapping[str, int],
    pods: Sequence[PodView],
    bounds: Mapping[str, int],
) -> str:
    """Why `spec`'s job has no trainer (WORKER) running, from the GPUs alone
    (the bench's trainers and WORKERs ask 2 CPUs and 8 GiB per GPU: GPUs run
    out first).

    `gpus`: each node's allocatable GPUs; `pods`: every live pod of the
    cluster; `bounds`: each job's minInstance."""
    per, low = spec["gpusPerTrainer"], spec["minTrainers"]
    live = [v for v in mine if is_sized(v) and not v.pod.terminating and v.pod.index < low]
    if len(live) < low:
        return "no pods yet"
    need = [per] * sum(1 for v in live if not v.pod.node)
    free, freeing, above = dict(gpus), Counter[str](), Counter[str]()
    for view in pods:
        node = view.pod.node
        if node not in free:
            continue
        free[node] -= view.pod.requests.gpu
        if view.pod.terminating:
            freeing[node] += view.pod.requests.gpu
        elif is_sized(view) and view.job and view.pod.index >= bounds.get(view.job, 1 << 30):
            above[node] += view.pod.requests.gpu
    if fits(need, free):
        return "room free"
    with_freed = {n: free[n] + freeing[n] for n in free}
    if fits(need, with_freed):
        return "room being freed"
    reclaimable = {n: with_freed[n] + above[n] for n in free}
    if fits(need, reclaimable):
        return "held above minimum"
    if sum(reclaimable.values()) >= sum(need):
        return "fragmented"
    return "full at minimums"


def fits(need: Sequence[int], room: Mapping[str, int]) -> bool:
    """First fit, largest first, of the needs into the rooms (GPUs)."""
    left = dict(room)
    for amount in sorted(need, reverse=True):
        node = next((n for n, r in sorted(left.items()) if r >= amount), None)
        if node is None:
            return False
        left[node] -= amount
    return True


def idle_gpus(
    gpus: Mapping[str, int], pods: Sequence[PodView], growable: Sequence[int], dt: float
) -> Counter[str]:
    """GPU-seconds of one tick in which GPUs run no trainer, by cause."""
    free, idle = dict(gpus), Counter[str]()
    for view in pods:
        if view.pod.node in free:
            free[view.pod.node] -= view.pod.requests.gpu
            if not view.running or view.pod.terminating:
                idle["not running"] += view.pod.requests.gpu * dt
    spare = sum(max(0, f) for f in free.values())
    if spare <= 0:
        return idle
    pending = [v.pod.requests.gpu for v in pods if not v.pod.node and v.pod.requests.gpu]
    if any(fits([g], free) for g in pending):
        idle["pending pods"] += spare * dt
    elif any(fits([g], free) for g in growable):
        idle["growth"] += spare * dt
    else:
        idle["fragments"] += spare * dt
    return idle


# --- the driver ----------------------------------------------------------------------------------


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


# --- one mode -------------------------------------------------------------------------------


def scheduler_backoff(scale: float) -> int:
    """kube-scheduler's longest back-off, in wall seconds, for a replay at
    `scale`: its default 10 s compressed like the trace, but whole seconds
    and at least 1 (what its config accepts), so both modes see a pod that
    did not fit retried about as soon, in trace time, as on a real cluster."""
    return max(1, math.ceil(SCHEDULER_MAX_BACKOFF * scale))


def run_mode(
    mode: str, trace: dict[str, Any], args: argparse.Namespace, raw: Path, memory: bool
) -> dict[str, Any]:
    scale, limit = args.scale, args.limit
    spec = trace["cluster"]
    nodes = [
        NodeSpec(
            f"gpu-node-{i}", cpu=spec["cpuPerNode"], memory=spec["memoryPerNode"],
            gpu=spec["gpusPerNode"],
        )
        for i in range(spec["nodes"])
    ]  # fmt: skip
    began = time.monotonic()
    cluster = LocalCluster(
        nodes=nodes,
        log=lambda msg: print(f"  {msg}", flush=True),
        scheduler_max_backoff_seconds=scheduler_backoff(scale),
    )
    cluster.start()
    operator: OperatorProcess | None = None
    driver: Driver | None = None
    try:
        install = install_chart(cluster)
        # The wait before nodes are kept for a job is trace time, like the jobs'.
        flags = (
            ["--no-autoscaler"]
            if mode == "static"
            else [f"--autoscaler-reserve-after={args.reserve_after * scale:g}"]
        )
        operator = OperatorProcess(install, name=f"operator-{mode}", args=flags).start()
        cluster.kubectl("create", "namespace", NAMESPACE)
        print(f"  {mode}: cluster, chart and operator ready after {time.monotonic() - began:.0f}s")
        driver = Driver(cluster, trace, scale)
        replay_began = time.monotonic()
        driver.run(limit)
        replay = time.monotonic() - replay_began
        peak_rss = _peak_rss(operator.pid)
        metrics = operator.metrics()
        result = summarize(mode, driver, replay, peak_rss, metrics)
        result["podCacheMemory"] = _pod_cache_memory(driver) if memory else None
        return result
    finally:
        if driver is not None:
            driver.stop()
        if operator is not None:
            operator.stop()
            raw.mkdir(parents=True, exist_ok=True)
            if operator.log_path.exists():
                shutil.copy(operator.log_path, raw / f"operator-{mode}.log")
        cluster.stop()
        print(f"  {mode}: done in {time.monotonic() - began:.0f}s", flush=True)


def _peak_rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _metric(text: str, name: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, _, value = line.rpartition(" ")
            found[key[len(name) :] or "total"] = float(value)
    return found


def _pod_cache_memory(driver: Driver, count: int = 10_000) -> dict[str, Any] | None:
    """Bytes per cached pod: the whole object (what a plain informer keeps)
    against the planner's record (what the autoscaler's cache keeps), for
    copies of a real trainer pod from this run."""
    text = driver.sample_trainer
    if text is None:
        return None

    def measure(keep: Any) -> int:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        cache = {}
        for i in range(count):
            obj = json.loads(text)
            obj["metadata"]["name"] = f"pod-{i}"
            obj["status"]["phase"] = "Running"  # the sample may have finished by now
            cache[f"ns/pod-{i}"] = keep(obj)
        size = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        del cache
        return size

    full, slim = measure(lambda o: o), measure(pod_from_manifest)
    return {
        "pods": count,
        "podJsonBytes": len(text),
        "fullObjectBytesPerPod": round(full / count),
        "plannerRecordBytesPerPod": round(slim / count),
        "fullMiBPer10kPods": round(full / 2**20, 1),
        "plannerMiBPer10kPods": round(slim / 2**20, 1),
    }


# --- results ---------------------------------------------------------------------------------


def summarize(
    mode: str, driver: Driver, replay: float, peak_rss: int | None, metrics: str
) -> dict[str, Any]:
    jobs = [_job_result(name, job, driver.decisions) for name, job in driver.jobs.items()]
    samples = driver.samples
    cap = driver.capacity
    end = max((j.done for j in driver.jobs.values() if j.done is not None), default=0.0)
    whole = _time_mean([(t, g / cap) for t, g, _, _ in samples if t <= end])
    saturated = _time_mean([(t, g / cap) for t, g, d, _ in samples if t <= end and d >= cap], True)
    waits = [j["wait"] for j in jobs if j["wait"] is not None]
    jcts = [j["completion"] for j in jobs if j["completion"] is not None]
    changes = _metric(metrics, "dlk8s_autoscaler_changes_total")
    causes: Counter[str] = Counter()
    for job in driver.jobs.values():
        causes.update(job.waiting)
    return {
        "mode": mode,
        "replayWallSeconds": round(replay, 1),
        "makespan": round(end, 1),
        "gpuUtilization": round(whole[0], 4),
        "gpuUtilizationSaturated": round(saturated[0], 4),
        "saturatedSeconds": round(saturated[1], 1),
        "meanWait": round(statistics.mean(waits), 1) if waits else None,
        "medianWait": round(statistics.median(waits), 1) if waits else None,
        "maxWait": round(max(waits), 1) if waits else None,
        "meanCompletion": round(statistics.mean(jcts), 1) if jcts else None,
        "medianCompletion": round(statistics.median(jcts), 1) if jcts else None,
        "jobsCompleted": len(jcts),
        "meanWaitByKind": _mean_wait_by_kind(jobs),
        "waitCauses": {c: round(causes[c], 1) for c in WAIT_CAUSES if causes[c]},
        "idleWhileSaturated": {
            c: round(driver.idle[c] / cap / saturated[1], 4) if saturated[1] else 0.0
            for c in IDLE_CAUSES
        },
        "checks": {
            "ticks": driver.ticks,
            "overcommitted": _worst(driver.overcommits),
            "outOfBounds": _worst(driver.out_of_bounds),
        },
        "operatorPeakRssMiB": round(peak_rss / 2**20, 1) if peak_rss else None,
        "autoscalerChanges": {k.strip("{}"): int(v) for k, v in changes.items()},
        "decisions": [[d.t, d.job, d.old, d.new, d.reason] for d in driver.decisions],
        "jobs": jobs,
        "series": [[round(t, 1), g, d, a] for t, g, d, a in _thin(samples, 2.0)],
    }


def _mean_wait_by_kind(jobs: Sequence[dict[str, Any]]) -> dict[str, float]:
    waits: dict[str, list[float]] = {}
    for job in jobs:
        if job["wait"] is not None:
            waits.setdefault(job["kind"], []).append(job["wait"])
    return {kind: round(statistics.mean(w), 1) for kind, w in sorted(waits.items())}


def _worst(problems: Counter[str], keep: int = 10) -> dict[str, int]:
    """The problems seen, with how many ticks each was seen on (the most first)."""
    return dict(problems.most_common(keep))


def _job_result(name: str, job: JobRun, decisions: Sequence[Decision]) -> dict[str, Any]:
    sub = job.submitted
    result = {
        "name": name,
        "kind": kind_of(job.spec).name,
        "arrival": job.spec["arrival"],
        "wait": _minus(job.first_running, sub),
        "completion": _minus(job.done, sub),
        "succeededAfter": _minus(job.succeeded, sub),
        "maxTrainersSeen": job.max_trainers_seen,
        "waitCauses": {c: round(v, 1) for c, v in job.waiting.items() if v >= 0.05},
    }
    if sub is not None and job.first_running is not None:
        during = [d for d in decisions if sub <= d.t <= job.first_running and d.job != name]
        result["othersDuringWait"] = {
            "up": sum(1 for d in during if d.old is not None and d.new > d.old),
            "down": sum(1 for d in during if d.old is not None and d.new < d.old),
            "downForIt": sum(1 for d in during if f"/{name}" in d.reason),
        }
    return result


def _minus(a: float | None, b: float | None) -> float | None:
    return round(a - b, 1) if a is not None and b is not None else None


def _time_mean(points: list[tuple[float, float]], window: bool = False) -> tuple[float, float]:
    """Time-weighted mean of a step function sampled at points (and its span).

    With `window`, only the stretches between consecutive points that both
    belong to the selection count (the points are already filtered)."""
    total = weight = 0.0
    for (t0, v0), (t1, _) in itertools.pairwise(points):
        dt = t1 - t0
        if dt <= 0 or (window and dt > 5):  # a gap: the window was left in between
            continue
        total += v0 * dt
        weight += dt
    return (total / weight if weight else 0.0), weight


def _thin(samples: list[Any], step: float) -> list[Any]:
    out, last = [], -step
    for sample in samples:
        if sample[0] - last >= step:
            out.append(sample)
            last = sample[0]
    return out


# --- main -------------------------------------------------------------------------------------


def run_trace(name: str, args: argparse.Namespace, first: bool) -> dict[str, Any]:
    began = time.monotonic()
    spec = TRACES[name]
    trace = json.loads(spec.path.read_text())
    assign_kinds(trace["jobs"], mixed=not args.paddle_only)
    modes = [args.only] if args.only else ["autoscaler", "static"]
    count = args.replays or spec.replays
    raw = args.out / RAW.relative_to(RESULTS) / name
    replays = []
    for i in range(count):
        runs = {}
        for mode in modes:
            print(f"== {name} / {mode} ({i + 1}/{count}): {_kinds_text(trace['jobs'])}", flush=True)
            memory = first and i == 0 and mode == "autoscaler"
            runs[mode] = run_mode(mode, trace, args, raw / f"replay-{i + 1}", memory)
        replays.append(runs)
    cluster = trace["cluster"]
    shown = median_replay(replays)
    result = {
        "trace": {
            "jobs": len(trace["jobs"]),
            "file": spec.path.name,
            "generator": trace["generator"],
            "cluster": f"{cluster['nodes']} kwok nodes x {cluster['gpusPerNode']} GPUs, "
            f"{cluster['cpuPerNode']} CPU, {cluster['memoryPerNode']}",
            "kinds": {
                kind: [j["name"] for j in trace["jobs"] if j["kind"] == kind]
                for kind in KINDS
                if any(j["kind"] == kind for j in trace["jobs"])
            },
        },
        "scale": args.scale,
        "reserveAfter": args.reserve_after,
        "capacity": cluster["nodes"] * cluster["gpusPerNode"],
        "targets": list(spec.targets),
        "wallSeconds": round(time.monotonic() - began, 1),
        "shownReplay": shown,
        "runs": replays[shown],
        "replays": replays,
    }
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "elastic-full.json").write_text(json.dumps(result) + "\n")
    # The committed copy keeps one sample per 5 s of the replay it plots,
    # and of the others their figures only.
    result["replays"] = [
        {mode: {k: v for k, v in run.items() if k != "series"} for mode, run in runs.items()}
        for runs in replays
    ]
    for run in result["runs"].values():
        run["series"] = _thin(run["series"], 5.0)
    return result


def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    names = args.trace or list(TRACES)
    out_json = args.out / RESULTS_JSON.name
    previous = json.loads(out_json.read_text()) if out_json.exists() else {}
    traces = {n: r for n, r in previous.get("traces", {}).items() if n in TRACES}
    for i, name in enumerate(names):
        traces[name] = run_trace(name, args, first=i == 0)
    ordered = {n: traces[n] for n in TRACES if n in traces}
    wall = round(time.monotonic() - began, 1)
    every = set(names) == set(TRACES) and not args.only
    results = {
        "wallSeconds": wall,
        # The last run of every trace in both modes: what `make bench-elastic` costs.
        "fullRunWallSeconds": wall if every else previous.get("fullRunWallSeconds"),
        "lastRunTraces": names,
        "traces": ordered,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    print(write_report(results, args.out))
    return 0


def _kinds_text(jobs: Sequence[dict[str, Any]]) -> str:
    counts = Counter(j["kind"] for j in jobs)
    return f"{len(jobs)} jobs: " + ", ".join(f"{n} {kind}s" for kind, n in sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("generate", help="write the traces (or one custom trace with --out)")
    gen.add_argument("--seed", type=int, default=2026)
    gen.add_argument("--jobs", type=int, default=36)
    gen.add_argument("--gap", type=float, default=60.0, help="mean seconds between arrivals")
    gen.add_argument("--burst", type=float, default=0.0, help="share of jobs within one minute")
    gen.add_argument("--out", type=Path, help="a custom trace's file (default: every preset)")
    report = sub.add_parser("report", help="rewrite elastic.md and the plots from elastic.json")
    report.add_argument("--out", type=Path, default=RESULTS, help="the results' folder")
    replay = sub.add_parser("run", help="replay the traces (the default)")
    replay.add_argument("--trace", action="append", choices=list(TRACES), help="repeatable")
    replay.add_argument("--scale", type=float, default=DEFAULT_SCALE, help="wall s per trace s")
    replay.add_argument("--only", choices=["autoscaler", "static"])
    replay.add_argument(
        "--replays",
        type=int,
        help="replays of each trace (default: the trace's own, 3 for heavy, 1 for the others)",
    )
    replay.add_argument("--limit", type=float, default=600, help="wall seconds per replay at most")
    replay.add_argument(
        "--paddle-only",
        action="store_true",
        help="every job a PaddleJob (default: every other job a PyTorchJob)",
    )
    replay.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="the folder of elastic.{json,md}, the plots and raw/ (default: bench/results)",
    )
    replay.add_argument(
        "--reserve-after",
        type=float,
        default=DEFAULT_RESERVE_AFTER,
        help="trace seconds a job that cannot be placed waits before a node is kept"
        " for it (the operator's --autoscaler-reserve-after, scaled)",
    )
    args = parser.parse_args(argv)
    if args.command == "generate":
        return write_traces(args)
    if args.command == "report":
        print(write_report(json.loads((args.out / RESULTS_JSON.name).read_text()), args.out))
        return 0
    if args.command is None:
        args = parser.parse_args(["run", *(argv or sys.argv[1:])])
    return run(args)


if __name__ == "__main__":
    # The driver's watches end with the cluster; their farewells are noise.
    logging.getLogger("kubernetes").setLevel(logging.CRITICAL)
    threading.excepthook = lambda exc: print(f"thread failed: {exc.exc_value!r}", file=sys.stderr)
    raise SystemExit(main())
