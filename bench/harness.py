"""What every benchmark scenario shares: the cluster, the jobs, one measured run.

``open_context`` starts the local control plane (kwok nodes), installs the
chart and warms the apiserver up; ``run_burst`` submits jobs (all at once, or
at a steady rate) to a fresh operator or to the ceiling and measures them;
``compare`` runs both back to back, and after them, if asked, the same jobs
with Kubeflow's training-operator (peer.py: its TFJobs of the same shape,
measured the same way, its job Running from its Running condition). bench.py
(``make bench``) and scale.py (``make bench-scale``) are built from these.

The ceiling (ceiling.py): a bare creator of exactly the pods and Services
the operator makes, and at a job's end the deletes its cleanPodPolicy asks
for; no watch, no status, no events. Times come from a watcher process's
receipt of the watch events (creationTimestamp has 1 s resolution).
Namespaces are deleted and their pods waited out between runs; the
apiserver's request counts and every process's CPU are read before and
after each run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ceiling import EXIT_CODE, RUN_DURATION, Ceiling
from measure import (
    DLK8S_TFJOBS,
    KUBEFLOW_TFJOBS,
    Api,
    Endpoint,
    Watcher,
    apiserver_requests,
    by_verb,
    cpu_of,
    delta,
    longrunning_watches,
    machine_busy,
    proc_cpu,
    proc_name,
    proc_peak_rss,
    thread_cpu,
)
from peer import (
    SETTINGS,
    TRAINING_OPERATOR_VERSION,
    Settings,
    TrainingOperator,
    kubeflow_tfjob,
    queue_depth_of,
    reconciles_of,
    requests_of,
)
from peer import install as install_peer
from servercosts import Metrics, Profile, endpoints_made, median_costs, status_changes

from dlk8s.job.config import ControllerConfig, load_config
from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster, NodeSpec
from dlk8s_dev.localdeploy import Install, OperatorProcess, install_chart

RESULTS = REPO_ROOT / "bench" / "results"
TFJOBS = "/apis/dlk8s.io/v1alpha1/namespaces/{ns}/tfjobs"
IMAGE = "tensorflow/tensorflow:2.15.0"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the jobs -------------------------------------------------------------------------


def tfjob(
    name: str,
    workers: int,
    ps: int,
    exit_code: int | None = None,
    master: int = 1,
    run_duration: str = "",
    clean_pod_policy: str = "",
) -> dict[str, Any]:
    """A TFJob; with `exit_code` every pod ends with it (kwok), after
    `run_duration` (a Go duration) Running."""

    def replica(role: str, n: int) -> dict[str, Any]:
        template: dict[str, Any] = {
            "spec": {"containers": [{"name": "tensorflow", "image": IMAGE}]}
        }
        if exit_code is not None:
            annotations = {EXIT_CODE: str(exit_code)}
            if run_duration:
                annotations[RUN_DURATION] = run_duration
            template["metadata"] = {"annotations": annotations}
        return {"tfReplicaType": role, "replicas": n, "template": template}

    specs = [replica("MASTER", master)]
    if workers:
        specs.append(replica("WORKER", workers))
    if ps:
        specs.append(replica("PS", ps))
    spec: dict[str, Any] = {"replicaSpecs": specs}
    if clean_pod_policy:
        spec["runPolicy"] = {"cleanPodPolicy": clean_pod_policy}
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": spec,
    }


# --- the run of one scenario ---------------------------------------------------------------


@dataclass
class Submission:
    name: str
    start: float = 0.0
    done: float = 0.0
    uid: str = ""


@dataclass
class Context:
    args: argparse.Namespace
    cluster: LocalCluster
    install: Install
    api: Api
    endpoint: Endpoint
    config: ControllerConfig
    control_plane: dict[str, int]
    server_metrics: Metrics  # what each run cost kube-apiserver and its controllers
    raw: Path
    operator_env: dict[str, str] = field(default_factory=dict)


def create_namespace(ctx: Context, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    ctx.api.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    # Pods need the namespace's default ServiceAccount, made by the controller-manager.
    path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    wait_for(lambda: ctx.api.request("GET", path)[0] == 200, 60, f"{name} default SA")
    return name


def delete_namespace(ctx: Context, name: str, timeout: float = 600) -> float:
    began = time.monotonic()
    ctx.api.json("DELETE", f"/api/v1/namespaces/{name}", ok=(404,))
    wait_for(
        lambda: ctx.api.request("GET", f"/api/v1/namespaces/{name}")[0] == 404,
        timeout,
        f"namespace {name} to be gone",
        step=0.5,
    )
    return time.monotonic() - began


def wait_for(pred: Callable[[], bool], timeout: float, what: str, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


_OP_REQUESTS = re.compile(
    r'^dlk8s_api_requests_total\{resource="([^"]*)",verb="([^"]*)"\} ([0-9.e+]+)$', re.M
)


# The operator, or training-operator (whose metrics are controller-runtime's:
# each reads the other's as nothing).
Controller = OperatorProcess | TrainingOperator


def operator_requests(op: Controller) -> Counter[tuple[str, str]]:
    """The operator's own count of its API requests, by (verb, resource)."""
    text = op.metrics()
    counts = requests_of(text)
    for resource, verb, value in _OP_REQUESTS.findall(text):
        counts[(verb, resource)] += int(float(value))
    return counts


def operator_reconciles(op: Controller) -> int:
    """Reconcile passes the operator has run (all kinds)."""
    text = op.metrics()
    found = re.findall(r"^dlk8s_reconcile_duration_seconds_count\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    return int(sum(float(v) for v in found)) + reconciles_of(text)


def operator_queue_depth(op: Controller) -> float:
    text = op.metrics()
    found = re.search(r"^dlk8s_workqueue_depth ([0-9.e+]+)$", text, re.M)
    return (float(found.group(1)) if found else 0.0) + queue_depth_of(text)


def start_operator(ctx: Context, name: str, src: str = "") -> OperatorProcess:
    """A fresh operator process; `src`: run the dlk8s package found there instead."""
    env = dict(ctx.operator_env)
    if src:
        env["PYTHONPATH"] = src
    op = OperatorProcess(ctx.install, workdir=ctx.raw, name=name, env=env)
    op.log_path.unlink(missing_ok=True)
    op.start()
    return op


def wait_quiet(op: Controller, quiet: float = 2.0, timeout: float = 120) -> None:
    """Until the operator has sent no request and run no pass for `quiet`
    seconds, and its queue is empty (passes that write nothing count: a
    restarted operator reconciling finished jobs is busy, not quiet)."""
    deadline = time.monotonic() + timeout
    last = operator_activity(op)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = operator_activity(op)
        if now != last or operator_queue_depth(op) > 0:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    log("operator still busy; measuring anyway")


def operator_activity(op: Controller) -> tuple[int, int]:
    """(requests sent, passes run) so far."""
    return sum(operator_requests(op).values()), operator_reconciles(op)


def submit_all(
    ctx: Context,
    namespace: str,
    jobs: list[dict[str, Any]],
    then: Callable[[Submission], None] | None = None,
    rate: float = 0.0,
    path: str = TFJOBS,
) -> list[Submission]:
    """POST every job (to `path`) from a pool of threads, all at once or
    `rate` a second; `then` runs when a job's create returns."""
    path = path.format(ns=namespace)
    bodies = [(job["metadata"]["name"], json.dumps(job).encode()) for job in jobs]
    subs = [Submission(name) for name, _ in bodies]

    def one(i: int) -> None:
        sub = subs[i]
        sub.start = time.monotonic()
        status, data = ctx.api.request("POST", path, bodies[i][1])
        sub.done = time.monotonic()
        if status != 201:
            raise RuntimeError(f"create {sub.name}: {status} {data[:300]!r}")
        sub.uid = json.loads(data)["metadata"]["uid"]
        if then is not None:
            then(sub)

    futures = []
    began = time.monotonic()
    with ThreadPoolExecutor(ctx.args.submit_parallelism, thread_name_prefix="submit") as pool:
        for i in range(len(subs)):
            if rate:
                time.sleep(max(0.0, began + i / rate - time.monotonic()))
            futures.append(pool.submit(one, i))
        for future in futures:
            future.result()
    return subs


def run_burst(
    ctx: Context,
    scenario: str,
    mode: str,
    jobs: list[dict[str, Any]],
    profile: bool = False,
    src: str = "",
    rate: float = 0.0,
    settle: bool = False,
    peer: Settings | None = None,
    endpoints: bool = True,
) -> dict[str, Any]:
    """Submit `jobs` (at once, or `rate` a second); the operator or the ceiling
    makes their children, or (mode "peer") training-operator with the `peer`
    settings those of the same jobs as Kubeflow's TFJobs. `settle`: the
    operator first works off what it found at start-up (jobs of other
    namespaces), so that only the jobs submitted here are measured.
    `endpoints`: the run lasts until every Service's Endpoints holds its
    pod's address (False where kube-controller-manager still works off
    what came before: a history of thousands of Services)."""
    label = f"training-operator-{peer.name}" if peer else mode
    namespace = create_namespace(ctx, f"{scenario}-{label}")
    expected_pods = sum(
        sum(r["replicas"] for r in j["spec"]["replicaSpecs"]) for j in jobs
    )  # every replica of these jobs has a pod and a Service
    log(f"{scenario}/{label}: {len(jobs)} job(s), {expected_pods} pods in {namespace}")
    kind = KUBEFLOW_TFJOBS if peer else DLK8S_TFJOBS
    if peer:
        jobs = [kubeflow_tfjob(j) for j in jobs]
    watch_file = ctx.raw / f"watch-{namespace}.json"
    watcher = Watcher(ctx.endpoint, namespace, watch_file, jobs=kind).start()
    op: Controller | None = None
    spy = None
    ceiling: Ceiling | None = None
    speedscope = ctx.raw / f"profile-{scenario}{'-baseline' if src else ''}.speedscope.json"
    if peer:
        log_file = ctx.raw / f"training-operator-{peer.name}-{scenario}.log"
        op = TrainingOperator(ctx.cluster, peer, log_file).start()
    elif mode == "operator":
        suffix = ("-profile" if profile else "") + ("-baseline" if src else "")
        op = start_operator(ctx, f"operator-{scenario}{suffix}", src)
    if op is not None:
        if settle:
            wait_quiet(op, timeout=ctx.args.timeout)
        if profile:
            spy = start_py_spy(op.pid, speedscope, ctx.args.py_spy_args)
        before_requests = operator_requests(op)
        before_passes = operator_reconciles(op)
        op_cpu0 = proc_cpu(op.pid)
        then = None
    else:
        ceiling = Ceiling(ctx.api, namespace, jobs, ctx.config, ctx.args.api_parallelism)
        assert ceiling.children() == 2 * expected_pods, "pods + services"
        then = ceiling.then

    cp0 = cpu_of(ctx.control_plane)
    me0, watch0, all0 = proc_cpu(os.getpid()), proc_cpu(watcher.pid), machine_busy()
    api0 = apiserver_requests(ctx.api)
    costs0 = ctx.server_metrics.read()
    profile = None
    if ctx.args.apiserver_profile_seconds > 0 and scenario != "warmup":
        out = ctx.raw / f"apiserver-{namespace}.pprof"
        profile = Profile(ctx.api, ctx.args.apiserver_profile_seconds, out).start()
    t0 = time.monotonic()
    subs = submit_all(ctx, namespace, jobs, then, rate, path=kind.path)
    submitted = time.monotonic()
    timeout = ctx.args.peer_timeout if peer else ctx.args.timeout
    if not watcher.wait("pods_added", expected_pods, timeout):
        log(f"only {watcher.value('pods_added')}/{expected_pods} pods after {timeout}s")
    created = time.monotonic()
    if ceiling is not None:
        ceiling.wait_created()
    # Running: the job's status for the operator; every pod Running for the ceiling.
    if op is not None:
        ok = watcher.wait("jobs_running", len(jobs), timeout)
    else:
        ok = watcher.wait("pods_running", expected_pods, timeout)
    if not ok:
        log(f"not all Running after {timeout}s")
    running = time.monotonic()
    # The run is measured until kube-controller-manager has given every
    # Service its pod's address: a run that creates faster leaves it more
    # of that work after its last pod runs, and a window that ended there
    # would not count it (bench/results/results.md: Endpoints).
    if endpoints and not watcher.wait("endpoints_addressed", expected_pods, timeout):
        log(f"only {watcher.value('endpoints_addressed')}/{expected_pods} Endpoints addressed")
    result: dict[str, Any] = {"namespace": namespace, "jobs": len(jobs), "pods": expected_pods}
    if peer:
        result["training_operator"] = asdict(peer) | {"version": TRAINING_OPERATOR_VERSION}
    if op is not None:
        # training-operator's events queue behind its requests' rate limit.
        wait_quiet(op, timeout=timeout if peer else 120)
        if spy is not None:
            threads = thread_cpu(op.pid)
            result["profile"] = stop_py_spy(spy, speedscope)
            result["profile"]["thread_cpu"] = thread_groups(threads, speedscope)
            result["profile"]["args"] = ctx.args.py_spy_args
        result["operator"] = {
            "cpu_seconds": round(proc_cpu(op.pid) - op_cpu0, 2),
            "peak_rss_mb": round(proc_peak_rss(op.pid) / 2**20, 1),
            "requests": requests_table(delta(operator_requests(op), before_requests)),
            "reconciles": operator_reconciles(op) - before_passes,
        }
    if ceiling is not None:
        ceiling.stop()  # the endings not yet due are past the window, as the operator's are
        result["ceiling_endings"] = ceiling.endings_sent
    settled = time.monotonic()
    api1 = apiserver_requests(ctx.api)
    costs = Metrics.since(costs0, ctx.server_metrics.read())
    cp1 = cpu_of(ctx.control_plane)
    me1, watch1, all1 = proc_cpu(os.getpid()), proc_cpu(watcher.pid), machine_busy()
    if op is not None:
        op.stop()  # after the counts: its watches ending are not part of the run
    data = watcher.stop()
    known = sum(cp1[k] - cp0[k] for k in cp0) + (me1 - me0) + (watch1 - watch0)
    if op is not None:
        known += result["operator"]["cpu_seconds"]
    result |= {
        "apiserver_requests_by_verb": by_verb(delta(api1, api0)),
        "apiserver_requests": requests_table(delta(api1, api0)),
        "control_plane_cpu_seconds": {k: round(cp1[k] - cp0[k], 2) for k in cp0},
        "bench_cpu_seconds": round(me1 - me0, 2),
        "watcher_cpu_seconds": round(watch1 - watch0, 2),
        # Everything else on the machine (other people's tests...) while this ran.
        "other_cpu_seconds": round(all1 - all0 - known, 1),
        "phases_seconds": {
            "submit": round(submitted - t0, 2),
            "created_wait": round(created - t0, 2),
            "running_wait": round(running - t0, 2),
            "settled": round(settled - t0, 2),
        },
        "watch_events": data["events"],
        "server_costs": costs,
        "endpoints": endpoints_made(data["seen"].get("endpoints", {})),
    }
    if not peer:
        result["status_writes"] = status_changes(data["seen"]["tfjobs"])
    if profile is not None:
        # Before the namespace's deletion, which the window must not see.
        result["apiserver_profile"] = profile.summary(ctx.args.apiserver_profile_seconds + 60)
    result |= latencies(subs, data["seen"], "operator" if op is not None else mode)
    if ceiling is not None and ceiling.create_times:
        result["ceiling_last_create_return_s"] = round(max(ceiling.create_times) - t0, 3)
    gone = delete_namespace(ctx, namespace)
    result["cleanup_seconds"] = round(gone, 1)
    log(
        f"{scenario}/{label}: all pods created {result['total_created_s']}s, "
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
    `repeat` (else --repeat) times in a rotating order, then training-operator
    with each of the `peers` settings (peer.SETTINGS) as many times; for
    each, the run with the median `median_of`. `options` go to run_burst."""
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
    if peers:
        warm_up_peer(ctx)
    for name in peers:
        settings = SETTINGS[name]
        runs[f"training-operator-{name}"] = [
            run_burst(ctx, scenario, "peer", jobs, peer=settings, **options) for _ in range(repeat)
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
                for run in rs
            ]
            for name, rs in runs.items()
        }
    return out


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


def pct(values: list[float], p: float) -> float | None:
    vals = sorted(v for v in values if v == v)
    if not vals:
        return None
    k = (len(vals) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(vals) - 1)
    return round(vals[lo] + (vals[hi] - vals[lo]) * (k - lo), 3)


def requests_table(counts: Counter[tuple[str, str]]) -> dict[str, int]:
    return {f"{verb} {resource}": n for (verb, resource), n in sorted(counts.items()) if n}


# --- profiling ---------------------------------------------------------------------------------


def start_py_spy(pid: int, out: Path, args: str) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    try:
        proc = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--format", "speedscope",
             "--output", str(out), *args.split()],
            stdout=subprocess.DEVNULL, stderr=(out.parent / "py-spy.log").open("wb"),
        )  # fmt: skip
    except OSError as err:
        log(f"py-spy unavailable: {err}")
        return None
    time.sleep(1)
    if proc.poll() is not None:
        log(f"py-spy exited {proc.returncode}; see {out.parent / 'py-spy.log'}")
        return None
    return proc


def thread_groups(cpu: dict[int, float], speedscope: Path) -> dict[str, float]:
    """The operator's CPU seconds by kind of thread, named from the profile's
    thread names and, for informers, the event handler their stacks show."""
    from report import thread_labels

    labels = thread_labels(speedscope)
    groups: Counter[str] = Counter()
    for tid, seconds in cpu.items():
        groups[labels.get(tid, "other (start-up, main, unsampled)")] += seconds
    return {k: round(v, 2) for k, v in groups.most_common()}


def stop_py_spy(proc: subprocess.Popen[bytes], out: Path) -> dict[str, Any]:
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    from report import summarize_speedscope

    return summarize_speedscope(out)


def git_describe() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


# --- the cluster ----------------------------------------------------------------------------------


def add_common_args(p: argparse.ArgumentParser) -> None:
    """The options of the cluster, the operator and the runs, for every benchmark."""
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--pods-per-node", type=int, default=1100)
    p.add_argument(
        "--api-parallelism", type=int, default=32, help="the operator's and the ceiling's"
    )
    p.add_argument("--workers", type=int, default=0, help="operator workers (0: the chart's)")
    p.add_argument("--submit-parallelism", type=int, default=32)
    p.add_argument(
        "--pod-gc-threshold",
        type=int,
        default=12500,
        help="kube-controller-manager's --terminated-pod-gc-threshold (<= 0: keep every pod)",
    )
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument(
        "--peer-timeout",
        type=float,
        default=900,
        help="--timeout of training-operator's runs (stock, at 20 requests a second, is slow)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of the compared scenarios per variant (rotating order); the median is shown",
    )
    p.add_argument(
        "--py-spy-args",
        default="--gil --rate 100",
        help="py-spy record options (e.g. --gil: only the thread holding the GIL)",
    )
    p.add_argument(
        "--apiserver-profile-seconds",
        type=int,
        default=0,
        help="kube-apiserver's CPU profile over each compared run's first seconds (0: none)",
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--label", default="", help="a note stored with the results")
    p.add_argument(
        "--baseline-src",
        default="",
        help="also run the compared scenarios with the dlk8s package in this directory"
        " (PYTHONPATH), e.g. a checkout of an earlier commit's hooks/: before/after",
    )


@contextmanager
def open_context(
    args: argparse.Namespace, kueue: bool = False, gpus_per_node: int | None = None
) -> Iterator[tuple[Context, dict[str, Any]]]:
    """A local control plane with the chart installed, warmed up; the context of
    the runs and the results' "meta" (the machine, the date, the commit).
    `kueue`: Kueue's manager beside it, and the chart's kueue.enabled=true."""
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    gpus = {} if gpus_per_node is None else {"gpu": gpus_per_node}
    nodes = [NodeSpec(f"kwok-node-{i}", pods=args.pods_per_node, **gpus) for i in range(args.nodes)]
    cluster = LocalCluster(
        nodes=nodes,
        terminated_pod_gc_threshold=args.pod_gc_threshold,
        kueue=kueue,
        profiling=args.apiserver_profile_seconds > 0,
    )
    cluster.start()
    try:
        sets = ("cloud=gke", "kueue.enabled=true") if kueue else ("cloud=gke",)
        install = install_chart(cluster, sets=sets)
        endpoint = Endpoint(cluster.server, cluster.token, str(cluster.ca_file))
        api = Api(endpoint, maxsize=max(args.api_parallelism, args.submit_parallelism) + 8)
        config_file = install.write_operator_config(raw / "chart-config")
        env = {"DLK8S_API_PARALLELISM": str(args.api_parallelism)}
        if args.workers:
            env["DLK8S_WORKERS"] = str(args.workers)
        ctx = Context(
            args=args,
            cluster=cluster,
            install=install,
            api=api,
            endpoint=endpoint,
            config=load_config(config_file),
            control_plane={proc_name(pid): pid for pid in cluster.pids},
            server_metrics=Metrics(api, cluster.controller_manager_metrics),
            raw=raw,
            operator_env=env,
        )
        meta = machine_meta(ctx)
        warm_up(ctx)
        yield ctx, meta
    finally:
        cluster.stop()


def machine_meta(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    return {
        "label": args.label,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model(),
        "memory_gb": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
        "nodes": f"{args.nodes} x {args.pods_per_node} pods",
        "api_parallelism": args.api_parallelism,
        "workers": args.workers or ctx.install.operator_env().get("DLK8S_WORKERS"),
        "submit_parallelism": args.submit_parallelism,
        "pod_gc_threshold": args.pod_gc_threshold,
        "cluster_startup_s": round(ctx.cluster.startup_seconds, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "git": git_describe(),
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def warm_up(ctx: Context) -> None:
    # The controller-manager's garbage collector must watch TFJobs before
    # we start, or it looks up every pod's owner with a GET.
    wait_for(lambda: longrunning_watches(ctx.api, "tfjobs") >= 1, 120, "the GC to watch TFJobs")
    # The first TFJob, pod and Service a fresh apiserver stores are slow
    # (storage set up lazily, connections opened): warm up, unrecorded.
    warm = [tfjob(f"warm-{i}", 2, 1) for i in range(4)]
    run_burst(ctx, "warmup", "ceiling", warm)


def warm_up_peer(ctx: Context) -> None:
    """training-operator's CRDs and its first jobs, unrecorded, and the
    garbage collector watching its TFJobs, as warm_up for dlk8s's."""
    install_peer(ctx.cluster)
    warm = [tfjob(f"warm-{i}", 2, 1) for i in range(4)]
    run_burst(ctx, "warmup", "peer", warm, peer=SETTINGS["tuned"])
    wait_for(
        lambda: longrunning_watches(ctx.api, "tfjobs", group="kubeflow.org") >= 1,
        120,
        "the GC to watch Kubeflow's TFJobs",
    )
