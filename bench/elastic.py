"""Elastic PaddleJobs with and without the autoscaler, replayed on kwok.

    make bench-elastic                              # replay the committed trace
    .tools/venv/bin/python bench/elastic.py generate --seed 2026   # a new trace
    .tools/venv/bin/python bench/elastic.py run --only autoscaler  # one mode

The trace (bench/elastic-trace.json) lists elastic jobs: arrival time,
minInstance / maxInstance trainers, GPUs per trainer, and the work to do in
trainer-seconds. Each mode gets a fresh local control plane of 8 kwok nodes
with 8 GPUs each, the chart installed, and the operator running as a local
process with the chart's ServiceAccount:

- autoscaler: the operator as shipped (autoscaler on);
- static: the same operator with --no-autoscaler, so every job keeps
  minInstance trainers (EDL without its controller).

The driver submits each job at its arrival time and plays the trainers: it
watches the pods, credits every job with one trainer-second of work per
second for each of its trainers that is Running, and once the work is done
annotates its trainers with kwok.dlk8s.io/exit-code=0 so kwok ends them and
the operator sees the job succeed. Time is compressed (one trace second =
--scale wall seconds, 0.1 by default), the cluster, the scheduler and the
operator are not: their reaction times are real wall-clock time and so
weigh ten times more in trace time than they would in a real cluster.

Measured per job: wait (submission to the first Running trainer) and
completion time (submission to the work done); per run: the GPUs held by
Running trainers over time. Utilization is reported over the whole run and
over the window in which the jobs present could use the whole cluster
(the sum of their maxInstance x GPUs is at least the cluster's GPUs); the
target applies to the latter: when demand is below capacity, idle GPUs are
nobody's fault. Results: bench/results/elastic.{json,md,png}; operator logs
under bench/results/raw/ (not committed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import re
import shutil
import statistics
import sys
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlk8s.autoscaler.plan import pod_from_manifest
from dlk8s.job.api import API_VERSION
from dlk8s.runtime.client import Kube, Resource, register, resource_for
from dlk8s_dev.localcluster import EXIT_CODE_ANNOTATION, LocalCluster, NodeSpec
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

HERE = Path(__file__).resolve().parent
TRACE = HERE / "elastic-trace.json"
RESULTS = HERE / "results"
RAW = RESULTS / "raw" / "elastic"
NAMESPACE = "elastic-bench"
PADDLEJOBS = register(Resource(API_VERSION, "PaddleJob", "paddlejobs"))
GIB = 2**30


# --- the trace --------------------------------------------------------------------------


def generate(seed: int, jobs: int = 36, gap: float = 60.0) -> dict[str, Any]:
    """A deterministic trace: Poisson arrivals, mostly small minimums that
    may grow 3-6x, 1/2/4 GPUs per trainer, and work that takes 150-450 s at
    maxInstance (so 3-6x that at minInstance)."""
    rng = random.Random(seed)
    arrival = 0.0
    entries = []
    for i in range(jobs):
        if i:
            arrival += rng.expovariate(1 / gap)
        gpus = rng.choice([1, 1, 2, 2, 2, 4])
        low = rng.choice([1, 1, 2, 2, 3])
        high = max(low + 1, min(low * rng.choice([3, 4, 5, 6]), 32 // gpus))
        work = round(high * rng.uniform(150, 450))
        entries.append(
            {
                "name": f"job-{i:02d}",
                "arrival": round(arrival, 1),
                "minTrainers": low,
                "maxTrainers": high,
                "gpusPerTrainer": gpus,
                "work": work,
            }
        )
    return {
        "seed": seed,
        "generator": f"bench/elastic.py generate --seed {seed} (jobs={jobs}, gap={gap})",
        "units": {"arrival": "trace seconds", "work": "trainer-seconds"},
        "cluster": {"nodes": 8, "gpusPerNode": 8, "cpuPerNode": "32", "memoryPerNode": "256Gi"},
        "jobs": entries,
    }


def manifest(job: dict[str, Any]) -> dict[str, Any]:
    gpus = job["gpusPerTrainer"]
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
                "resources": {
                    "requests": {"cpu": str(2 * gpus), "memory": f"{8 * gpus}Gi"},
                    "limits": {"nvidia.com/gpu": gpus},
                },
            },
            "pserver": {
                "minInstance": 1,
                "maxInstance": 1,
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
            },
            "master": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        },
    }


# --- the driver ----------------------------------------------------------------------------


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


class Driver:
    def __init__(self, cluster: LocalCluster, trace: dict[str, Any], scale: float) -> None:
        self.kube = Kube(cluster.api_client())
        self.scale = scale
        self.capacity = trace["cluster"]["nodes"] * trace["cluster"]["gpusPerNode"]
        self.jobs = {j["name"]: JobRun(j) for j in trace["jobs"]}
        self.pods = self.kube.informer(
            resource_for("v1", "Pod"), NAMESPACE, "dlk8s.io/job-kind=paddlejob"
        )
        self.paddlejobs = self.kube.informer(PADDLEJOBS, NAMESPACE)
        self.samples: list[tuple[float, int, int, int]] = []  # t, gpus, demand, running jobs
        self.pool = ThreadPoolExecutor(16)
        self.t0 = 0.0

    def now(self) -> float:
        return (time.monotonic() - self.t0) / self.scale

    def run(self, limit_seconds: float) -> None:
        for informer in (self.pods, self.paddlejobs):
            informer.start()
        while not all(i._list_func.synced.is_set() for i in (self.pods, self.paddlejobs)):
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

    def _tick(self, now: float, dt: float) -> None:
        trainers: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.cache.list():
            labels = pod["metadata"].get("labels", {})
            if labels.get("dlk8s.io/replica-type") == "trainer":
                trainers.setdefault(labels.get("dlk8s.io/job-name", ""), []).append(pod)
        gpus = demand = active = 0
        for name, job in self.jobs.items():
            mine = trainers.get(name, [])
            running = [
                p
                for p in mine
                if p["status"].get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ]
            per = job.spec["gpusPerTrainer"]
            gpus += per * len(running)
            if job.submitted is not None and job.done is None:
                demand += per * job.spec["maxTrainers"]
                active += 1
                if running and job.first_running is None:
                    job.first_running = now
                job.max_trainers_seen = max(job.max_trainers_seen, len(running))
                job.progress += len(running) * dt
                if job.progress >= job.spec["work"]:
                    job.done = now
            if job.done is not None:
                self._finish(job, mine)
            if job.succeeded is None and job.submitted is not None:
                state = (self._job(name) or {}).get("status", {}).get("state")
                if state == "Succeeded":
                    job.succeeded = now
                elif state == "Failed":
                    raise RuntimeError(f"{name} failed: {self._job(name)}")
        self.samples.append((now, gpus, demand, active))

    def _job(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.paddlejobs.cache.get_by_key(f"{NAMESPACE}/{name}")
        return found

    def _finish(self, job: JobRun, pods: list[dict[str, Any]]) -> None:
        """The work is done: every trainer (and any that starts late) exits 0."""
        for pod in pods:
            meta = pod["metadata"]
            key = f"{meta['name']}/{meta['uid']}"
            if key in job.finished_pods or meta.get("deletionTimestamp"):
                continue
            job.finished_pods.add(key)
            patch = {"metadata": {"uid": meta["uid"], "annotations": {EXIT_CODE_ANNOTATION: "0"}}}
            self.pool.submit(self._patch, meta["name"], patch)

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
        for informer in (self.pods, self.paddlejobs):
            informer._stop_event.set()
        self.pool.shutdown(wait=False, cancel_futures=True)


# --- one mode -------------------------------------------------------------------------------


def run_mode(mode: str, trace: dict[str, Any], scale: float, limit: float) -> dict[str, Any]:
    spec = trace["cluster"]
    nodes = [
        NodeSpec(
            f"gpu-node-{i}", cpu=spec["cpuPerNode"], memory=spec["memoryPerNode"],
            gpu=spec["gpusPerNode"],
        )
        for i in range(spec["nodes"])
    ]  # fmt: skip
    began = time.monotonic()
    cluster = LocalCluster(nodes=nodes, log=lambda msg: print(f"  {msg}", flush=True))
    cluster.start()
    operator: OperatorProcess | None = None
    driver: Driver | None = None
    try:
        install = install_chart(cluster)
        args = ["--no-autoscaler"] if mode == "static" else []
        operator = OperatorProcess(install, name=f"operator-{mode}", args=args).start()
        cluster.kubectl("create", "namespace", NAMESPACE)
        print(f"  {mode}: cluster, chart and operator ready after {time.monotonic() - began:.0f}s")
        driver = Driver(cluster, trace, scale)
        replay_began = time.monotonic()
        driver.run(limit)
        replay = time.monotonic() - replay_began
        peak_rss = _peak_rss(operator.pid)
        metrics = operator.metrics()
        memory = _pod_cache_memory(driver) if mode == "autoscaler" else None
        result = summarize(mode, driver, replay, peak_rss, metrics)
        result["podCacheMemory"] = memory
        return result
    finally:
        if driver is not None:
            driver.stop()
        if operator is not None:
            operator.stop()
            RAW.mkdir(parents=True, exist_ok=True)
            if operator.log_path.exists():
                shutil.copy(operator.log_path, RAW / f"operator-{mode}.log")
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
    sample = next(iter(driver.pods.cache.list()), None)
    if sample is None:
        return None
    text = json.dumps(sample)

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
    jobs = []
    for name, job in driver.jobs.items():
        sub = job.submitted
        jobs.append(
            {
                "name": name,
                "arrival": job.spec["arrival"],
                "wait": _minus(job.first_running, sub),
                "completion": _minus(job.done, sub),
                "succeededAfter": _minus(job.succeeded, sub),
                "maxTrainersSeen": job.max_trainers_seen,
            }
        )
    samples = driver.samples
    cap = driver.capacity
    end = max((j.done for j in driver.jobs.values() if j.done is not None), default=0.0)
    whole = _time_mean([(t, g / cap) for t, g, _, _ in samples if t <= end])
    saturated = _time_mean([(t, g / cap) for t, g, d, _ in samples if t <= end and d >= cap], True)
    waits = [j["wait"] for j in jobs if j["wait"] is not None]
    jcts = [j["completion"] for j in jobs if j["completion"] is not None]
    changes = _metric(metrics, "dlk8s_autoscaler_changes_total")
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
        "operatorPeakRssMiB": round(peak_rss / 2**20, 1) if peak_rss else None,
        "autoscalerChanges": {k.strip("{}"): int(v) for k, v in changes.items()},
        "jobs": jobs,
        "series": [[round(t, 1), g, d, a] for t, g, d, a in _thin(samples, 2.0)],
    }


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


def compact_json(value: Any) -> str:
    """Indented JSON with innermost lists of numbers on one line."""
    text = json.dumps(value, indent=1)
    flat = re.sub(
        r"\[\s+([-0-9.eE,\s]+?)\s+\]",
        lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
        text,
    )
    return flat + "\n"


def markdown(results: dict[str, Any]) -> str:
    runs = results["runs"]
    auto, static = runs.get("autoscaler"), runs.get("static")
    lines = [
        "# Elastic PaddleJobs: the autoscaler against static minInstance",
        "",
        f"Trace: {results['trace']['jobs']} jobs ({results['trace']['generator']}), "
        f"{results['trace']['cluster']}; one trace second = {results['scale']} s wall. "
        "Times below are trace seconds.",
        "",
        "| | autoscaler | static (minInstance) |",
        "|---|---|---|",
    ]
    rows = [
        ("GPU utilization while demand >= capacity", "gpuUtilizationSaturated", "%"),
        ("  (seconds of that window)", "saturatedSeconds", ""),
        ("GPU utilization, whole run", "gpuUtilization", "%"),
        ("mean wait (submission -> first trainer Running)", "meanWait", ""),
        ("median / max wait", None, ""),
        ("mean wait without the run's longest one", "meanWaitTrimmed", ""),
        ("mean completion (submission -> work done)", "meanCompletion", ""),
        ("makespan (last job done)", "makespan", ""),
        ("jobs completed", "jobsCompleted", ""),
        ("operator peak RSS (MiB)", "operatorPeakRssMiB", ""),
        ("replay wall time (s)", "replayWallSeconds", ""),
    ]

    def cell(run: dict[str, Any] | None, key: str | None, unit: str) -> str:
        if run is None:
            return "-"
        if key is None:
            return f"{run['medianWait']} / {run['maxWait']}"
        if key == "meanWaitTrimmed":
            waits = sorted(j["wait"] for j in run["jobs"] if j["wait"] is not None)
            return f"{statistics.mean(waits[:-1]):.1f}" if len(waits) > 1 else "-"
        value = run.get(key)
        if value is None:
            return "-"
        return f"{100 * value:.1f} %" if unit == "%" else str(value)

    for label, key, unit in rows:
        lines.append(f"| {label} | {cell(auto, key, unit)} | {cell(static, key, unit)} |")
    if auto and static and auto["meanWait"] is not None and static["meanWait"]:
        ratio = auto["meanWait"] / static["meanWait"]
        lines += ["", f"Mean wait, autoscaler / static: {ratio:.2f}."]
    if auto and auto.get("autoscalerChanges"):
        lines.append(f"Autoscaler changes: {auto['autoscalerChanges']}.")
    memory = (auto or {}).get("podCacheMemory")
    if memory:
        lines += [
            "",
            "Watching every pod: the autoscaler's cache keeps a planner record per pod instead "
            f"of the object. For {memory['pods']} copies of a trainer pod from this run "
            f"({memory['podJsonBytes']} bytes of JSON): {memory['fullObjectBytesPerPod']} bytes "
            f"per pod as a dict ({memory['fullMiBPer10kPods']} MiB), "
            f"{memory['plannerRecordBytesPerPod']} bytes as a record "
            f"({memory['plannerMiBPer10kPods']} MiB).",
        ]
    lines += [
        "",
        "Reading it: the operator, scheduler and kwok react in wall time, so at 0.1 s per",
        "trace second each reaction counts ten times more than on a real cluster. A newcomer",
        "under the autoscaler waits for others to give back trainers first (one more round",
        "trip), which is why its median wait can exceed the static run's, whose mean is made",
        "of a few long queues instead. What keeps utilization under 100 % while demand exceeds",
        "capacity is that reaction time, and fragmentation: kube-scheduler's default",
        "LeastAllocated score spreads trainers, so a 4-GPU trainer may find no node with 4",
        "free GPUs while the cluster has more than 4 free (the autoscaler predicts that and",
        "gives the room to smaller trainers, when there are any).",
        f"\nTotal wall time of `make bench-elastic`: {results['wallSeconds']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 11))
    colors = {"autoscaler": "tab:blue", "static": "tab:orange"}
    for mode, run in runs.items():
        series = run["series"]
        cap = results["capacity"]
        axes[0].plot(
            [s[0] for s in series],
            [100 * s[1] / cap for s in series],
            label=f"{mode}: {100 * run['gpuUtilizationSaturated']:.1f} % while saturated",
            color=colors[mode],
            linewidth=1,
        )
    axes[0].set_ylabel("GPUs held by Running trainers (%)")
    axes[0].set_xlabel("trace seconds")
    axes[0].set_ylim(0, 105)
    axes[0].legend(loc="lower right")
    axes[0].set_title("GPU utilization over time")
    width = 0.4
    for offset, (mode, run) in zip((-width / 2, width / 2), runs.items(), strict=False):
        jobs = run["jobs"]
        x = [i + offset for i in range(len(jobs))]
        for ax, key, mean in (
            (axes[1], "wait", "meanWait"),
            (axes[2], "completion", "meanCompletion"),
        ):
            values = [j[key] or 0 for j in jobs]
            ax.bar(x, values, width, label=f"{mode}: mean {run[mean]}", color=colors[mode])
    axes[1].set_ylabel("wait (trace s)")
    axes[1].set_title("Wait per job: submission to first trainer Running")
    axes[2].set_ylabel("completion (trace s)")
    axes[2].set_xlabel("job (by arrival)")
    axes[2].set_title("Completion per job: submission to work done")
    for ax in axes[1:]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("generate", help="write a new trace to bench/elastic-trace.json")
    gen.add_argument("--seed", type=int, default=2026)
    gen.add_argument("--jobs", type=int, default=36)
    gen.add_argument("--gap", type=float, default=60.0, help="mean seconds between arrivals")
    sub.add_parser("report", help="rewrite elastic.md and elastic.png from elastic.json")
    run = sub.add_parser("run", help="replay the trace (the default)")
    run.add_argument("--scale", type=float, default=0.1, help="wall seconds per trace second")
    run.add_argument("--only", choices=["autoscaler", "static"])
    run.add_argument("--limit", type=float, default=720, help="wall seconds per replay at most")
    args = parser.parse_args(argv)
    if args.command == "generate":
        TRACE.write_text(json.dumps(generate(args.seed, args.jobs, args.gap), indent=1) + "\n")
        print(f"wrote {TRACE}")
        return 0
    if args.command == "report":
        results = json.loads((RESULTS / "elastic.json").read_text())
        (RESULTS / "elastic.json").write_text(compact_json(results))
        plot(results, RESULTS / "elastic.png")
        (RESULTS / "elastic.md").write_text(markdown(results))
        print(markdown(results))
        return 0
    if args.command is None:
        args = parser.parse_args(["run", *(argv or sys.argv[1:])])
    began = time.monotonic()
    trace = json.loads(TRACE.read_text())
    modes = [args.only] if args.only else ["autoscaler", "static"]
    runs = {}
    for mode in modes:
        print(f"== {mode}: {len(trace['jobs'])} jobs", flush=True)
        runs[mode] = run_mode(mode, trace, args.scale, args.limit)
    cluster = trace["cluster"]
    results = {
        "trace": {
            "jobs": len(trace["jobs"]),
            "generator": trace["generator"],
            "cluster": f"{cluster['nodes']} kwok nodes x {cluster['gpusPerNode']} GPUs, "
            f"{cluster['cpuPerNode']} CPU, {cluster['memoryPerNode']}",
        },
        "scale": args.scale,
        "capacity": cluster["nodes"] * cluster["gpusPerNode"],
        "wallSeconds": round(time.monotonic() - began, 1),
        "runs": runs,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    RAW.mkdir(parents=True, exist_ok=True)
    (RAW / "elastic-full.json").write_text(json.dumps(results) + "\n")
    for run_result in runs.values():  # the committed copy keeps one sample per 5 s
        run_result["series"] = _thin(run_result["series"], 5.0)
    plot(results, RESULTS / "elastic.png")
    (RESULTS / "elastic.json").write_text(compact_json(results))
    table = markdown(results)
    (RESULTS / "elastic.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    # The driver's watches end with the cluster; their farewells are noise.
    logging.getLogger("kubernetes").setLevel(logging.CRITICAL)
    threading.excepthook = lambda exc: print(f"thread failed: {exc.exc_value!r}", file=sys.stderr)
    raise SystemExit(main())
