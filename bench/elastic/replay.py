"""One trace of the elastic bench replayed: each mode (autoscaler, static)
on a fresh local control plane of its own, --replays times (``run_trace``),
and every trace asked for (``run``), into bench/results/elastic.*."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.devtools import LocalCluster, NodeSpec, OperatorProcess, install_chart
from bench.common.operator import pod_from_manifest
from bench.common.paths import RESULTS
from bench.elastic.driver import Driver
from bench.elastic.manifests import NAMESPACE
from bench.elastic.report import RESULTS_JSON, median_replay, write_report
from bench.elastic.summary import summarize, thin
from bench.elastic.traces import KINDS, TRACES, assign_kinds

RAW = RESULTS / "raw" / "elastic"
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
        run["series"] = thin(run["series"], 5.0)
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
