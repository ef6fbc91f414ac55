"""The chaos suite's table (bench/results/chaos.md)."""

from __future__ import annotations

import argparse

from bench.chaos.suite import Row


def table(rows: list[Row], wall: float, args: argparse.Namespace) -> str:
    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    def count(value: int | None) -> str:
        return "—" if value is None else str(value)

    columns = (
        "scenario", "jobs", "duplicate pods", "orphans", "wrong final states", "lost jobs",
        "pods of unadmitted jobs", "samples over quota", "leaked quota",
        "writes after the lease was lost", "API req/s in the outage",
        "log lines/s in the outage", "operator restarts", "took", "notes",
    )  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * 13 + "---|"]
    for r in rows:
        cells = (
            r.scenario, r.jobs, r.duplicates, r.orphans, r.wrong, r.lost, count(r.unadmitted),
            count(r.over_quota), count(r.leaked_quota), count(r.stale_writes), rate(r.api_rps),
            rate(r.log_lps), r.restarts, f"{r.seconds:.0f}s", "; ".join(r.notes),
        )  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    run = "make chaos" + (" (--short)" if args.short else "")
    head = f"`{run}`, seed {args.seed}: wall time {wall / 60:.1f} min.\n\n"
    return head + "\n".join(lines) + "\n"
