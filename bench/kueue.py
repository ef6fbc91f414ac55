"""How long a queued job takes to get its pods once Kueue admits it (issue #32).

    make bench-kueue                                  # the full run (bench/results/kueue.*)
    .tools/venv/bin/python bench/kueue.py --jobs 40 --quota-jobs 10 --out /tmp/kueue

One local control plane with Kueue's manager beside it (LocalCluster(kueue=True)),
the chart installed with kueue.enabled=true, so every operator here runs with
--kueue. --jobs TFJobs (1 MASTER + --job-workers WORKERs, each pod asking for
--gpus-per-pod nvidia.com/gpu; the MASTER exits 0 --run-for after it runs,
kwok's exit-code annotation, and the job succeeds) in three modes, each on a
fresh operator and in a namespace of its own:

- kueue: every job names a LocalQueue whose ClusterQueue's GPU quota admits
  --quota-jobs of them at once; the queue drains as jobs end. Per job: from
  its Workload's Admitted condition turning True to its last pod created.
- gated: the same jobs with no queue label, the benchmark itself keeping
  --quota-jobs in flight (it submits the next when one succeeds): the same
  load as through Kueue. Per job: from the job created to its last pod created.
- burst: the same jobs with no queue label, all submitted at once.

Every time is the receipt of a watch event by one watcher process
(measure.Watcher), on the machine's monotonic clock; the Workloads' seconds-
resolution lastTransitionTime is not used. The nodes have GPUs for every pod
of every mode, so the quota is the only gate. Checks on the kueue mode: no
more Workloads admitted at once than the quota, no pod created before its
Workload's admission (compared by resourceVersion, etcd's order), no
readmission, and nothing left reserved in the ClusterQueue once it drained.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness import (
    EXIT_CODE,
    RESULTS,
    RUN_DURATION,
    Context,
    add_common_args,
    create_namespace,
    delete_namespace,
    log,
    open_context,
    operator_requests,
    pct,
    requests_table,
    start_operator,
    submit_all,
    tfjob,
    wait_for,
    wait_quiet,
)
from measure import Watcher, cpu_of, delta, proc_cpu, proc_peak_rss

from dlk8s.job.vocabulary import LABEL_QUEUE_NAME
from dlk8s_dev.localcluster import pinned_versions
from dlk8s_dev.stopping import interrupt_on_termination

GPU = "nvidia.com/gpu"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
FLAVOR = "bench-gpus"
MODES = ("kueue", "gated", "burst")


# --- the jobs and the queue ---------------------------------------------------------------


def bench_job(name: str, queue: str, args: argparse.Namespace) -> dict[str, Any]:
    """harness.tfjob with GPUs asked for, its MASTER ending after --run-for, in `queue`."""
    job = tfjob(name, args.job_workers, 0)
    gpus = {GPU: str(args.gpus_per_pod)}
    for spec in job["spec"]["replicaSpecs"]:
        template = spec["template"]
        template["spec"]["containers"][0]["resources"] = {"requests": gpus, "limits": gpus}
        if spec["tfReplicaType"] == "MASTER":
            template["metadata"] = {"annotations": {EXIT_CODE: "0", RUN_DURATION: args.run_for}}
    if queue:
        job["metadata"]["labels"] = {LABEL_QUEUE_NAME: queue}
    return job


def make_queue(ctx: Context, namespace: str) -> str:
    """A ClusterQueue for `namespace` whose GPUs admit --quota-jobs jobs at
    once, and its LocalQueue of the same name; returns that name."""
    args = ctx.args
    quota = args.quota_jobs * (1 + args.job_workers) * args.gpus_per_pod
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor"}
    ctx.api.json("POST", f"{KUEUE_API}/resourceflavors", flavor | {"metadata": {"name": FLAVOR}},
                 ok=(409,))  # fmt: skip
    name = f"bench-{namespace}"
    group = {
        "coveredResources": [GPU],
        "flavors": [{"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": str(quota)}]}],
    }
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    ctx.api.json("POST", f"{KUEUE_API}/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": selector, "resourceGroups": [group]},
    })  # fmt: skip
    ctx.api.json("POST", f"{KUEUE_API}/namespaces/{namespace}/localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": name},
    })  # fmt: skip
    wait_for(lambda: condition_true(cluster_queue(ctx, name), "Active"), 60, f"{name} Active")
    return name


def cluster_queue(ctx: Context, name: str) -> dict[str, Any]:
    found: dict[str, Any] = ctx.api.json("GET", f"{KUEUE_API}/clusterqueues/{name}")
    return found


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def reserved_gpus(cq: dict[str, Any]) -> float:
    """GPUs the ClusterQueue holds reserved (a quantity: "0", "200", "1500m")."""
    status = cq.get("status") or {}
    totals = [
        str(res.get("total", "0"))
        for flavor in status.get("flavorsReservation") or []
        for res in flavor.get("resources") or []
        if res.get("name") == GPU
    ]
    return sum(float(t[:-1]) / 1000 if t.endswith("m") else float(t) for t in totals)


def drained_queue(ctx: Context, name: str) -> dict[str, Any]:
    """The ClusterQueue's status once every job ended: Kueue writes it a
    little later, so the benchmark waits up to 30 s for it to show nothing
    reserved, then reports what it shows."""
    deadline = time.monotonic() + 30
    while True:
        cq = cluster_queue(ctx, name)
        status = cq.get("status") or {}
        busy = status.get("reservingWorkloads", 0) or status.get("admittedWorkloads", 0)
        if not (busy or reserved_gpus(cq)) or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {
        "reserving_workloads": status.get("reservingWorkloads", 0),
        "admitted_workloads": status.get("admittedWorkloads", 0),
        "pending_workloads": status.get("pendingWorkloads", 0),
        "reserved_gpus": reserved_gpus(cq),
    }


# --- one mode -------------------------------------------------------------------------------


def submit_gated(
    ctx: Context, namespace: str, jobs: list[dict[str, Any]], watcher: Watcher, in_flight: int
) -> None:
    """`in_flight` jobs at once, then the next as each one succeeds (all at
    once when `in_flight` covers them all)."""
    sent = min(in_flight, len(jobs))
    submit_all(ctx, namespace, jobs[:sent])
    deadline = time.monotonic() + ctx.args.timeout
    while sent < len(jobs) and time.monotonic() < deadline:
        allowed = min(len(jobs), in_flight + watcher.value("jobs_succeeded"))
        if allowed > sent:
            submit_all(ctx, namespace, jobs[sent:allowed])
            sent = allowed
        else:
            time.sleep(0.05)


def wait_drained(watcher: Watcher, jobs: int, timeout: float, stall: float = 120) -> bool:
    """Until every job succeeded; gives up once none has for `stall` seconds
    (a queue that stopped draining is a finding, not a reason to wait on)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        done = watcher.value("jobs_succeeded")
        if done >= jobs:
            return True
        if done != last:
            last, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            return False
        time.sleep(0.2)
    return False


def run_mode(ctx: Context, mode: str) -> dict[str, Any]:
    args = ctx.args
    namespace = create_namespace(ctx, f"kueue-{mode}")
    queue = make_queue(ctx, namespace) if mode == "kueue" else ""
    jobs = [bench_job(f"tf-{i:04d}", queue, args) for i in range(args.jobs)]
    log(f"{mode}: {len(jobs)} TFJobs in {namespace}" + (f", queue {queue}" if queue else ""))
    raw = ctx.raw / f"watch-{namespace}.json"
    watcher = Watcher(ctx.endpoint, namespace, raw, workloads=mode == "kueue").start()
    op = start_operator(ctx, f"operator-kueue-{mode}")
    requests0, cpu0, cp0 = operator_requests(op), proc_cpu(op.pid), cpu_of(ctx.control_plane)
    t0 = time.monotonic()
    submit_gated(ctx, namespace, jobs, watcher, args.quota_jobs if mode == "gated" else len(jobs))
    if not wait_drained(watcher, len(jobs), args.timeout - (time.monotonic() - t0)):
        log(f"{mode}: only {watcher.value('jobs_succeeded')}/{len(jobs)} jobs succeeded")
    drained = time.monotonic() - t0
    wait_quiet(op)
    cp1 = cpu_of(ctx.control_plane)
    result: dict[str, Any] = {
        "namespace": namespace,
        "jobs": len(jobs),
        "jobs_succeeded": watcher.value("jobs_succeeded"),
        "drain_seconds": round(drained, 1),
        "operator": {
            "cpu_seconds": round(proc_cpu(op.pid) - cpu0, 2),
            "peak_rss_mb": round(proc_peak_rss(op.pid) / 2**20, 1),
            "requests": requests_table(delta(operator_requests(op), requests0)),
            "log_problems": log_problems(op.log_path),
        },
        "control_plane_cpu_seconds": {k: round(cp1[k] - cp0[k], 2) for k in cp0},
    }
    if queue:
        result["cluster_queue_after"] = drained_queue(ctx, queue)
        save_evidence(ctx, namespace)
    op.stop()
    seen = watcher.stop()["seen"]
    result |= figures(seen, mode, 1 + args.job_workers, args.quota_jobs)
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    if queue:
        ctx.api.json("DELETE", f"{KUEUE_API}/clusterqueues/{queue}", ok=(404,))
    log(f"{mode}: per job p50 {result['pods_created_p50_s']}s p99 {result['pods_created_p99_s']}s")
    return result


def save_evidence(ctx: Context, namespace: str) -> None:
    """The Workloads and jobs as they ended, and Kueue's log, into raw/: what
    to read when a check fails (the cluster's folder goes with it)."""
    state = {
        "workloads": ctx.api.json("GET", f"{KUEUE_API}/namespaces/{namespace}/workloads"),
        "tfjobs": ctx.api.json("GET", f"/apis/dlk8s.io/v1alpha1/namespaces/{namespace}/tfjobs"),
    }
    (ctx.raw / f"state-{namespace}.json").write_text(json.dumps(state))
    if ctx.cluster.kueue_process is not None and ctx.cluster.kueue_process.log_file.exists():
        shutil.copy(ctx.cluster.kueue_process.log_file, ctx.raw / f"kueue-{namespace}.log")


def log_problems(path: Path, keep: int = 5) -> dict[str, Any]:
    """The operator's log lines (JSON, logs.JsonFormatter) of warnings and errors."""
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    errors = [line for line in lines if '"level": "error"' in line or "Traceback" in line]
    warnings = [line for line in lines if '"level": "warning"' in line]
    return {
        "errors": len(errors),
        "warnings": len(warnings),
        "first": [line[:300] for line in (errors + warnings)[:keep]],
    }


# --- the figures -------------------------------------------------------------------------


def figures(seen: dict[str, Any], mode: str, pods_per_job: int, quota: int) -> dict[str, Any]:
    """Per job, from its start (Admitted with Kueue, else created) to its
    `pods_per_job`-th pod created, for all and apart for the first `quota`
    to start and the rest; with Kueue, the queue's wait and checks too."""
    pods: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in seen["pods"].values():
        pods[pod["job"]].append(pod)
    workloads: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for wl in seen.get("workloads", {}).values():
        workloads[wl["job"]].append(wl)
    delays, starts, waits, incomplete = {}, {}, {}, []
    for name, job in seen["tfjobs"].items():
        added = sorted(p["added"] for p in pods[name])
        start = job["added"]
        if mode == "kueue":
            admitted = [w["admitted"] for w in workloads[name] if "admitted" in w]
            start = min(admitted) if admitted else float("nan")
            waits[name] = start - job["added"]
        if len(added) < pods_per_job or start != start:
            incomplete.append(name)
            continue
        delays[name], starts[name] = added[pods_per_job - 1] - start, start
    out: dict[str, Any] = {
        "jobs_measured": len(delays),
        "jobs_incomplete": sorted(incomplete)[:20],
        "pods_created_p50_s": pct(list(delays.values()), 50),
        "pods_created_p99_s": pct(list(delays.values()), 99),
        "pods_created_max_s": pct(list(delays.values()), 100),
    }
    # With Kueue and gated: the first wave starts together, the rest one by
    # one as others end; all at once: the first `quota` created, the rest.
    order = sorted(delays, key=lambda n: starts[n])
    for key, names in (("first_started", order[:quota]), ("started_later", order[quota:])):
        out[key] = {
            "jobs": len(names),
            "p50_s": pct([delays[n] for n in names], 50),
            "p99_s": pct([delays[n] for n in names], 99),
        }
    if mode == "kueue":
        out["queue_wait_p50_s"] = pct(list(waits.values()), 50)
        out["queue_wait_p99_s"] = pct(list(waits.values()), 99)
        out["checks"] = queue_checks(pods, workloads, quota)
    return out


def queue_checks(
    pods: dict[str, list[dict[str, Any]]],
    workloads: dict[str, list[dict[str, Any]]],
    quota: int,
) -> dict[str, Any]:
    """What must hold of a queue: never more admitted than the quota, no pod
    before its admission, no readmission, one Workload per job."""
    steps: list[tuple[float, int]] = []
    for wls in workloads.values():
        for wl in wls:
            if "admitted" in wl:
                steps.append((wl["admitted"], 1))
                if "finished" in wl:
                    steps.append((wl["finished"], -1))
    at_once = peak = 0
    for _, step in sorted(steps):
        at_once += step
        peak = max(peak, at_once)
    early = []
    for job, job_pods in pods.items():
        rvs = [w["admitted_rv"] for w in workloads.get(job, []) if "admitted_rv" in w]
        first = min(rvs) if rvs else None
        early += [p for p in job_pods if first is None or p["rv"] < first]

    def count(pred: Any) -> int:
        return sum(1 for wls in workloads.values() if pred(wls))

    return {
        "quota_jobs": quota,
        "max_admitted_at_once": peak,
        "workloads_admitted": count(lambda wls: any("admitted" in w for w in wls)),
        "workloads_finished": count(lambda wls: any("finished" in w for w in wls)),
        "pods_before_admission": len(early),
        "readmissions": sum(
            max(0, w.get("admissions", 0) - 1) for wls in workloads.values() for w in wls
        ),
        "jobs_with_more_than_one_workload": count(lambda wls: len(wls) > 1),
    }


# --- the report ---------------------------------------------------------------------------


def ratio(a: Any, b: Any) -> str:
    return (
        f"{a / b:.2f}" if isinstance(a, int | float) and isinstance(b, int | float) and b else "-"
    )


def cell(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def markdown(results: dict[str, Any]) -> str:
    meta, runs = results["meta"], results["runs"]
    modes = [m for m in MODES if m in runs]
    names = {
        "kueue": "with Kueue",
        "gated": f"without, {meta['quota_jobs']} at a time",
        "burst": "without, all at once",
    }
    q = meta["quota_jobs"]
    rows: list[tuple[str, list[Any]]] = [
        ("from", ["Workload Admitted" if m == "kueue" else "job created" for m in modes]),
        ("to all pods created, per job p50 (s)", [runs[m]["pods_created_p50_s"] for m in modes]),
        ("to all pods created, per job p99 (s)", [runs[m]["pods_created_p99_s"] for m in modes]),
        (f"the first {q} to start: p50 (s)", [runs[m]["first_started"]["p50_s"] for m in modes]),
        (f"the first {q} to start: p99 (s)", [runs[m]["first_started"]["p99_s"] for m in modes]),
        ("the others: p50 (s)", [runs[m]["started_later"]["p50_s"] for m in modes]),
        ("the others: p99 (s)", [runs[m]["started_later"]["p99_s"] for m in modes]),
        ("jobs measured", [runs[m]["jobs_measured"] for m in modes]),
        (
            "queue wait, created to Admitted, p50 (s)",
            [runs[m].get("queue_wait_p50_s") for m in modes],
        ),
        (
            "queue wait, created to Admitted, p99 (s)",
            [runs[m].get("queue_wait_p99_s") for m in modes],
        ),
        ("all jobs succeeded after (s)", [runs[m]["drain_seconds"] for m in modes]),
        ("operator CPU seconds", [runs[m]["operator"]["cpu_seconds"] for m in modes]),
        ("Kueue CPU seconds", [runs[m]["control_plane_cpu_seconds"].get("kueue") for m in modes]),
    ]
    lines = [
        "## Kueue: from admission to pods",
        "",
        f"{meta['date']}, {meta['git']}, {meta['cpus']} CPUs ({meta['cpu_model']}),"
        f" kwok nodes {meta['nodes']}, Kueue {meta['kueue']}. {meta['jobs']} TFJobs of"
        f" 1 MASTER + {meta['job_workers']} WORKERs, each pod asking for {meta['gpus_per_pod']}"
        f" {GPU}; each MASTER exits 0 {meta['run_for']} after it runs. The ClusterQueue"
        f" admits {meta['quota_jobs']} jobs at once. Times between watch events as one"
        f" watcher receives them. The run took {meta.get('wall_seconds')} s.",
        "",
        "| | " + " | ".join(names[m] for m in modes) + " |",
        "|---|" + "---:|" * len(modes),
    ]
    lines += [f"| {label} | " + " | ".join(cell(v) for v in vals) + " |" for label, vals in rows]
    lines += ["", *summary(runs)]
    return "\n".join(lines) + "\n"


def summary(runs: dict[str, Any]) -> list[str]:
    out = []
    kueue = runs.get("kueue")
    for other, how in (("gated", "the same load without Kueue"), ("burst", "all at once")):
        if kueue and other in runs:
            them = runs[other]
            p50 = ratio(kueue["pods_created_p50_s"], them["pods_created_p50_s"])
            p99 = ratio(kueue["pods_created_p99_s"], them["pods_created_p99_s"])
            first = ratio(kueue["first_started"]["p99_s"], them["first_started"]["p99_s"])
            later = ratio(kueue["started_later"]["p99_s"], them["started_later"]["p99_s"])
            out.append(
                f"- Kueue / {how}: p50 {p50}, p99 {p99}"
                f" (p99 of the first to start {first}, of the others {later})."
            )
    if kueue:
        checks = kueue["checks"] | {"left reserved": kueue.get("cluster_queue_after")}
        out.append("- Checks: " + ", ".join(f"{k} {v}" for k, v in checks.items()) + ".")
    return out


# --- main ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--jobs", type=int, default=200, help="TFJobs per mode")
    p.add_argument("--job-workers", type=int, default=3, help="WORKERs per job (and 1 MASTER)")
    p.add_argument("--gpus-per-pod", type=int, default=1)
    p.add_argument("--quota-jobs", type=int, default=50, help="jobs the quota admits at once")
    p.add_argument("--run-for", default="10s", help="how long a MASTER runs (a Go duration)")
    p.add_argument("--gpus-per-node", type=int, default=250, help="enough for every mode's pods")
    p.add_argument("--modes", default=",".join(MODES), help="which of kueue, gated, burst")
    add_common_args(p)
    p.set_defaults(timeout=900.0, out=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results: dict[str, Any] = {"runs": {}}
    with open_context(args, kueue=True, gpus_per_node=args.gpus_per_node) as (ctx, meta):
        keys = ("jobs", "job_workers", "gpus_per_pod", "quota_jobs", "run_for")
        results["meta"] = meta | {k: getattr(args, k) for k in keys}
        results["meta"]["kueue"] = pinned_versions().get("KUEUE_VERSION", "?")
        for mode in modes:
            results["runs"][mode] = run_mode(ctx, mode)
            # After each mode: a later one that fails leaves the earlier figures.
            (ctx.raw / "kueue-partial.json").write_text(json.dumps(results, indent=1))
    results["meta"]["wall_seconds"] = round(time.monotonic() - began, 1)
    (args.out / "kueue.json").write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results)
    (args.out / "kueue.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
