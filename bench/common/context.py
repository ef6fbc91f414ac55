"""The local control plane the burst, scale and Kueue benchmarks run on.

``open_context`` starts it (kwok nodes), installs the chart and warms the
apiserver up, and yields the ``Context`` of the runs with the results'
"meta" (the machine, the date, the commit); ``add_common_args`` gives every
such benchmark the options of the cluster, the operator and the runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.api import Api, Endpoint
from bench.common.devtools import REPO_ROOT, LocalCluster, NodeSpec, install_chart
from bench.common.harness import Context, tfjob, wait_for
from bench.common.measure import longrunning_watches, proc_name
from bench.common.operator import load_config
from bench.common.paths import RESULTS
from bench.common.runs import run_burst
from bench.common.servercosts import Metrics


def endpoint_of(cluster: LocalCluster) -> Endpoint:
    """Where a cluster's API server is, and the admin's login (picklable, for watchers)."""
    return Endpoint(cluster.server, cluster.token, str(cluster.ca_file))


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
    args: argparse.Namespace,
    kueue: bool = False,
    gpus_per_node: int | None = None,
    kueue_frameworks: Sequence[str] = (),
    kcm_controllers: Sequence[str] = (),
) -> Iterator[tuple[Context, dict[str, Any]]]:
    """A local control plane with the chart installed, warmed up; the context of
    the runs and the results' "meta" (the machine, the date, the commit).
    `kueue`: Kueue's manager beside it, and the chart's kueue.enabled=true;
    `kueue_frameworks`: its integrations beyond batch/job (their CRDs may
    come later: Kueue sets each up once its API is served);
    `kcm_controllers`: kube-controller-manager's beyond the cluster's
    (peers.Peer.kcm_controllers)."""
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    gpus = {} if gpus_per_node is None else {"gpu": gpus_per_node}
    nodes = [NodeSpec(f"kwok-node-{i}", pods=args.pods_per_node, **gpus) for i in range(args.nodes)]
    cluster = LocalCluster(
        nodes=nodes,
        terminated_pod_gc_threshold=args.pod_gc_threshold,
        kueue=kueue,
        extra_controllers=tuple(kcm_controllers),
        kueue_options={"frameworks": ("batch/job", *kueue_frameworks)} if kueue_frameworks else {},
        profiling=args.apiserver_profile_seconds > 0,
    )
    cluster.start()
    try:
        sets = ("cloud=gke", "kueue.enabled=true") if kueue else ("cloud=gke",)
        install = install_chart(cluster, sets=sets)
        endpoint = endpoint_of(cluster)
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
