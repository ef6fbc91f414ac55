"""One measured run of a burst, and the runs compared.

``run_burst`` submits jobs (all at once, or at a steady rate) to a fresh
operator, to the ceiling or to a peer (peers.py: Kubeflow's
training-operator, or Kubeflow Trainer v2 with JobSet), and measures them;
``compare`` runs the ceiling and the operator back to back, and after them,
if asked, the same jobs with each peer (its jobs of the same shape,
measured the same way, its job Running as it reports it). The burst and
scale suites are built from these.

The ceiling (ceiling.py): a bare creator of exactly the pods and Services
the operator makes, and at a job's end the deletes its cleanPodPolicy asks
for; no watch, no status, no events. Times come from a watcher process's
receipt of the watch events (creationTimestamp has 1 s resolution).
Namespaces are deleted and their pods waited out between runs; the
apiserver's request counts and every process's CPU are read before and
after each run.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.ceiling import Ceiling
from bench.common.harness import (
    Context,
    Controller,
    Submission,
    controller_cpu,
    controller_peak_rss,
    create_namespace,
    delete_namespace,
    log,
    operator_reconciles,
    operator_requests,
    pct,
    requests_table,
    start_operator,
    submit_all,
    wait_for,
    wait_quiet,
)
from bench.common.measure import (
    apiserver_requests,
    by_verb,
    cpu_of,
    delta,
    longrunning_watches,
    machine_busy,
    proc_cpu,
    thread_cpu,
)
from bench.common.peers import Peer, peers_of
from bench.common.pyspy import start_py_spy, stop_py_spy, thread_groups
from bench.common.servercosts import (
    Metrics,
    Profile,
    cost_figures,
    endpoints_made,
    median_costs,
    status_changes,
)
from bench.common.watcher import DLK8S_TFJOBS, JobKind, Watcher


@dataclass
class Burst:
    """One run_burst under way: its namespace and jobs, the watcher that
    times them, and what makes their children (the operator, a peer or
    the ceiling), with the operator's counts at the window's start."""

    ctx: Context
    scenario: str
    label: str
    namespace: str
    jobs: list[dict[str, Any]]
    pods: int  # every replica of these jobs has a pod
    services: int  # and a Service (Trainer's JobSets: one per job)
    kind: JobKind
    watcher: Watcher
    peer: Peer | None
    op: Controller | None = None
    ceiling: Ceiling | None = None
    then: Callable[[Submission], None] | None = None
    spy: subprocess.Popen[bytes] | None = None
    speedscope: Path = field(default_factory=Path)
    op_requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    op_passes: int = 0
    op_cpu: float = 0.0
    tfjob: dict[str, Any] = field(default_factory=dict)  # the first, as dlk8s's

    @property
    def timeout(self) -> float:
        timeout: float = self.ctx.args.peer_timeout if self.peer else self.ctx.args.timeout
        return timeout


@dataclass(frozen=True)
class Marks:
    """What the control plane, this process, the watcher, the machine and
    the API server had counted at one moment: read before the window and
    after it."""

    control_plane: dict[str, float]
    bench: float
    watcher: float
    machine: float
    requests: Counter[tuple[str, str]]
    costs: Counter[str]


@dataclass
class Times:
    """When each phase of the window ended (time.monotonic())."""

    t0: float = 0.0
    submitted: float = 0.0
    created: float = 0.0
    running: float = 0.0
    settled: float = 0.0


def run_burst(
    ctx: Context,
    scenario: str,
    mode: str,
    jobs: list[dict[str, Any]],
    profile: bool = False,
    src: str = "",
    rate: float = 0.0,
    settle: bool = False,
    peer: Peer | None = None,
    endpoints: bool = True,
) -> dict[str, Any]:
    """Submit `jobs` (at once, or `rate` a second); the operator or the ceiling
    makes their children, or (mode "peer") the `peer` those of the same
    jobs as its own (peers.py). `settle`: the
    operator first works off what it found at start-up (jobs of other
    namespaces), so that only the jobs submitted here are measured.
    `endpoints`: the run lasts until every Service's Endpoints holds its
    pod's address (False where kube-controller-manager still works off
    what came before: a history of thousands of Services)."""
    run = _begin(ctx, scenario, mode, jobs, peer)
    _start_makers(run, mode, profile, src, settle)
    before = _marks(run)
    server_profile = _start_apiserver_profile(run)
    times = Times()
    subs = _submit_and_wait(run, times, rate, endpoints)
    result = _makers_figures(run)
    times.settled = time.monotonic()
    after = _marks_after(run)
    if run.op is not None:
        run.op.stop()  # after the counts: its watches ending are not part of the run
    data = run.watcher.stop()
    result |= _window_figures(run, before, after, times, data, result)
    if not peer:
        result["status_writes"] = status_changes(data["seen"]["tfjobs"])
    if server_profile is not None:
        # Before the namespace's deletion, which the window must not see.
        seconds = ctx.args.apiserver_profile_seconds + 60
        result["apiserver_profile"] = server_profile.summary(seconds)
    result |= latencies(subs, data["seen"], "operator" if run.op is not None else mode)
    return _end(run, result, times)


def _begin(
    ctx: Context, scenario: str, mode: str, jobs: list[dict[str, Any]], peer: Peer | None
) -> Burst:
    """The run's namespace, its jobs (as the peer's, for a peer) and its
    watcher, started."""
    label = peer.name if peer else mode
    namespace = create_namespace(ctx, f"{scenario}-{label}")
    expected_pods = sum(
        sum(r["replicas"] for r in j["spec"]["replicaSpecs"]) for j in jobs
    )  # every replica of these jobs has a pod and a Service
    log(f"{scenario}/{label}: {len(jobs)} job(s), {expected_pods} pods in {namespace}")
    kind = peer.kind(jobs) if peer else DLK8S_TFJOBS
    services = peer.services(jobs, expected_pods) if peer else expected_pods
    tfjobs = jobs
    if peer:
        jobs = peer.jobs(jobs)
    watch_file = ctx.raw / f"watch-{namespace}.json"
    watcher = Watcher(ctx.endpoint, namespace, watch_file, jobs=kind).start()
    run = Burst(ctx, scenario, label, namespace, jobs, expected_pods, services, kind, watcher, peer)
    run.tfjob = tfjobs[0]
    return run


def _start_makers(run: Burst, mode: str, profile: bool, src: str, settle: bool) -> None:
    """Start what makes the children: a peer, a fresh operator
    (settled, under py-spy, if asked; its counts read), or the ceiling."""
    ctx, scenario = run.ctx, run.scenario
    run.speedscope = ctx.raw / f"profile-{scenario}{'-baseline' if src else ''}.speedscope.json"
    if run.peer:
        run.op = run.peer.start(ctx.cluster, ctx.raw, scenario, run.tfjob)
    elif mode == "operator":
        suffix = ("-profile" if profile else "") + ("-baseline" if src else "")
        run.op = start_operator(ctx, f"operator-{scenario}{suffix}", src)
    if run.op is not None:
        if settle:
            wait_quiet(run.op, timeout=ctx.args.timeout)
        if profile:
            run.spy = start_py_spy(run.op.pid, run.speedscope, ctx.args.py_spy_args)
        run.op_requests = operator_requests(run.op)
        run.op_passes = operator_reconciles(run.op)
        run.op_cpu = controller_cpu(run.op)
    else:
        run.ceiling = Ceiling(
            ctx.api, run.namespace, run.jobs, ctx.config, ctx.args.api_parallelism
        )
        assert run.ceiling.children() == 2 * run.pods, "pods + services"
        run.then = run.ceiling.then


def _marks(run: Burst) -> Marks:
    """The counts at the window's start."""
    ctx = run.ctx
    control_plane = cpu_of(ctx.control_plane)
    bench, watcher, machine = proc_cpu(os.getpid()), proc_cpu(run.watcher.pid), machine_busy()
    requests = apiserver_requests(ctx.api)
    costs = ctx.server_metrics.read()
    return Marks(control_plane, bench, watcher, machine, requests, costs)


def _marks_after(run: Burst) -> Marks:
    """The counts at the window's end, the API server's first."""
    ctx = run.ctx
    requests = apiserver_requests(ctx.api)
    costs = ctx.server_metrics.read()
    control_plane = cpu_of(ctx.control_plane)
    bench, watcher, machine = proc_cpu(os.getpid()), proc_cpu(run.watcher.pid), machine_busy()
    return Marks(control_plane, bench, watcher, machine, requests, costs)


def _start_apiserver_profile(run: Burst) -> Profile | None:
    """kube-apiserver's CPU profile of the window's first seconds, if asked
    (never of the warm-up)."""
    ctx = run.ctx
    if ctx.args.apiserver_profile_seconds > 0 and run.scenario != "warmup":
        out = ctx.raw / f"apiserver-{run.namespace}.pprof"
        return Profile(ctx.api, ctx.args.apiserver_profile_seconds, out).start()
    return None


def _submit_and_wait(run: Burst, times: Times, rate: float, endpoints: bool) -> list[Submission]:
    """Submit the jobs, then wait for every pod created, every job Running
    and (with `endpoints`) every Service's Endpoints addressed."""
    ctx, watcher, timeout = run.ctx, run.watcher, run.timeout
    times.t0 = time.monotonic()
    subs = submit_all(ctx, run.namespace, run.jobs, run.then, rate, path=run.kind.path)
    times.submitted = time.monotonic()
    if not watcher.wait("pods_added", run.pods, timeout):
        log(f"only {watcher.value('pods_added')}/{run.pods} pods after {timeout}s")
    times.created = time.monotonic()
    if run.ceiling is not None:
        run.ceiling.wait_created()
    # Running: the job's status for the operator; every pod Running for the ceiling.
    if run.op is not None:
        ok = watcher.wait("jobs_running", len(run.jobs), timeout)
    else:
        ok = watcher.wait("pods_running", run.pods, timeout)
    if not ok:
        log(f"not all Running after {timeout}s")
    times.running = time.monotonic()
    # The run is measured until kube-controller-manager has given every
    # Service its pod's address: a run that creates faster leaves it more
    # of that work after its last pod runs, and a window that ended there
    # would not count it (bench/results/results.md: Endpoints).
    if endpoints and not watcher.wait("endpoints_addressed", run.services, timeout):
        log(f"only {watcher.value('endpoints_addressed')}/{run.services} Endpoints addressed")
    return subs


def _makers_figures(run: Burst) -> dict[str, Any]:
    """The run's shape, and what made its children: the operator's (or
    peer's) CPU, memory, requests and passes once it is quiet,
    its profile; the ceiling stopped, with the endings it sent."""
    result: dict[str, Any] = {"namespace": run.namespace, "jobs": len(run.jobs), "pods": run.pods}
    if run.peer:
        result |= run.peer.figures()
    op = run.op
    if op is not None:
        # A peer's events queue behind its requests' rate limit.
        wait_quiet(op, timeout=run.timeout if run.peer else 120)
        if run.spy is not None:
            threads = thread_cpu(op.pid)
            result["profile"] = stop_py_spy(run.spy, run.speedscope)
            result["profile"]["thread_cpu"] = thread_groups(threads, run.speedscope)
            result["profile"]["args"] = run.ctx.args.py_spy_args
        result["operator"] = {
            "cpu_seconds": round(controller_cpu(op) - run.op_cpu, 2),
            "peak_rss_mb": round(controller_peak_rss(op) / 2**20, 1),
            "requests": requests_table(delta(operator_requests(op), run.op_requests)),
            "reconciles": operator_reconciles(op) - run.op_passes,
        }
    if run.ceiling is not None:
        run.ceiling.stop()  # the endings not yet due are past the window, as the operator's are
        result["ceiling_endings"] = run.ceiling.endings_sent
    return result


def _window_figures(
    run: Burst,
    before: Marks,
    after: Marks,
    times: Times,
    data: dict[str, Any],
    result: dict[str, Any],
) -> dict[str, Any]:
    """What the window cost the API server, the control plane, the
    benchmark, its watcher and everything else; how long its phases took;
    what the watcher saw."""
    cp0, cp1 = before.control_plane, after.control_plane
    known = sum(cp1[k] - cp0[k] for k in cp0) + (after.bench - before.bench)
    known += after.watcher - before.watcher
    if run.op is not None:
        known += result["operator"]["cpu_seconds"]
    requests = delta(after.requests, before.requests)
    t0 = times.t0
    return {
        "apiserver_requests_by_verb": by_verb(requests),
        "apiserver_requests": requests_table(requests),
        "control_plane_cpu_seconds": {k: round(cp1[k] - cp0[k], 2) for k in cp0},
        "bench_cpu_seconds": round(after.bench - before.bench, 2),
        "watcher_cpu_seconds": round(after.watcher - before.watcher, 2),
        # Everything else on the machine (other people's tests...) while this ran.
        "other_cpu_seconds": round(after.machine - before.machine - known, 1),
        "phases_seconds": {
            "submit": round(times.submitted - t0, 2),
            "created_wait": round(times.created - t0, 2),
            "running_wait": round(times.running - t0, 2),
            "settled": round(times.settled - t0, 2),
        },
        "watch_events": data["events"],
        "server_costs": Metrics.since(before.costs, after.costs),
        "endpoints": endpoints_made(data["seen"].get("endpoints", {})),
    }


def _end(run: Burst, result: dict[str, Any], times: Times) -> dict[str, Any]:
    """The ceiling's last create, and the namespace deleted (its pods waited out)."""
    if run.ceiling is not None and run.ceiling.create_times:
        result["ceiling_last_create_return_s"] = round(max(run.ceiling.create_times) - times.t0, 3)
    gone = delete_namespace(run.ctx, run.namespace)
    result["cleanup_seconds"] = round(gone, 1)
    log(
        f"{run.scenario}/{run.label}: all pods created {result['total_created_s']}s, "
        f"Running {result['total_running_s']}s, cleanup {gone:.0f}s"
    )
    return result


def compare(
    ctx: Context,
    scenario: str,
    jobs: list[dict[str, Any]],
    repeat: int = 0,
    median_of: str = "total_created_s",
    peers: Sequence[str] = (),
    **options: Any,
) -> dict[str, Any]:
    """The ceiling and the operator (and the baseline operator) back to back,
    `repeat` (else --repeat) times in a rotating order, then each of the
    `peers` (peers.PEERS names) as many times; for each, the run with the
    median `median_of`. `options` go to run_burst."""
    modes = [("ceiling", ""), ("operator", "")]
    if ctx.args.baseline_src:
        modes.append(("baseline", ctx.args.baseline_src))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in modes}
    repeat = repeat or ctx.args.repeat
    for r in range(repeat):
        shift = r % len(modes)
        for name, src in modes[shift:] + modes[:shift]:
            mode = "ceiling" if name == "ceiling" else "operator"
            runs[name].append(run_burst(ctx, scenario, mode, jobs, src=src, **options))
    warmed: set[str] = set()
    for peer in peers_of(peers):
        if peer.family not in warmed:
            warm_up_peer(ctx, peer, jobs[0])
            warmed.add(peer.family)
        runs[peer.name] = [
            run_burst(ctx, scenario, "peer", jobs, peer=peer, **options) for _ in range(repeat)
        ]
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        ordered = sorted(rs, key=lambda run: run[median_of])
        out[name] = ordered[(len(ordered) - 1) // 2]
    if repeat > 1:
        out["cost_medians"] = {name: median_costs(rs) for name, rs in runs.items()}
        keys = ("total_created_s", "total_running_s", "job_created_p50_s", "other_cpu_seconds")
        out["repeats"] = {
            name: [
                {k: run.get(k) for k in keys}
                | {"operator_cpu_seconds": run.get("operator", {}).get("cpu_seconds")}
                | {"apiserver_cpu_seconds": cost_figures(run).get("cpu|kube-apiserver")}
                for run in rs
            ]
            for name, rs in runs.items()
        }
    return out


def warm_up_peer(ctx: Context, peer: Peer, job: dict[str, Any]) -> None:
    """A peer's CRDs and its first jobs (of `job`'s shape), unrecorded, and
    the garbage collector watching its kinds, as warm_up for dlk8s's."""
    peer.install(ctx.cluster, job)
    warm = [{**job, "metadata": {"name": f"warm-{i}"}} for i in range(4)]
    run_burst(ctx, "warmup", "peer", warm, peer=peer.tuned())
    for resource, group in peer.watched():
        wait_for(_gc_watches(ctx, resource, group), 120, f"the GC to watch {resource}.{group}")


def _gc_watches(ctx: Context, resource: str, group: str) -> Callable[[], bool]:
    return lambda: longrunning_watches(ctx.api, resource, group=group) >= 1


def latencies(subs: list[Submission], seen: dict[str, Any], mode: str) -> dict[str, Any]:
    t0 = min(s.start for s in subs)
    pods_by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in seen["pods"].values():
        pods_by_job.setdefault(pod["job"], []).append(pod)
    created, running, status_running = [], [], []
    for sub in subs:
        pods = pods_by_job.get(sub.name, [])
        created.append(max(p["added"] for p in pods) - sub.start if pods else float("nan"))
        running.append(
            max(p.get("running", float("nan")) for p in pods) - sub.start if pods else float("nan")
        )
        job = seen["tfjobs"].get(sub.name, {})
        if "running" in job:
            status_running.append(job["running"] - sub.start)
    arrivals = [round(s.start - t0, 3) for s in subs]
    pod_created = sorted(p["added"] - t0 for p in seen["pods"].values())
    svc_created = sorted(s["added"] - t0 for s in seen["services"].values())
    pod_running = sorted(p["running"] - t0 for p in seen["pods"].values() if "running" in p)
    if mode == "operator":
        ends = status_running
        job_ends = [j["running"] - t0 for j in seen["tfjobs"].values() if "running" in j]
        total_running = max(job_ends) if job_ends else float("nan")
    else:
        ends = running
        total_running = pod_running[-1] if pod_running else float("nan")
    total_created = pod_created[-1] if pod_created else float("nan")
    return {
        "submit_seconds": round(max(s.done for s in subs) - t0, 3),
        "job_created_p50_s": pct(created, 50),
        "job_created_p99_s": pct(created, 99),
        "job_running_p50_s": pct(ends, 50),
        "job_running_p99_s": pct(ends, 99),
        "pods_running_p50_s": pct(running, 50),
        "pod_created_p50_s": pct(pod_created, 50),
        "pod_created_p99_s": pct(pod_created, 99),
        "total_created_s": round(total_created, 3),
        "total_services_s": round(svc_created[-1], 3) if svc_created else None,
        "total_pods_running_s": round(pod_running[-1], 3) if pod_running else None,
        "total_running_s": round(total_running, 3),
        "pods_per_second": round(len(pod_created) / total_created, 1) if pod_created else 0,
        "pods_seen": len(pod_created),
        "jobs_running_seen": len(status_running) if mode == "operator" else None,
        # For the plot: pods created over time (seconds from the first submission).
        "series_pods_created": [round(t, 3) for t in pod_created],
        # Per job: (submitted, seconds to all its pods created), in submission order.
        "series_job_created": [
            [a, round(c, 3)] for a, c in sorted(zip(arrivals, created, strict=True)) if c == c
        ],
    }
