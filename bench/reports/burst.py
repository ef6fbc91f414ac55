"""`make bench`'s results as JSON, a Markdown table and a plot."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.reports.cells import div, fmt, time_ratio, verbs, without_series
from bench.reports.costs import costs_table
from bench.reports.training_operator import peer_table, trainer_table

SERIES = "series_pods_created"


def write_reports(results: dict[str, Any], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "raw").mkdir(exist_ok=True)
    (out / "raw" / "results-full.json").write_text(json.dumps(results, indent=1))
    plot(results, out / "pods-created.png")
    if "latency" in results:
        plot_latency(results["latency"], out / "status-latency.png")
    slim = without_series(results)
    (out / "results.json").write_text(json.dumps(slim, indent=1, sort_keys=False) + "\n")
    table = markdown(slim)
    (out / "results.md").write_text(table)
    return table


# --- Markdown -------------------------------------------------------------------------------------


# The burst's goal figures, each judged on the median of its own runs (never
# read off another figure's median run), shown with the runs' spread: one
# run of a burst on this machine varies by a fifth, more than some goals'
# margins.
GOALS = (
    ("all pods created (s)", "total_created_s"),
    ("job Running (s)¹", "total_running_s"),
    ("kube-apiserver CPU (s)", "apiserver_cpu_seconds"),
    ("controller CPU (s)", "operator_cpu_seconds"),
)
LABELS = {"ceiling": "ceiling", "operator": "dlk8s", "baseline": "dlk8s before"}


def goal_table(res: dict[str, Any]) -> list[str]:
    """Each goal figure of every variant: the median of its own runs, their
    spread (lowest-highest) and the median's ratio to the ceiling's."""
    repeats = res.get("repeats") or {}
    if "ceiling" not in repeats:
        return []
    runs = max(len(rs) for rs in repeats.values())
    ceiling = {key: _median(repeats["ceiling"], key) for _, key in GOALS}
    lines = [
        "",
        f"The goals' figures, each the median of its own {runs} runs, with the runs'"
        " spread (lowest-highest) and the median's ratio to the ceiling's:",
        "",
        "| | " + " | ".join(name for name, _ in GOALS) + " |",
        "|---|" + "---:|" * len(GOALS),
    ]
    for name, rs in repeats.items():
        base = {} if name == "ceiling" else ceiling
        cells = [_goal_cell(rs, key, base.get(key)) for _, key in GOALS]
        lines.append(f"| {LABELS.get(name, name)} | " + " | ".join(cells) + " |")
    return lines


def _values(runs: list[dict[str, Any]], key: str) -> list[float]:
    return sorted(v for r in runs if isinstance(v := r.get(key), int | float))


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = _values(runs, key)
    return statistics.median(values) if values else None


def _goal_cell(runs: list[dict[str, Any]], key: str, ceiling: float | None) -> str:
    values = _values(runs, key)
    if not values:
        return "-"
    median = statistics.median(values)
    ratio = div(median, ceiling)
    spread = f" ({fmt(values[0])}-{fmt(values[-1])})" if len(values) > 1 else ""
    return f"{fmt(median)}{spread}" + (f", {ratio:.2f}x" if ratio else "")


def burst_table(title: str, res: dict[str, Any]) -> list[str]:
    op, ce, base = res["operator"], res["ceiling"], res.get("baseline")
    runs = [("operator", op), ("ceiling", ce)] + ([("operator before", base)] if base else [])
    table = _Columns(runs, ce, base, _burst_head(title, op, runs, base))
    _burst_rows(table)
    return table.lines + _burst_notes(res)


@dataclass
class _Columns:
    """A burst table's rows as they are written: a column per run (the
    operator, the ceiling, and the operator before if it ran), then the
    ratios to the ceiling."""

    runs: list[tuple[str, dict[str, Any]]]
    ceiling: dict[str, Any]
    base: dict[str, Any] | None
    lines: list[str]

    def cells(self, values: list[Any], ratio: bool) -> str:
        text = " | ".join(fmt(v) for v in values)
        if ratio:
            text += " | " + time_ratio(values[0], values[1])
            if self.base:
                text += " | " + time_ratio(values[2], values[1])
        else:
            text += " |" + " |" * bool(self.base)
        return text

    def row(self, name: str, key: str, ratio: bool = True) -> None:
        self.lines.append(f"| {name} | {self.cells([r.get(key) for _, r in self.runs], ratio)} |")

    def op_row(self, name: str, key: str) -> None:
        values = [
            r.get("operator", {}).get(key) if r is not self.ceiling else None for _, r in self.runs
        ]
        self.lines.append(f"| {name} | {self.cells(values, False)} |")

    def text_row(self, name: str, key: str) -> None:
        texts = [verbs(r.get(key) or {}) for _, r in self.runs]
        self.lines.append(f"| {name} | " + " | ".join(texts) + " | |" + " |" * bool(self.base))


def _burst_head(
    title: str,
    op: dict[str, Any],
    runs: list[tuple[str, dict[str, Any]]],
    base: dict[str, Any] | None,
) -> list[str]:
    head = "| metric | " + " | ".join(name for name, _ in runs) + " | operator/ceiling |"
    if base:
        head += " before/ceiling |"
    return [
        f"### {title}",
        "",
        f"{op['jobs']} job(s), {op['pods']} pods and {op['pods']} Services."
        " Times in seconds from submission (the start of the job's POST);"
        " ratio = time / the ceiling's time (speed = its inverse).",
        "",
        head,
        "|---|" + "---:|" * (len(runs) + 1 + bool(base)),
    ]


def _burst_rows(t: _Columns) -> None:
    t.row("all pods created, per job p50", "job_created_p50_s")
    t.row("all pods created, per job p99", "job_created_p99_s")
    t.row("all pods created, total", "total_created_s")
    t.row("all Services created, total", "total_services_s")
    speeds = [r.get("pods_per_second") for _, r in t.runs]
    extra = f" | {fmt(div(speeds[2], speeds[1]))}" if t.base else ""
    t.lines.append(
        f"| pods created per second | {' | '.join(fmt(v) for v in speeds)}"
        f" | {fmt(div(speeds[0], speeds[1]))}{extra} |"
    )
    t.row("job Running, per job p50 ¹", "job_running_p50_s")
    t.row("job Running, per job p99 ¹", "job_running_p99_s")
    t.row("job Running, total ¹", "total_running_s")
    t.row("every pod Running (kwok), total", "total_pods_running_s")
    t.row("submission of all jobs", "submit_seconds", ratio=False)
    t.op_row("operator CPU seconds", "cpu_seconds")
    t.op_row("operator reconcile passes", "reconciles")
    t.op_row("operator peak RSS (MiB)", "peak_rss_mb")
    t.lines.append(
        "| operator's requests | "
        + " | ".join(
            verbs(r.get("operator", {}).get("requests", {})) if r is not t.ceiling else "-"
            for _, r in t.runs
        )
        + " | |"
        + " |" * bool(t.base)
    )
    t.text_row("apiserver requests by verb", "apiserver_requests_by_verb")
    t.text_row("control-plane CPU seconds", "control_plane_cpu_seconds")
    t.row("other processes' CPU seconds ²", "other_cpu_seconds", ratio=False)


def _burst_notes(res: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    repeats = res.get("repeats")
    if repeats:
        lines += [
            "",
            f"Each column is the median of {len(repeats['operator'])} runs (by all pods"
            " created); every run's all-pods-created time: "
            + "; ".join(
                f"{name} {', '.join(fmt(r['total_created_s']) for r in rs)}"
                for name, rs in repeats.items()
            )
            + ".",
        ]
        lines += goal_table(res)
    lines += [
        "",
        "¹ operator: the TFJob's status.phase turns Running (observed by a watch);"
        " ceiling: every pod of the job is Running (it writes no status).",
        "² CPU the rest of the machine used meanwhile (not the control plane, operator,"
        " benchmark or its watcher): a noisy neighbour shows here.",
        "",
    ]
    return lines


def rest_table(res: dict[str, Any]) -> list[str]:
    start = res["startup"]
    return [
        "### Scenario 3: at rest",
        "",
        f"{res['finished_jobs']} finished and {res['running_jobs']} running TFJobs,"
        f" {res['pods']} pods; a fresh operator started on them, then"
        f" {res['window_seconds']:.0f} s of nothing happening.",
        "",
        "| metric | value |",
        "|---|---:|",
        f"| start-up: ready (caches synced) | {fmt(start['ready_seconds'])} s |",
        f"| start-up: CPU seconds | {fmt(start['cpu_seconds'])} |",
        f"| start-up: operator's requests | {verbs(start['operator_requests'])} |",
        f"| at rest: operator's requests per minute | "
        f"{verbs(res['operator_requests_per_minute'])} |",
        f"| at rest: operator CPU seconds per minute | "
        f"{fmt(res['operator_cpu_seconds_per_minute'])} |",
        f"| at rest: apiserver requests per minute by verb, with the operator | "
        f"{verbs(res['apiserver_requests_per_minute_by_verb'])} |",
        f"| at rest: the same without the operator | "
        f"{verbs(res['apiserver_requests_per_minute_without_operator'])} |",
        f"| at rest: the difference, for what the operator could ask (per minute) | "
        f"{verbs(res['apiserver_extra_requests_per_minute_with_operator'])} |",
        f"| operator CPU seconds (start-up + window) | {fmt(res['operator']['cpu_seconds'])} |",
        f"| operator peak RSS (MiB) | {fmt(res['operator']['peak_rss_mb'])} |",
        "",
    ]


def latency_table(res: dict[str, Any]) -> list[str]:
    variants = list(res)
    first = res[variants[0]]
    lines = [
        "### Scenario 4: status latency",
        "",
        f"{first['jobs']} TFJobs x 4 replicas on a fresh operator; paced: jobs submitted,"
        f" then MASTERs ended, {fmt(res.get('paced', {}).get('rate'))} a second (the cluster"
        " not saturated: the goal, p99 under 1 s, is for this one); burst: all at once."
        " Delays in seconds between watch events as the benchmark's watcher receives them"
        " (bench/burst/latency.py).",
        "",
        "| delay | " + " | ".join(f"{v} p50 | {v} p99 | {v} max" for v in variants) + " |",
        "|---|" + "---:|" * 3 * len(variants),
    ]
    rows = (
        ("running", "pods ready (all created, MASTER Running) → job Running"),
        ("running_from_last_pod", "last pod Running → job Running ¹"),
        ("succeeded", "MASTER Succeeded → job Succeeded"),
    )
    for key, name in rows:
        cells = [
            fmt(res[v][key].get(stat)) for v in variants for stat in ("p50_s", "p99_s", "max_s")
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| operator, per job | " + " | ".join(variants) + " |",
        "|---|" + "---:|" * len(variants),
    ]
    for stage, what in (("start", "submission to Running"), ("finish", "MASTER exit to done")):
        for key, name in (("status_writes_per_job", "status writes"), ("passes_per_job", "passes")):
            cells = [fmt(res[v]["operator"][stage][key]) for v in variants]
            lines.append(f"| {name}, {what} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "¹ The issue's wording; a job is Running once its MASTER runs and every pod"
        " exists, so the status may lead a WORKER still starting (a negative delay).",
        "",
    ]
    return lines


def profile_table(
    run: dict[str, Any], scenario: str = "scenario 1", again: str = "A second operator run"
) -> list[str]:
    profile = run.get("py_spy")
    if not profile:
        return []
    lines = [
        f"### Profile of the operator under {scenario} (py-spy)",
        "",
        f"{again} of {scenario} under `py-spy record {profile['args']}`"
        f" (all pods created in {fmt(run['total_created_s'])} s, operator CPU"
        f" {fmt(run['operator']['cpu_seconds'])} s): {profile['seconds']:.1f} s of"
        " samples of active threads. Inclusive = the share of samples with the"
        " function on the stack; self = at the top.",
        "",
        "| inclusive | self | function |",
        "|---:|---:|---|",
    ]
    costs = profile.get("costs") or []
    if costs:
        lines[-3:-3] = [
            "Where the samples go (each sample counted once, by the first of these on its stack):",
            "",
            "| share | cost |",
            "|---:|---|",
            *(f"| {c['share']:.1%} | {c['cost']} |" for c in costs),
            "",
            "The functions:",
            "",
        ]
    for item in profile["top"]:
        lines.append(f"| {item['inclusive']:.1%} | {item['self']:.1%} | `{item['function']}` |")
    threads = profile.get("thread_cpu") or {}
    if threads:
        lines += [
            "",
            "The operator's CPU seconds by thread (from /proc, named by the profile):",
            "",
            "| threads | CPU seconds |",
            "|---|---:|",
            *(f"| {name} | {fmt(sec)} |" for name, sec in threads.items()),
        ]
    return [*lines, ""]


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        "## dlk8s operator benchmark",
        "",
        f"{meta['date']}, {meta['git']}, {meta['cpus']} CPUs, kwok nodes {meta['nodes']},"
        f" operator workers {meta['workers']}, API parallelism {meta['api_parallelism']}"
        f" (operator and ceiling), jobs submitted {meta['submit_parallelism']} at a time."
        f" The run took {meta.get('wall_seconds', 0):.0f} s."
        + (f" {meta['label']}" if meta.get("label") else ""),
        "",
    ]
    if "burst" in results:
        lines += burst_table("Scenario 1: TFJobs of 4 replicas submitted at once", results["burst"])
        lines += peer_table(results["burst"])
        lines += trainer_table(results["burst"])
        lines += costs_table(results["burst"])
    if "wide" in results:
        lines += burst_table(
            "Scenario 2: one TFJob with a MASTER and many WORKERs", results["wide"]
        )
    if "rest" in results:
        lines += rest_table(results["rest"])
    if "latency" in results:
        lines += latency_table(results["latency"])
    if "profile" in results:
        lines += profile_table(results["profile"])
    return "\n".join(lines)


# --- plot -----------------------------------------------------------------------------------------


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, t) for k, t in (("burst", "Scenario 1"), ("wide", "Scenario 2")) if k in results]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels, strict=True):
        # Not training-operator stock: at 20 requests a second, its minutes
        # would squeeze the others into the left edge.
        styles = (("ceiling", "--"), ("operator", "-"), ("training-operator-tuned", ":"))
        for mode, style in (*styles, ("trainer-tuned", "-.")):
            if mode not in results[key]:
                continue
            series = results[key][mode].get(SERIES) or []
            ax.step(series, range(1, len(series) + 1), style, where="post", label=mode)
        ax.set_title(f"{title}: {results[key]['operator']['pods']} pods")
        ax.set_xlabel("seconds since the first submission")
        ax.set_ylabel("pods created (watch receipt)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_latency(res: dict[str, Any], path: Path) -> None:
    """The delays' distributions (a CDF per variant and delay)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4), squeeze=False)
    titles = (("running", "pods ready → job Running"), ("succeeded", "MASTER done → job Succeeded"))
    for ax, (key, title) in zip(axes[0], titles, strict=True):
        for variant, run in res.items():
            values = run.get("series", {}).get(key) or []
            shares = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, shares, where="post", label=f"{variant} ({run['jobs']} jobs)")
        ax.axvline(1.0, color="grey", linestyle=":", label="goal: p99 < 1 s")
        ax.set_title(f"Status latency: {title}")
        ax.set_xlabel("seconds (watch receipt to watch receipt)")
        ax.set_ylabel("share of jobs")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
