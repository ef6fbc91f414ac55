"""`make bench-scale`'s results as JSON, a Markdown table and a plot per scenario."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.reports.burst import burst_table, profile_table
from bench.reports.cells import fmt, verbs, without_series


def write_scale_reports(results: dict[str, Any], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "raw").mkdir(exist_ok=True)
    (out / "raw" / "scale-full.json").write_text(json.dumps(results, indent=1))
    plots(results, out)
    slim = without_series(results)
    (out / "scale.json").write_text(json.dumps(slim, indent=1) + "\n")
    table = markdown(slim)
    (out / "scale.md").write_text(table)
    return table


# --- Markdown ------------------------------------------------------------------------------


def pod_gc(meta: dict[str, Any]) -> str:
    threshold = meta.get("pod_gc_threshold", 12500)
    if threshold <= 0:
        return "the pod GC keeps every terminated pod"
    return f"the pod GC deletes terminated pods past {threshold:,}"


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        "## dlk8s operator at scale (`make bench-scale`)",
        "",
        f"Run {meta['date']} on {meta['cpus']} CPUs ({meta['cpu_model']}), {meta['memory_gb']} GB,"
        f" load average {meta['load_average_at_start']} at the start; {meta['git']}; kwok nodes"
        f" {meta['nodes']}, operator workers {meta['workers']}, API parallelism"
        f" {meta['api_parallelism']} (operator and ceiling); {pod_gc(meta)}. The run took"
        f" {meta.get('wall_seconds', 0):.0f} s."
        + (f" {meta['label']}" if meta.get("label") else ""),
        "",
    ]
    if "sustained" in results:
        lines += sustained_table(results["sustained"], meta)
    if "history_burst" in results:
        lines += history_table(results["empty"], results["history_burst"], results["history"])
    if "history" in results:
        history = results["history"]
        lines += restart_table(history["restarts"], history.get("restarts_before"))
        lines += memory_table(history["memory"], history.get("memory_before"))
    if "empty" in results:
        lines += burst_table("Scenario 2: the burst on the empty cluster", results["empty"])
    if "history_burst" in results:
        lines += burst_table("Scenario 4: the burst among the history", results["history_burst"])
    if "profile" in results:
        lines += profile_table(results["profile"], "the burst among the history", "One more run")
    if "profile_before" in results:
        scenario = "the burst among the history, before"
        lines += profile_table(results["profile_before"], scenario, "The operator before, one run")
    return "\n".join(lines)


def sustained_table(res: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Operator against the ceiling (and the operator before, if it ran)."""
    op, ce, before = res["operator"], res["ceiling"], res.get("baseline")
    runs = [("operator", op), *([("operator before", before)] if before else [])]
    head = " | ".join(name for name, _ in runs)
    ratios = " | ".join(f"{name}/ceiling" for name, _ in runs)
    lines = [
        "### Sustained arrival",
        "",
        f"{op['jobs']} TFJobs x 4 replicas, {meta.get('rate', '?')} a second for"
        f" {meta.get('duration', '?')} s, each running {meta.get('run_for', '?')} and then"
        " ending (exit 0; cleanPodPolicy Running), operator and ceiling at the same rate"
        " (the ceiling creates a job's pods and Services when its POST returns, and"
        " deletes what cleanPodPolicy asks for, the job's Services, when its pods have run"
        f" their time: {ce.get('ceiling_endings', 0)} jobs in its run). Seconds from each"
        " job's POST.",
        "",
        f"| metric | {head} | ceiling | {ratios} |",
        "|---|" + "---:|" * (2 * len(runs) + 1),
    ]
    for name, key in (
        ("submission → all pods created, p50", "job_created_p50_s"),
        ("submission → all pods created, p99", "job_created_p99_s"),
        ("submission → Running, p50 ¹", "job_running_p50_s"),
        ("submission → Running, p99 ¹", "job_running_p99_s"),
    ):
        values = " | ".join(fmt(r.get(key)) for _, r in runs)
        shares = " | ".join(_ratio(r.get(key), ce.get(key)) for _, r in runs)
        lines.append(f"| {name} | {values} | {fmt(ce.get(key))} | {shares} |")
    blank = " |" * (len(runs) + 1)

    def row(name: str, value: Callable[[dict[str, Any]], str]) -> str:
        return f"| {name} | " + " | ".join(value(r) for _, r in runs) + " |" + blank

    def writes(r: dict[str, Any]) -> str:
        return fmt(r["operator"]["requests"].get("UPDATE tfjobs/status", 0) / r["jobs"])

    lines += [
        row("operator CPU seconds", lambda r: fmt(r["operator"]["cpu_seconds"])),
        row("operator status writes per job", writes),
        row("operator passes per job", lambda r: fmt(r["operator"]["reconciles"] / r["jobs"])),
        row("operator peak RSS (MiB)", lambda r: fmt(r["operator"]["peak_rss_mb"])),
        row("operator's requests", lambda r: verbs(r["operator"]["requests"])),
        "| apiserver requests by verb | "
        + " | ".join(verbs(r["apiserver_requests_by_verb"]) for _, r in runs)
        + f" | {verbs(ce['apiserver_requests_by_verb'])} |"
        + " |" * len(runs),
        "| other processes' CPU seconds ² | "
        + " | ".join(fmt(r["other_cpu_seconds"]) for _, r in runs)
        + f" | {fmt(ce['other_cpu_seconds'])} |"
        + " |" * len(runs),
        "",
        "¹ operator: the job's status.phase Running; ceiling: every pod of the job Running.",
        "² CPU the rest of the machine used meanwhile: a noisy neighbour shows here.",
        "",
    ]
    return lines


def _ratio(a: Any, b: Any) -> str:
    return (
        f"{a / b:.2f}" if isinstance(a, int | float) and isinstance(b, int | float) and b else "-"
    )


def history_table(
    empty: dict[str, Any], hist: dict[str, Any], history: dict[str, Any]
) -> list[str]:
    last = history["restarts"][-1]
    lines = [
        "### History: the burst among finished jobs against the same burst on the empty cluster",
        "",
        f"{hist['operator']['jobs']} TFJobs x 4 replicas submitted at once, once on the empty"
        f" cluster and once among {last['finished_jobs']} finished TFJobs (pods and Services"
        f" kept) and {last['running_jobs']} running ones, {last['pods']} pods in all; each run"
        " on a fresh operator that has settled first. Ratio = among the history / empty"
        " (goal for the operator: at most 1.1).",
        "",
        "| seconds from submission | operator, empty | operator, history | ratio |"
        " ceiling, empty | ceiling, history | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = (
        ("all pods created, per job p50", "job_created_p50_s"),
        ("all pods created, per job p99", "job_created_p99_s"),
        ("all pods created, total", "total_created_s"),
        ("job Running (ceiling: every pod Running), total", "total_running_s"),
    )
    for name, key in rows:
        cells = []
        for mode in ("operator", "ceiling"):
            a, b = empty[mode].get(key), hist[mode].get(key)
            cells += [fmt(a), fmt(b), _ratio(b, a)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    cpu = [run["operator"]["cpu_seconds"] for run in (empty["operator"], hist["operator"])]
    cells = f"{fmt(cpu[0])} | {fmt(cpu[1])} | {_ratio(cpu[1], cpu[0])}"
    lines.append(f"| operator CPU seconds | {cells} | | | |")
    return [*lines, ""]


def restart_table(
    steps: list[dict[str, Any]], before: list[dict[str, Any]] | None = None
) -> list[str]:
    lines = [
        "### Restart at scale",
        "",
        "The operator restarted on the history as it grew: ready = /readyz (every cache"
        " listed and handled); settled = every job reconciled once and nothing left to do"
        " (3 s without a request or a pass). Writes: the operator's requests other than"
        " GET/LIST/WATCH, but for the TokenReview and SubjectAccessReview that the"
        " benchmark's own read of /metrics makes it send; job events: MODIFIED events"
        " of the history's TFJobs meanwhile"
        " (both must be 0: every status is already right).",
        "",
        "| operator | finished jobs | running jobs | pods | ready s | settled s | CPU s |"
        " passes | peak RSS MiB | RSS MiB | writes | job events | operator's requests |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    rows = [("now", s) for s in steps] + [("before", s) for s in before or []]
    rows.sort(key=lambda row: row[1]["finished_jobs"])
    for who, s in rows:
        lines.append(
            f"| {who} | {s['finished_jobs']} | {s['running_jobs']} | {s['pods']}"
            f" | {fmt(s['ready_seconds'])} | {fmt(s['settled_seconds'])}"
            f" | {fmt(s['cpu_seconds'])} | {s['passes']}"
            f" | {fmt(s['peak_rss_mb'])} | {fmt(s['rss_mb'])} | {s['writes']}"
            f" | {s['job_modified_events']} | {verbs(s['operator_requests'])} |"
        )
    return [*lines, ""]


def memory_table(fit: dict[str, Any], before: dict[str, Any] | None = None) -> list[str]:
    lines = [
        "### Memory",
        "",
        "Peak RSS of the restarted operators above (start-up included: the lists of every"
        " job, pod and Service), fitted as base + slope x jobs (each job 4 pods and 4"
        " Services); the chart's memory limit as values.yaml sets it.",
        "",
        "| operator | base MiB | MiB per 1,000 jobs | at 10,000 jobs MiB |"
        " chart's memory limit MiB | jobs the limit holds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for who, f in (("now", fit), ("before", before)):
        if f is None:
            continue
        holds = f.get("chart_limit_jobs")
        lines.append(
            f"| {who} | {fmt(f['base_mb'])} | {fmt(f['mb_per_1000_jobs'])}"
            f" | {fmt(f['at_10000_jobs_mb'])} | {fmt(f['chart_limit_mb'])}"
            f" | {holds if holds is not None else '-'} |"
        )
    return [*lines, ""]


# --- plots -------------------------------------------------------------------------------------


def plots(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    if "sustained" in results:
        plot_sustained(results["sustained"], out / "sustained.png")
    if "history_burst" in results:
        plot_history(results["empty"], results["history_burst"], out / "history.png")
    if "history" in results:
        plot_restart(results["history"], out / "restart.png")
        plot_memory(results["history"], out / "memory.png")


def plot_sustained(res: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for mode, style in (("ceiling", "."), ("operator", "x")):
        series = res[mode].get("series_job_created") or []
        ax.plot([a for a, _ in series], [c for _, c in series], style, ms=3, label=mode)
    ax.set_title(f"Sustained arrival: {res['operator']['jobs']} jobs x 4 replicas")
    ax.set_xlabel("job submitted (seconds since the first)")
    ax.set_ylabel("seconds to all its pods created")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_history(empty: dict[str, Any], hist: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for label, res in (("empty", empty), ("history", hist)):
        for mode, style in (("ceiling", "--"), ("operator", "-")):
            series = res[mode].get("series_pods_created") or []
            ax.step(
                series, range(1, len(series) + 1), style, where="post", label=f"{mode}, {label}"
            )
    ax.set_title(f"A burst of {hist['operator']['jobs']} jobs: empty cluster vs among the history")
    ax.set_xlabel("seconds since the first submission")
    ax.set_ylabel("pods created (watch receipt)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _runs(history: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]], Any]]:
    """(label, line style, restarts, memory fit) of the operator now, and before."""
    runs = [("now", "-", history["restarts"], history["memory"])]
    if history.get("restarts_before"):
        runs.append(("before", "--", history["restarts_before"], history["memory_before"]))
    return runs


def _jobs(steps: list[dict[str, Any]]) -> list[int]:
    return [s["finished_jobs"] + s["running_jobs"] for s in steps]


def plot_restart(history: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for who, style, steps, _ in _runs(history):
        for key, label, color in (
            ("ready_seconds", "ready (caches synced)", "C0"),
            ("settled_seconds", "settled (every job reconciled)", "C1"),
            ("cpu_seconds", "CPU seconds", "C2"),
        ):
            values = [s[key] for s in steps]
            ax.plot(_jobs(steps), values, "o" + style, color=color, label=f"{label}, {who}")
    ax.set_title("Operator restart on a history of jobs")
    ax.set_xlabel("jobs (4 pods and 4 Services each)")
    ax.set_ylabel("seconds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_memory(history: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (who, style, steps, fit), color in zip(_runs(history), ("C0", "C1"), strict=False):
        ax.plot(_jobs(steps), [s["peak_rss_mb"] for s in steps], "o", color=color)
        ax.plot(
            [0, 10000],
            [fit["base_mb"], fit["base_mb"] + 10 * fit["mb_per_1000_jobs"]],
            ":" if style == "-" else "--",
            color=color,
            label=f"peak RSS, {who}: {fit['base_mb']:.0f} MiB"
            f" + {fit['mb_per_1000_jobs']:.0f} MiB per 1,000 jobs",
        )
    limit = history["memory"].get("chart_limit_mb")
    if limit:
        ax.axhline(limit, color="red", label="the chart's memory limit")
    ax.set_title("Operator memory by jobs cached")
    ax.set_xlabel("jobs (4 pods and 4 Services each)")
    ax.set_ylabel("MiB")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
