"""The MultiKueue benchmark's table (bench/results/multikueue.md)."""

from __future__ import annotations

from typing import Any


def markdown(results: dict[str, Any]) -> str:
    meta, runs = results["meta"], results["runs"]
    direct, dispatched = runs.get("direct", {}), runs.get("dispatched", {})
    lines = [
        "## TFJobs through MultiKueue (`make bench-multikueue`)",
        "",
        f"{meta['jobs']} TFJobs of 1 MASTER and 1 WORKER, submitted at once; Kueue"
        f" {meta['kueue']}; a manager and two workers on one machine (started in"
        f" {meta['startup_seconds']} s); the run took {meta.get('wall_seconds', '?')} s."
        " Seconds from each job's POST to its last pod created on the worker that runs it.",
        "",
        "| figure | straight to a worker | through the manager | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (
        ("pods_created_p50_s", "all pods created, p50"),
        ("pods_created_p99_s", "all pods created, p99"),
        ("pods_created_max_s", "all pods created, max"),
    ):
        a, b = direct.get(key), dispatched.get(key)
        ratio = f"{b / a:.1f}" if a and b is not None else ""
        lines.append(f"| {label} | {a} | {b} | {ratio} |")
    for key, label in (
        ("jobs_measured", "jobs measured"),
        ("jobs_by_worker", "jobs by worker"),
        ("jobs_on_two_workers", "jobs with pods on two workers (must be 0)"),
    ):
        lines.append(f"| {label} | {direct.get(key)} | {dispatched.get(key)} | |")
    return "\n".join(lines) + "\n"
