"""The Kueue benchmark's table (bench/results/kueue.md)."""

from __future__ import annotations

from typing import Any

from bench.kueue.modes import MODES
from bench.kueue.queue import GPU
from bench.kueue.trainer import TRAINER_MODES

UNQUEUED = ("gated", "burst")


def ratio(a: Any, b: Any) -> str:
    return (
        f"{a / b:.2f}" if isinstance(a, int | float) and isinstance(b, int | float) and b else "-"
    )


def cell(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def markdown(results: dict[str, Any]) -> str:
    meta, runs = results["meta"], results["runs"]
    modes = [m for m in MODES + TRAINER_MODES if m in runs]
    names = {
        "kueue": "with Kueue",
        "gated": f"without, {meta['quota_jobs']} at a time",
        "burst": "without, all at once",
        "trainer-stock": "Trainer stock, with Kueue",
        "trainer-tuned": "Trainer tuned, with Kueue",
    }
    q = meta["quota_jobs"]
    rows: list[tuple[str, list[Any]]] = [
        ("from", ["job created" if m in UNQUEUED else "Workload Admitted" for m in modes]),
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
        ("operator CPU seconds ¹", [runs[m]["operator"]["cpu_seconds"] for m in modes]),
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
    if any(m.startswith("trainer-") for m in modes):
        lines += [
            "",
            "¹ Trainer: JobSet's and Trainer's processes summed. Its jobs are the same as"
            " TrainJobs on a ClusterTrainingRuntime of their shape (bench/common/trainer.py),"
            " which Kueue's TrainJob integration queues; the MASTER's Job decides the JobSet.",
        ]
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
    for name in ("kueue", "trainer-stock", "trainer-tuned"):
        if name in runs and "checks" in runs[name]:
            run = runs[name]
            checks = run["checks"] | {"left reserved": run.get("cluster_queue_after")}
            label = "Checks" if name == "kueue" else f"Checks ({name})"
            out.append(f"- {label}: " + ", ".join(f"{k} {v}" for k, v in checks.items()) + ".")
    return out
