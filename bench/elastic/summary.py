"""One mode's figures of an elastic replay: waits, completion times, GPU use
over the whole run and while demand exceeds the cluster, the causes of
waiting and idle GPUs, the checks and the autoscaler's decisions."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.elastic.driver import Decision, Driver, JobRun
from bench.elastic.traces import IDLE_CAUSES, WAIT_CAUSES, kind_of


def summarize(
    mode: str, driver: Driver, replay: float, peak_rss: int | None, metrics: str
) -> dict[str, Any]:
    jobs = [_job_result(name, job, driver.decisions) for name, job in driver.jobs.items()]
    samples = driver.samples
    cap = driver.capacity
    end = max((j.done for j in driver.jobs.values() if j.done is not None), default=0.0)
    whole = _time_mean([(t, g / cap) for t, g, _, _ in samples if t <= end])
    saturated = _time_mean([(t, g / cap) for t, g, d, _ in samples if t <= end and d >= cap], True)
    waits = [j["wait"] for j in jobs if j["wait"] is not None]
    jcts = [j["completion"] for j in jobs if j["completion"] is not None]
    changes = _metric(metrics, "dlk8s_autoscaler_changes_total")
    causes: Counter[str] = Counter()
    for job in driver.jobs.values():
        causes.update(job.waiting)
    return {
        "mode": mode,
        "replayWallSeconds": round(replay, 1),
        "makespan": round(end, 1),
        "gpuUtilization": round(whole[0], 4),
        "gpuUtilizationSaturated": round(saturated[0], 4),
        "saturatedSeconds": round(saturated[1], 1),
        "meanWait": round(statistics.mean(waits), 1) if waits else None,
        "medianWait": round(statistics.median(waits), 1) if waits else None,
        "maxWait": round(max(waits), 1) if waits else None,
        "meanCompletion": round(statistics.mean(jcts), 1) if jcts else None,
        "medianCompletion": round(statistics.median(jcts), 1) if jcts else None,
        "jobsCompleted": len(jcts),
        "meanWaitByKind": _mean_wait_by_kind(jobs),
        "waitCauses": {c: round(causes[c], 1) for c in WAIT_CAUSES if causes[c]},
        "idleWhileSaturated": {
            c: round(driver.idle[c] / cap / saturated[1], 4) if saturated[1] else 0.0
            for c in IDLE_CAUSES
        },
        "checks": {
            "ticks": driver.ticks,
            "overcommitted": _worst(driver.overcommits),
            "outOfBounds": _worst(driver.out_of_bounds),
        },
        "operatorPeakRssMiB": round(peak_rss / 2**20, 1) if peak_rss else None,
        "autoscalerChanges": {k.strip("{}"): int(v) for k, v in changes.items()},
        "decisions": [[d.t, d.job, d.old, d.new, d.reason] for d in driver.decisions],
        "jobs": jobs,
        "series": [[round(t, 1), g, d, a] for t, g, d, a in thin(samples, 2.0)],
    }


def _metric(text: str, name: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, _, value = line.rpartition(" ")
            found[key[len(name) :] or "total"] = float(value)
    return found


def _mean_wait_by_kind(jobs: Sequence[dict[str, Any]]) -> dict[str, float]:
    waits: dict[str, list[float]] = {}
    for job in jobs:
        if job["wait"] is not None:
            waits.setdefault(job["kind"], []).append(job["wait"])
    return {kind: round(statistics.mean(w), 1) for kind, w in sorted(waits.items())}


def _worst(problems: Counter[str], keep: int = 10) -> dict[str, int]:
    """The problems seen, with how many ticks each was seen on (the most first)."""
    return dict(problems.most_common(keep))


def _job_result(name: str, job: JobRun, decisions: Sequence[Decision]) -> dict[str, Any]:
    sub = job.submitted
    result = {
        "name": name,
        "kind": kind_of(job.spec).name,
        "arrival": job.spec["arrival"],
        "wait": _minus(job.first_running, sub),
        "completion": _minus(job.done, sub),
        "succeededAfter": _minus(job.succeeded, sub),
        "maxTrainersSeen": job.max_trainers_seen,
        "waitCauses": {c: round(v, 1) for c, v in job.waiting.items() if v >= 0.05},
    }
    if sub is not None and job.first_running is not None:
        during = [d for d in decisions if sub <= d.t <= job.first_running and d.job != name]
        result["othersDuringWait"] = {
            "up": sum(1 for d in during if d.old is not None and d.new > d.old),
            "down": sum(1 for d in during if d.old is not None and d.new < d.old),
            "downForIt": sum(1 for d in during if f"/{name}" in d.reason),
        }
    return result


def _minus(a: float | None, b: float | None) -> float | None:
    return round(a - b, 1) if a is not None and b is not None else None


def _time_mean(points: list[tuple[float, float]], window: bool = False) -> tuple[float, float]:
    """Time-weighted mean of a step function sampled at points (and its span).

    With `window`, only the stretches between consecutive points that both
    belong to the selection count (the points are already filtered)."""
    total = weight = 0.0
    for (t0, v0), (t1, _) in itertools.pairwise(points):
        dt = t1 - t0
        if dt <= 0 or (window and dt > 5):  # a gap: the window was left in between
            continue
        total += v0 * dt
        weight += dt
    return (total / weight if weight else 0.0), weight


def thin(samples: list[Any], step: float) -> list[Any]:
    out, last = [], -step
    for sample in samples:
        if sample[0] - last >= step:
            out.append(sample)
            last = sample[0]
    return out
