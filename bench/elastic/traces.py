"""The elastic bench's vocabulary: the kinds it replays, its traces and
their targets, and the names of the causes of waiting and idle GPUs.
replay.py replays the traces; report.py writes the tables and plots."""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.operator import TRAINERS, WORKERS, CountAnnotations
from bench.common.paths import BENCH

BURST_WINDOW = 60.0


# --- the kinds ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """An elastic kind as the bench meets it."""

    name: str
    role: str  # dlk8s.io/replica-type of the pods the autoscaler sizes
    counts: CountAnnotations  # the count asked for; status.<noun> shows the count run
    bounds: tuple[str, str]  # the spec's names of the minimum and the maximum


PADDLE = Kind("PaddleJob", "trainer", TRAINERS, ("minInstance", "maxInstance"))
PYTORCH = Kind("PyTorchJob", "worker", WORKERS, ("minReplicas", "maxReplicas"))
KINDS = {k.name: k for k in (PADDLE, PYTORCH)}
# The roles of the pods the autoscaler sizes: no bench PaddleJob has a
# WORKER and no bench PyTorchJob a trainer (or a MASTER), so the role alone
# tells a sized pod.
SIZED_ROLES = frozenset(k.role for k in KINDS.values())


def assign_kinds(jobs: Sequence[dict[str, Any]], mixed: bool) -> None:
    """Every other job (the second, the fourth, ...) a PyTorchJob when
    `mixed`, as model.py's mixed replays; the rest PaddleJobs."""
    for i, job in enumerate(jobs):
        job["kind"] = PYTORCH.name if mixed and i % 2 == 1 else PADDLE.name


def kind_of(spec: Mapping[str, Any]) -> Kind:
    return KINDS[spec.get("kind", PADDLE.name)]


# --- the traces ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceSpec:
    name: str
    title: str
    seed: int = 2026
    jobs: int = 36
    gap: float = 60.0  # mean seconds between arrivals
    burst: float = 0.0  # the share of the jobs that arrive within BURST_WINDOW
    # The autoscaler's mean and maximum wait, each at most this share of
    # static's (issue #33). The heavy trace's are what model.py
    # found any order of admission and growth can reach without preemption.
    targets: tuple[float, float] = (0.5, 0.5)
    # Replays of both modes; the targets hold for the median of their
    # ratios. The heavy trace's ratios are the closest to their targets, so
    # one replay's noise could decide it.
    replays: int = 1

    @property
    def path(self) -> Path:
        suffix = "" if self.name == "committed" else f"-{self.name}"
        return BENCH / f"elastic-trace{suffix}.json"


TRACES = {
    t.name: t
    for t in (
        TraceSpec("committed", "the committed trace: Poisson arrivals, mean gap 60 s"),
        TraceSpec(
            "heavy",
            "arrivals 1.5x as often: mean gap 40 s",
            gap=40.0,
            targets=(0.65, 0.7),
            replays=3,
        ),
        TraceSpec("burst", "a third of the jobs within one minute", burst=1 / 3),
    )
}


def generate(seed: int, jobs: int = 36, gap: float = 60.0, burst: float = 0.0) -> dict[str, Any]:
    """A deterministic trace: Poisson arrivals, mostly small minimums that
    may grow 3-6x, 1/2/4 GPUs per trainer, and work that takes 150-450 s at
    maxInstance (so 3-6x that at minInstance). The same seed gives the same
    jobs whatever the gap and burst: only the arrivals differ."""
    rng = random.Random(seed)
    arrival = 0.0
    entries = []
    for i in range(jobs):
        if i:
            arrival += rng.expovariate(1 / gap)
        gpus = rng.choice([1, 1, 2, 2, 2, 4])
        low = rng.choice([1, 1, 2, 2, 3])
        high = max(low + 1, min(low * rng.choice([3, 4, 5, 6]), 32 // gpus))
        work = round(high * rng.uniform(150, 450))
        entries.append(
            {
                "name": f"job-{i:02d}",
                "arrival": arrival,
                "minTrainers": low,
                "maxTrainers": high,
                "gpusPerTrainer": gpus,
                "work": work,
            }
        )
    arrivals = squeeze_burst([e["arrival"] for e in entries], burst) if burst else None
    for i, entry in enumerate(entries):
        entry["arrival"] = round(arrivals[i] if arrivals else entry["arrival"], 1)
    options = f"jobs={jobs}, gap={gap}" + (f", burst={burst:.3f}" if burst else "")
    return {
        "seed": seed,
        "generator": f"python -m bench.elastic generate --seed {seed} ({options})",
        "units": {"arrival": "trace seconds", "work": "trainer-seconds"},
        "cluster": {"nodes": 8, "gpusPerNode": 8, "cpuPerNode": "32", "memoryPerNode": "256Gi"},
        "jobs": entries,
    }


def squeeze_burst(arrivals: Sequence[float], share: float) -> list[float]:
    """`share` of the jobs, from the one a third of the way in, arrive within
    BURST_WINDOW (their gaps shrunk in proportion). The others keep their
    times: the same jobs over the same span, only burstier, so the burst is
    not confused with a heavier load."""
    count = max(2, round(len(arrivals) * share))
    first = len(arrivals) // 3
    last = min(first + count, len(arrivals)) - 1
    span = arrivals[last] - arrivals[first]
    factor = min(1.0, (BURST_WINDOW - 5) / span) if span > 0 else 1.0
    return [
        arrivals[first] + (t - arrivals[first]) * factor if first < i <= last else t
        for i, t in enumerate(arrivals)
    ]


# --- why a job waits, why a GPU idles ----------------------------------------------------

# In the order wait_cause tests them; the first that holds names the tick.
WAIT_CAUSES = {
    "no pods yet": "the operator has not created the job's minimum trainers (WORKERs) yet",
    "room free": "its minimum fits the free GPUs now; the scheduler has not bound it yet",
    "room being freed": "it fits once the pods being deleted are gone",
    "held above minimum": "it fits if others give back trainers (WORKERs) above their minimum",
    "fragmented": "enough GPUs above minimums in total, but not on few enough nodes",
    "full at minimums": "it would not fit even with every other job at its minimum",
}


IDLE_CAUSES = {
    "not running": "held by pods bound but not Running: starting, or being deleted",
    "pending pods": "free while pods that fit are pending (scheduler back-off, operator)",
    "growth": "free while a running job below its max could use it (the next pass)",
    "fragments": "free, but no pending pod and no job's trainer fits it",
}


def write_traces(args: argparse.Namespace) -> int:
    if args.out:
        wanted = [(args.out, generate(args.seed, args.jobs, args.gap, args.burst))]
    else:
        wanted = [(t.path, generate(t.seed, t.jobs, t.gap, t.burst)) for t in TRACES.values()]
    for path, trace in wanted:
        path.write_text(json.dumps(trace, indent=1) + "\n")
        print(f"wrote {path}")
    return 0
