"""The elastic bench's tables and plots, from the results replay.py writes
(`python -m bench.elastic report` rewrites them from elastic.json)."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

from bench.common.paths import RESULTS
from bench.elastic.traces import IDLE_CAUSES, PADDLE, PYTORCH, TRACES, WAIT_CAUSES

RESULTS_JSON = RESULTS / "elastic.json"


def compact_json(value: Any) -> str:
    """Indented JSON with innermost lists of numbers and strings on one line."""
    text = json.dumps(value, indent=1)
    flat = re.sub(
        r"\[\s+((?:-?[0-9.eE]+|null|\"[^\"\n]*\")(?:,\s+(?:-?[0-9.eE]+|null|\"[^\"\n]*\"))*)\s+\]",
        lambda m: "[" + ", ".join(x.strip() for x in re.split(r",\s*\n\s*", m.group(1))) + "]",
        text,
    )
    return flat + "\n"


# --- the report ------------------------------------------------------------------------------

# GPU use while demand >= capacity, in every replay (issue #33).
SATURATED_TARGET = 0.97


def ratios(runs: dict[str, Any]) -> tuple[float | None, float | None]:
    """One replay's autoscaler mean and maximum wait over static's."""
    auto, static = runs.get("autoscaler"), runs.get("static")
    if not (auto and static):
        return None, None
    mean = auto["meanWait"] / static["meanWait"] if static["meanWait"] else None
    worst = auto["maxWait"] / static["maxWait"] if static["maxWait"] else None
    return mean, worst


def median_replay(replays: list[dict[str, Any]]) -> int:
    """The replay whose mean-wait ratio is the median: the one the tables and
    the plot show (the first when there is no ratio)."""
    ranked = sorted(range(len(replays)), key=lambda i: ratios(replays[i])[0] or 0.0)
    return ranked[(len(ranked) - 1) // 2] if any(ratios(r)[0] for r in replays) else 0


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) and known else None


def _never(replays: list[dict[str, Any]], check: str) -> bool:
    """No run of any replay, in either mode, saw `check`'s problem."""
    return not any(run["checks"][check] for runs in replays for run in runs.values())


def acceptance(result: dict[str, Any], name: str = "") -> dict[str, Any]:
    """The issue's figures for one trace: the median over its replays of each
    ratio to static, and whether each target is met (the checks in every replay).
    Results from before the targets were stored take the named trace's."""
    replays = result.get("replays") or [result["runs"]]
    default = TRACES[name].targets if name in TRACES else (0.5, 0.5)
    mean_target, max_target = result.get("targets") or default
    pairs = [ratios(r) for r in replays]
    mean, worst = _median([m for m, _ in pairs]), _median([w for _, w in pairs])
    autos = [r["autoscaler"] for r in replays]
    return {
        "meanWaitRatio": mean,
        "maxWaitRatio": worst,
        "perReplay": pairs,
        "met": {
            f"mean wait <= {mean_target} of static's": mean is not None and mean <= mean_target,
            f"max wait <= {max_target} of static's": worst is not None and worst <= max_target,
            f"GPU use while demand >= capacity >= {100 * SATURATED_TARGET:.0f} %": all(
                a["gpuUtilizationSaturated"] >= SATURATED_TARGET for a in autos
            ),
            "no node overcommitted": _never(replays, "overcommitted"),
            "every job within [min, max]": _never(replays, "outOfBounds"),
            "every job completed": all(
                r["autoscaler"]["jobsCompleted"] == r["static"]["jobsCompleted"] for r in replays
            ),
        },
    }


ROWS: tuple[tuple[str, str, str], ...] = (
    ("GPU use while demand >= capacity", "gpuUtilizationSaturated", "%"),
    ("  (trace seconds of that window)", "saturatedSeconds", ""),
    ("GPU use, whole run", "gpuUtilization", "%"),
    ("mean wait (submission -> first trainer or WORKER Running)", "meanWait", ""),
    ("median wait", "medianWait", ""),
    ("max wait", "maxWait", ""),
    ("mean completion (submission -> work done)", "meanCompletion", ""),
    ("makespan (last job done)", "makespan", ""),
    ("jobs completed", "jobsCompleted", ""),
    ("overcommitted node (ticks seen)", "overcommitted", "check"),
    ("job outside [min, max] (ticks seen)", "outOfBounds", "check"),
    ("operator peak RSS (MiB)", "operatorPeakRssMiB", ""),
    ("replay wall time (s)", "replayWallSeconds", ""),
)


def _cell(run: dict[str, Any] | None, key: str, unit: str) -> str:
    if run is None:
        return "-"
    if unit == "check":
        found = run["checks"][key]
        return f"none in {run['checks']['ticks']} ticks" if not found else f"{sum(found.values())}"
    value = run.get(key)
    if value is None:
        return "-"
    return f"{100 * value:.1f} %" if unit == "%" else str(value)


def trace_markdown(name: str, result: dict[str, Any]) -> list[str]:
    runs = result["runs"]
    auto, static = runs.get("autoscaler"), runs.get("static")
    lines = [
        f"## {name}: {TRACES[name].title if name in TRACES else ''}",
        "",
        f"{result['trace']['jobs']} jobs ({result['trace']['generator']}), "
        f"{result['trace']['cluster']}; {_offered_load(name):.2f} x the cluster's "
        "GPU-seconds offered while the jobs arrive; "
        f"one trace second = {result['scale']} s wall; "
        f"{_replays_text(result)} took {result['wallSeconds']:.0f} s. "
        "Times are trace seconds.",
        "",
        *_kinds_lines(result["trace"]),
        "",
        "| | autoscaler | static (minimums) |",
        "|---|---|---|",
    ]
    lines += [f"| {label} | {_cell(auto, k, u)} | {_cell(static, k, u)} |" for label, k, u in ROWS]
    lines += _wait_by_kind_rows(auto, static)
    lines += ["", *_acceptance_lines(name, result), "", *_cause_lines(auto, static)]
    lines += ["", *_idle_lines(auto, static)]
    for run in (auto, static):
        lines += _problem_lines(run)
    if auto and auto.get("autoscalerChanges"):
        lines += ["", f"Autoscaler changes: {auto['autoscalerChanges']}."]
    lines += ["", f"![{name}](elastic-{name}.png)", ""]
    return lines


def _replays_text(result: dict[str, Any]) -> str:
    count = len(result.get("replays") or [result["runs"]])
    pairs = "two replays" if count == 1 else f"{count} replays of both modes"
    return f"this trace's {pairs}"


def _kinds_lines(trace: dict[str, Any]) -> list[str]:
    """Which jobs were which kind (results from before the mixed replays
    have no "kinds": every job was a PaddleJob)."""
    kinds = trace.get("kinds") or {PADDLE.name: None}
    if list(kinds) == [PADDLE.name]:
        return ["Every job a PaddleJob (as `--paddle-only` replays them)."]
    described = {
        PADDLE.name: "PaddleJobs (trainers, a pserver and a master)",
        PYTORCH.name: "PyTorchJobs (elastic, WORKERs only, no MASTER)",
    }
    return [
        f"{described.get(kind, kind + 's')}: {', '.join(names or [])}."
        for kind, names in kinds.items()
    ]


def _wait_by_kind_rows(auto: dict[str, Any] | None, static: dict[str, Any] | None) -> list[str]:
    kinds = sorted({k for run in (auto, static) if run for k in run.get("meanWaitByKind", {})})
    if len(kinds) < 2:
        return []
    return [
        f"| mean wait of the {kind}s | "
        + " | ".join(
            str((run or {}).get("meanWaitByKind", {}).get(kind, "-")) for run in (auto, static)
        )
        + " |"
        for kind in kinds
    ]


def _offered_load(name: str) -> float:
    """The jobs' GPU-seconds over the cluster's, from the first arrival to the last."""
    trace = json.loads(TRACES[name].path.read_text())
    jobs, cluster = trace["jobs"], trace["cluster"]
    work = sum(j["work"] * j["gpusPerTrainer"] for j in jobs)
    span = max(j["arrival"] for j in jobs) - min(j["arrival"] for j in jobs)
    return work / (cluster["nodes"] * cluster["gpusPerNode"] * span) if span else math.inf


def _acceptance_lines(name: str, result: dict[str, Any]) -> list[str]:
    auto, static = result["runs"].get("autoscaler"), result["runs"].get("static")
    if not (auto and static):
        return ["(one mode only: no comparison)"]
    verdict = acceptance(result, name)
    pairs = verdict["perReplay"]
    lines = []
    if len(pairs) > 1:
        each = "; ".join(f"{i + 1}: {m:.2f} and {w:.2f}" for i, (m, w) in enumerate(pairs))
        lines.append(
            f"Autoscaler / static, mean and max wait of each of {len(pairs)} replays: "
            f"{each}. The tables and the plot show replay {result['shownReplay'] + 1}, "
            "the median's."
        )
    lines.append(
        f"Autoscaler / static{' (median of the replays)' if len(pairs) > 1 else ''}: "
        f"mean wait {verdict['meanWaitRatio']:.2f}, max wait {verdict['maxWaitRatio']:.2f}."
    )
    met = ", ".join(f"{k}: {'yes' if ok else '**no**'}" for k, ok in verdict["met"].items())
    return [*lines, f"Acceptance: {met}."]


def _cause_lines(auto: dict[str, Any] | None, static: dict[str, Any] | None) -> list[str]:
    lines = [
        "Where the waiting went (trace seconds summed over jobs, each tick of a",
        "waiting job named by the first of these that holds):",
        "",
        "| cause | autoscaler | static |",
        "|---|---|---|",
    ]
    for cause, meaning in WAIT_CAUSES.items():
        a = (auto or {}).get("waitCauses", {}).get(cause, 0)
        s = (static or {}).get("waitCauses", {}).get(cause, 0)
        lines.append(f"| {cause}: {meaning} | {a} | {s} |")
    return lines


def _idle_lines(auto: dict[str, Any] | None, static: dict[str, Any] | None) -> list[str]:
    lines = [
        "GPUs running no trainer while demand >= capacity (share of capacity x that window):",
        "",
        "| cause | autoscaler | static |",
        "|---|---|---|",
    ]
    for cause, meaning in IDLE_CAUSES.items():
        cells = [
            f"{100 * run['idleWhileSaturated'][cause]:.1f} %"
            if run and "idleWhileSaturated" in run
            else "-"
            for run in (auto, static)
        ]
        lines.append(f"| {cause}: {meaning} | {cells[0]} | {cells[1]} |")
    return lines


def _problem_lines(run: dict[str, Any] | None) -> list[str]:
    if run is None:
        return []
    found = {**run["checks"]["overcommitted"], **run["checks"]["outOfBounds"]}
    return [f"- {run['mode']}: {problem} ({n} ticks)" for problem, n in found.items()]


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Elastic PyTorchJobs and PaddleJobs: the autoscaler against static minimums",
        "",
        "`make bench-elastic` (bench/elastic/) replays each trace on 8 kwok nodes x 8",
        "GPUs: with the autoscaler, and with every job at its minimum (minInstance",
        "trainers, minReplicas WORKERs). Every other job of a trace is an elastic",
        "PyTorchJob, the others PaddleJobs (each trace names them); one plan sizes both.",
        "The heavy trace is replayed three times in both modes and judged on the median",
        "of its ratios; every other figure of a trace comes from one run of each mode.",
        _wall_line(results),
        "",
    ]
    for name, result in results["traces"].items():
        lines += trace_markdown(name, result)
    memory = _memory_line(results)
    if memory:
        lines += [memory, ""]
    lines += READING
    return "\n".join(lines) + "\n"


def _wall_line(results: dict[str, Any]) -> str:
    traces = ", ".join(results.get("lastRunTraces") or ["its traces"])
    last = f"the run that last wrote this file replayed {traces} in {results['wallSeconds']:.0f} s"
    full = results.get("fullRunWallSeconds")
    if not full:
        return f"No run of every trace in one go wrote this file; {last}."
    return f"Wall time of the last run of every trace in one go: {full:.0f} s; {last}."


def _memory_line(results: dict[str, Any]) -> str | None:
    for result in results["traces"].values():
        memory = (result["runs"].get("autoscaler") or {}).get("podCacheMemory")
        if memory:
            return (
                "Watching every pod: the autoscaler's cache keeps a planner record per pod "
                f"instead of the object. For {memory['pods']} copies of a trainer pod "
                f"({memory['podJsonBytes']} bytes of JSON): {memory['fullObjectBytesPerPod']} "
                f"bytes per pod as a dict ({memory['fullMiBPer10kPods']} MiB), "
                f"{memory['plannerRecordBytesPerPod']} bytes as a record "
                f"({memory['plannerMiBPer10kPods']} MiB)."
            )
    return None


READING = [
    "Reading it. The operator, kube-scheduler and kwok react in wall time, so each",
    "reaction counts 1/scale times more in trace time than on a real cluster (the",
    "autoscaler's pass alone waits 0.5 s for events to settle). Under the autoscaler",
    "a newcomer waits for others to give back trainers (the pass, the patch, the",
    "deletion, the scheduler's retry): short waits, rarely zero. Static allocation",
    "starts jobs at once until the cluster is full at everyone's minimum, then",
    "queues them. Under overload (jobs offering more GPU-seconds than the cluster",
    "has while they arrive) every running job ends up at its minimum ('full at",
    "minimums'): nothing is left to give back, and which waiting job starts when",
    "another finishes is kube-scheduler's choice. It binds pods in its own order",
    "(a pod that did not fit waits out a back-off: 1 s at the default scale), so a job",
    "of large trainers can be passed by younger, smaller ones.",
]


def plot(name: str, result: dict[str, Any], capacity: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 11))
    colors = {"autoscaler": "tab:blue", "static": "tab:orange"}
    for mode, run in runs.items():
        series = run["series"]
        axes[0].plot(
            [s[0] for s in series],
            [100 * s[1] / capacity for s in series],
            label=f"{mode}: {100 * run['gpuUtilizationSaturated']:.1f} % while saturated",
            color=colors[mode],
            linewidth=1,
        )
    axes[0].set_ylabel("GPUs held by Running trainers and WORKERs (%)")
    axes[0].set_xlabel("trace seconds")
    axes[0].set_ylim(0, 105)
    axes[0].legend(loc="lower right")
    axes[0].set_title(f"{name}: GPU utilization over time")
    width = 0.4
    for offset, (mode, run) in zip((-width / 2, width / 2), runs.items(), strict=False):
        jobs = run["jobs"]
        x = [i + offset for i in range(len(jobs))]
        for ax, key, mean in (
            (axes[1], "wait", "meanWait"),
            (axes[2], "completion", "meanCompletion"),
        ):
            values = [j[key] or 0 for j in jobs]
            ax.bar(x, values, width, label=f"{mode}: mean {run[mean]}", color=colors[mode])
    axes[1].set_ylabel("wait (trace s)")
    axes[1].set_title("Wait per job: submission to first trainer or WORKER Running")
    axes[2].set_ylabel("completion (trace s)")
    axes[2].set_xlabel("job by arrival (PD: a PaddleJob, PT: a PyTorchJob)")
    jobs = next(iter(runs.values()))["jobs"]
    short = {PADDLE.name: "PD", PYTORCH.name: "PT"}
    for ax in axes[1:]:
        ax.set_xticks(range(len(jobs)))
        ax.set_xticklabels(
            [f"{j['name'][-2:]} {short.get(j.get('kind', PADDLE.name), '?')}" for j in jobs],
            rotation=90,
            fontsize=6,
        )
    axes[2].set_title("Completion per job: submission to work done")
    for ax in axes[1:]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_report(results: dict[str, Any], out: Path = RESULTS) -> str:
    for name, result in results["traces"].items():
        if result["runs"]:
            plot(name, result, result["capacity"], out / f"elastic-{name}.png")
    (out / RESULTS_JSON.name).write_text(compact_json(results))
    table = markdown(results)
    (out / "elastic.md").write_text(table)
    return table
