"""Benchmark of the dlk8s operator against the ceiling, on the local control plane.

    make bench                       # the full run (results in bench/results/)
    .tools/venv/bin/python bench/bench.py --jobs 20 --big-workers 50 \
        --finished 100 --running 10 --rest-seconds 20 --latency-jobs 20  # a quick one

One local control plane (4 kwok nodes x 1100 pods), the chart installed, the
operator run as a local process with the chart's ServiceAccount and its
environment, a fresh process per measured run (so its CPU seconds and peak
RSS, from /proc, belong to that run). The long scenarios at scale (history,
restart, memory, sustained arrival) are scale.py's (`make bench-scale`).

1. burst: --jobs TFJobs x 4 replicas (MASTER, 2 WORKER, PS) submitted at once;
   then the same burst with Kubeflow's training-operator, stock and tuned
   (--peers; peer.py), as kubeflow.org TFJobs of the same shape
2. wide: one TFJob with a MASTER and --big-workers WORKERs
3. rest: --finished finished and --running running jobs, a fresh operator
   started on them, then --rest-seconds of nothing happening (and as long
   without the operator, to tell its requests from everyone else's)
4. latency: how long the job's status lags behind its pods (latency.py)
profile: scenario 1's operator run again under py-spy.

For 1 and 2 the ceiling runs back to back with the operator on the same
cluster (harness.py says how it is made and measured); for 1,
training-operator after them, measured the same way. Each of those runs
also records where the control plane's time goes (servercosts.py):
kube-apiserver's CPU profile over the run's first --apiserver-profile-seconds,
its metrics and kube-controller-manager's, and what each of the operator's
status writes changed. A run is measured until kube-controller-manager has
given every Service its pod's address, the ceiling's as the operator's: a
window that ended with the last pod Running would leave out the Endpoints
updates a faster run only postpones.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from harness import (
    Context,
    add_common_args,
    compare,
    create_namespace,
    delete_namespace,
    log,
    open_context,
    operator_requests,
    requests_table,
    run_burst,
    start_operator,
    submit_all,
    tfjob,
    wait_quiet,
)
from measure import (
    Watcher,
    apiserver_requests,
    by_verb,
    delta,
    proc_cpu,
    proc_peak_rss,
)
from peer import SETTINGS

from dlk8s_dev.localdeploy import OperatorProcess
from dlk8s_dev.stopping import interrupt_on_termination

# What the operator may ask the API server for (and leases, with leader election).
OPERATOR_RESOURCES = {"tfjobs", "mxjobs", "caffe2jobs", "paddlejobs", "pods", "services"}
OPERATOR_RESOURCES |= {"configmaps", "deployments", "events", "nodes"}


# --- at rest ------------------------------------------------------------------------------------


def operator_resources(ctx: Context) -> set[str]:
    leader = ctx.install.operator_env().get("DLK8S_LEADER_ELECT", "false") == "true"
    return OPERATOR_RESOURCES | ({"leases"} if leader else set())


def run_rest(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    namespace = create_namespace(ctx, "rest")
    log(f"rest: {args.finished} finished + {args.running} running jobs in {namespace}")
    watcher = Watcher(ctx.endpoint, namespace, ctx.raw / f"watch-{namespace}.json").start()
    setup_op = start_operator(ctx, "operator-rest-setup")
    began = time.monotonic()
    finished = [tfjob(f"done-{i:04d}", 0, 0, exit_code=0) for i in range(args.finished)]
    running = [tfjob(f"run-{i:04d}", 2, 1) for i in range(args.running)]
    submit_all(ctx, namespace, finished + running)
    if not watcher.wait("jobs_finished", args.finished, args.timeout, step=0.5):
        log(f"only {watcher.value('jobs_finished')}/{args.finished} jobs finished")
    if not watcher.wait("jobs_running_now", args.running, args.timeout, step=0.5):
        log(f"only {watcher.value('jobs_running_now')}/{args.running} jobs running")
    wait_quiet(setup_op)
    setup_seconds = time.monotonic() - began
    setup_op.stop()
    result: dict[str, Any] = {
        "namespace": namespace,
        "finished_jobs": watcher.value("jobs_finished"),
        "running_jobs": watcher.value("jobs_running_now"),
        "pods": watcher.value("pods_added") - watcher.value("pods_gone"),
        "setup_seconds": round(setup_seconds, 1),
    }
    window = args.rest_seconds

    # The same window with no operator: what everything else asks of the apiserver.
    base0 = apiserver_requests(ctx.api)
    b0 = time.monotonic()
    time.sleep(window)
    baseline = delta(apiserver_requests(ctx.api), base0)
    base_min = 60 / (time.monotonic() - b0)
    # A fresh operator on the settled world: start-up, then at rest.
    op = OperatorProcess(
        ctx.install, workdir=ctx.raw, name="operator-rest", env=dict(ctx.operator_env)
    )
    op.log_path.unlink(missing_ok=True)
    api0 = apiserver_requests(ctx.api)
    op.start(wait_ready=False)
    t0 = time.monotonic()
    op.wait_ready()
    ready = time.monotonic() - t0
    wait_quiet(op)
    startup_requests = operator_requests(op)
    startup_cpu = proc_cpu(op.pid)
    startup_api = delta(apiserver_requests(ctx.api), api0)

    api1 = apiserver_requests(ctx.api)
    cpu1 = proc_cpu(op.pid)
    w0 = time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - w0
    rest_requests = delta(operator_requests(op), startup_requests)
    rest_api = delta(apiserver_requests(ctx.api), api1)
    cpu2 = proc_cpu(op.pid)
    per_min = 60 / elapsed
    extra = delta(
        Counter({k: v * per_min for k, v in rest_api.items()}),
        Counter({k: v * base_min for k, v in baseline.items()}),
    )
    result |= {
        "startup": {
            "ready_seconds": round(ready, 2),
            "cpu_seconds": round(startup_cpu, 2),
            "operator_requests": requests_table(startup_requests),
            "apiserver_requests_by_verb": by_verb(startup_api),
        },
        "window_seconds": round(elapsed, 1),
        "operator_requests_per_minute": {
            k: round(v * per_min, 1) for k, v in requests_table(rest_requests).items()
        },
        "operator_cpu_seconds_per_minute": round((cpu2 - cpu1) * per_min, 3),
        "apiserver_requests_per_minute_by_verb": {
            k: round(v * per_min, 1) for k, v in by_verb(rest_api).items()
        },
        "apiserver_requests_per_minute_without_operator": {
            k: round(v * base_min, 1) for k, v in by_verb(baseline).items()
        },
        # Only what the operator could have asked for: the rest (leases, node
        # status, endpoints) is the other components' timing between windows.
        "apiserver_extra_requests_per_minute_with_operator": {
            f"{verb} {res}": round(v, 1)
            for (verb, res), v in sorted(extra.items())
            if abs(v) >= 0.5 and res.split("/")[0] in operator_resources(ctx)
        },
        "operator": {
            "cpu_seconds": round(cpu2, 2),
            "peak_rss_mb": round(proc_peak_rss(op.pid) / 2**20, 1),
        },
    }
    op.stop()
    watcher.stop()
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    log(
        f"rest: ready in {ready:.1f}s, {sum(rest_requests.values())} requests "
        f"in {elapsed:.0f}s, CPU {cpu2 - cpu1:.2f}s"
    )
    return result


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--jobs", type=int, default=200, help="scenario 1: TFJobs of 4 replicas")
    p.add_argument("--big-workers", type=int, default=500, help="scenario 2: WORKERs of one job")
    p.add_argument("--finished", type=int, default=1000, help="scenario 3: finished jobs")
    p.add_argument("--running", type=int, default=50, help="scenario 3: running jobs")
    p.add_argument("--rest-seconds", type=float, default=60, help="scenario 3: the window")
    p.add_argument("--latency-jobs", type=int, default=100, help="scenario 4: TFJobs")
    p.add_argument(
        "--latency-rate",
        type=float,
        default=5.0,
        help="scenario 4: jobs (and MASTER exits) a second in the paced variant",
    )
    p.add_argument(
        "--scenarios",
        default="burst,wide,rest,latency,profile",
        help="which to run; profile: scenario 1's operator run again under py-spy",
    )
    p.add_argument(
        "--peers",
        default="stock,tuned",
        help="scenario 1: training-operator's settings to run it with (peer.py; '' for none)",
    )
    add_common_args(p)
    # The compared runs' first seconds cover a burst of 200 jobs (servercosts.py).
    p.set_defaults(apiserver_profile_seconds=15)
    args = p.parse_args(argv)
    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    if set(args.peers) - set(SETTINGS):
        p.error(f"--peers: one of {', '.join(SETTINGS)}, comma-separated")
    return args


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    results: dict[str, Any] = {}
    with open_context(args) as (ctx, meta):
        results["meta"] = meta
        if "burst" in scenarios:
            jobs = [tfjob(f"burst-{i:04d}", 2, 1) for i in range(args.jobs)]
            results["burst"] = compare(ctx, "burst", jobs, peers=args.peers)
        if "profile" in scenarios:
            jobs = [tfjob(f"burst-{i:04d}", 2, 1) for i in range(args.jobs)]
            profiled = run_burst(ctx, "burst", "operator", jobs, profile=True)
            results["profile"] = {
                "py_spy": profiled.get("profile"),
                "total_created_s": profiled["total_created_s"],
                "total_running_s": profiled["total_running_s"],
                "operator": profiled["operator"],
            }
        if "wide" in scenarios:
            results["wide"] = compare(ctx, "wide", [tfjob("wide", args.big_workers, 0)])
        if "rest" in scenarios:
            results["rest"] = run_rest(ctx)
        if "latency" in scenarios:
            from latency import run_latency

            results["latency"] = run_latency(ctx)
    results["meta"]["wall_seconds"] = round(time.monotonic() - began, 1)
    from report import write_reports

    table = write_reports(results, args.out)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
