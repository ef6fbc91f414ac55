"""What admission and growth orders could do for the elastic traces: a model.

    .tools/venv/bin/python -m bench.elastic.model     # about a minute; prints and
                                                       # writes results/elastic-model.md

`make bench-elastic` measures the operator on kwok; each replay takes
minutes and one heavy replay's mean wait varies by a third from run to run.
This asks a different question, cheaply and deterministically: under the
rules issue #18 sets (a job starts at its minimum as soon as shrinking
others, most fulfilled first and never below their minimum, makes room;
nothing grows while such a job waits; no trainer below a minimum is ever
moved), how low can the waits go with any order of admission and growth?

The model keeps only what decides waits on these traces: GPUs per node
(the traces' trainers ask 2 CPUs and 8 GiB per GPU, so GPUs run out first),
one trainer-second of work per Running trainer per second, and time steps
of one trace second with no reaction time at all (the cluster, the
scheduler and the operator act at once).

- static: every job asks its minimum; trainers bind one by one, oldest job
  first, wherever room appears (kube-scheduler without the autoscaler).
- autoscaler: each step, waiting jobs in admission order are placed whole,
  shrinking the most fulfilled above their minimum if that makes them fit
  (shrinks undone otherwise); jobs that do not fit then take what free room
  fits their trainers, without shrinking anyone (a fault-tolerant job
  starts short, as the operator allows); a job that has waited
  `reserve_after` gets nodes kept for it, one per `reserve_after` waited
  (closest to fitting by room at minimums), on which nobody else's
  minimum goes and growth is given back; then growth fills free room one
  trainer at a time in growth order.

Both kinds the autoscaler sizes follow these rules alike (its plan knows
no kind). `mixed` replays each trace with every other job an elastic
PyTorchJob (the others PaddleJobs, as committed), whose torchrun group
does no work for RENDEZVOUS seconds after each change of its worker count
(the agents meet again; a PaddleJob's trainers carry on): the report's
last table shows what that costs the operator's policy.

Admission orders: arrival (the operator's), smallest minimum (GPUs).
Growth orders: least fulfilled (the operator's, EDL's), oldest first, and
least remaining work: an oracle, since no operator knows how much work a
job has left; it shows what the rules allow at best.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.paths import BENCH, RESULTS

TRACES = {
    name: BENCH / f"elastic-trace{'' if name == 'committed' else '-' + name}.json"
    for name in ("committed", "heavy", "burst")
}
OUT = RESULTS / "elastic-model.md"
MEASURED = RESULTS / "elastic.json"
TARGET = 0.5  # issue #18: mean and max wait at most half of static's
# One job's fate sets the max wait, and it turns on seconds: each trace is
# also modelled with its arrivals moved by up to JITTER seconds either way,
# once per further seed, and each cell gives the median over the seeds.
SEEDS = 5
JITTER = 10.0
# Trace seconds an elastic PyTorchJob's group does no work after its worker
# count changes: torchrun's agents stop their processes and rendezvous again
# (a few wall seconds on the real node, restarting from a checkpoint costs
# more), an assumption of the model.
RENDEZVOUS = 10.0
PADDLE, PYTORCH = "PaddleJob", "PyTorchJob"


@dataclass
class Job:
    name: str
    arrival: float
    low: int
    high: int
    gpus: int  # per trainer
    work: float  # trainer-seconds
    nodes: list[int] = field(default_factory=list)  # one per trainer, in index order
    start: float | None = None
    end: float | None = None
    done: float = 0.0
    kind: str = PADDLE
    idle_until: float = 0.0  # a PyTorchJob's group meets again until then
    last: int = 0  # its worker count on the previous step

    @property
    def fulfillment(self) -> float:
        return (len(self.nodes) - self.low) / (self.high - self.low)


@dataclass(frozen=True)
class Policy:
    admission: str = "arrival"  # or "smallest"
    growth: str = "least fulfilled"  # or "oldest", "least remaining (oracle)"
    reserve_after: float | None = 450.0  # None: no node is ever kept

    @property
    def label(self) -> str:
        kept = "never" if self.reserve_after is None else f"{self.reserve_after:g} s"
        return f"{self.admission} / {self.growth} / kept after {kept}"


ADMISSION: dict[str, Callable[[Job], tuple[float, ...]]] = {
    "arrival": lambda j: (j.arrival,),
    "smallest": lambda j: (j.low * j.gpus, j.arrival),
}
GROWTH: dict[str, Callable[[Job], tuple[float, ...]]] = {
    "least fulfilled": lambda j: (j.fulfillment, j.gpus, j.arrival),
    "oldest": lambda j: (j.arrival,),
    "least remaining (oracle)": lambda j: (j.work - j.done,),
}


class Cluster:
    def __init__(self, nodes: int, gpus: int) -> None:
        self.free = [gpus] * nodes
        self.kept: dict[int, Job] = {}  # node -> the starving job it is kept for

    def best(self, job: Job, anywhere: bool = False) -> int | None:
        """The node with the most free GPUs the trainer fits (LeastAllocated)."""
        fits = [
            n
            for n, room in enumerate(self.free)
            if room >= job.gpus and (anywhere or self.kept.get(n, job) is job)
        ]
        return max(fits, key=lambda n: (self.free[n], -n), default=None)

    def add(self, job: Job, anywhere: bool = False) -> bool:
        node = self.best(job, anywhere)
        if node is None:
            return False
        self.free[node] -= job.gpus
        job.nodes.append(node)
        return True

    def remove(self, job: Job) -> None:
        self.free[job.nodes.pop()] += job.gpus

    def place_minimum(self, job: Job) -> bool:
        """Place the trainers the job lacks below its minimum, all or none."""
        added = 0
        while len(job.nodes) < job.low:
            if not self.add(job):
                for _ in range(added):
                    self.remove(job)
                return False
            added += 1
        return True


def load(path: Path, seed: int = 0, mixed: bool = False) -> tuple[list[Job], int, int]:
    """The trace's jobs; seed 0 as they are, others with arrivals jittered;
    `mixed`: every other job (the second, the fourth, ...) a PyTorchJob."""
    trace = json.loads(path.read_text())
    rng = random.Random(seed)
    move = (lambda: 0.0) if seed == 0 else (lambda: rng.uniform(-JITTER, JITTER))
    jobs = [
        Job(
            j["name"],
            max(0.0, j["arrival"] + move()),
            j["minTrainers"],
            j["maxTrainers"],
            j["gpusPerTrainer"],
            j["work"],
            kind=PYTORCH if mixed and i % 2 == 1 else PADDLE,
        )
        for i, j in enumerate(trace["jobs"])
    ]
    spec = trace["cluster"]
    return jobs, spec["nodes"], spec["gpusPerNode"]


def simulate(path: Path, policy: Policy | None, seed: int = 0, mixed: bool = False) -> list[float]:
    """Each job's wait (arrival to its first trainer); policy None: static."""
    jobs, nodes, gpus = load(path, seed, mixed)
    cluster = Cluster(nodes, gpus)
    now = 0.0
    while any(j.end is None for j in jobs):
        present = [j for j in jobs if j.arrival <= now and j.end is None]
        if policy is None:
            _static_step(cluster, present, now)
        else:
            _autoscaler_step(cluster, present, now, policy)
        for job in present:
            job.done += _working(job, now)
            if job.done >= job.work:
                job.end = now + 1
                while job.nodes:
                    cluster.remove(job)
        now += 1
    return [j.start - j.arrival for j in jobs if j.start is not None]


def _working(job: Job, now: float) -> int:
    """The trainers that work this step: all of a PaddleJob's; none of a
    PyTorchJob's while its group meets again after a change of its count."""
    count = len(job.nodes)
    if job.kind == PYTORCH and job.last and count != job.last:
        job.idle_until = now + RENDEZVOUS
    job.last = count
    return 0 if now < job.idle_until else count


def _static_step(cluster: Cluster, present: Sequence[Job], now: float) -> None:
    for job in sorted(present, key=lambda j: j.arrival):
        while len(job.nodes) < job.low and cluster.add(job):
            job.start = now if job.start is None else job.start


def _autoscaler_step(cluster: Cluster, present: Sequence[Job], now: float, policy: Policy) -> None:
    cluster.kept = {n: j for n, j in cluster.kept.items() if len(j.nodes) < j.low}
    running = [j for j in present if j.start is not None]
    # Below their minimum: waiting, or started short (the rest are pending pods).
    short = sorted((j for j in present if len(j.nodes) < j.low), key=ADMISSION[policy.admission])
    for job in short:
        if _admit(cluster, job, [r for r in running if r is not job]):
            _started(job, running, now)
        elif policy.reserve_after is not None and now - job.arrival >= policy.reserve_after:
            # Starving: each trainer others can make room for gets it; nodes
            # are kept for the rest.
            while len(job.nodes) < job.low and _admit(cluster, job, running, one=True):
                _started(job, running, now)
            _keep_nodes(cluster, job, running, int((now - job.arrival) // policy.reserve_after))
    for job in short:  # the passed over take what fits, shrinking nobody
        while len(job.nodes) < job.low and cluster.add(job):
            _started(job, running, now)
    _grow(cluster, running, policy)


def _started(job: Job, running: list[Job], now: float) -> None:
    if job.start is None:
        job.start = now
        running.append(job)


def _admit(cluster: Cluster, job: Job, running: Sequence[Job], one: bool = False) -> bool:
    """Place the job's missing minimum (or `one` trainer of it), shrinking
    the most fulfilled if it must; all or nothing."""
    place = (lambda: cluster.add(job)) if one else (lambda: cluster.place_minimum(job))
    if place():
        return True
    shrunk: list[tuple[Job, int]] = []
    while True:
        donors = [r for r in running if len(r.nodes) > r.low]
        if not donors:
            for donor, node in reversed(shrunk):
                cluster.free[node] -= donor.gpus
                donor.nodes.append(node)
            return False
        donor = max(donors, key=lambda r: (r.fulfillment, r.gpus, r.arrival))
        shrunk.append((donor, donor.nodes[-1]))
        cluster.remove(donor)
        if place():
            return True


def _keep_nodes(cluster: Cluster, job: Job, running: Sequence[Job], count: int) -> None:
    mine = [n for n, j in cluster.kept.items() if j is job]
    above = [0] * len(cluster.free)
    for other in running:
        for node in other.nodes[other.low :]:
            above[node] += other.gpus
    spare = [n for n in range(len(cluster.free)) if n not in cluster.kept]
    spare.sort(key=lambda n: (max(0, job.gpus - cluster.free[n] - above[n]), n))
    for node in spare[: max(0, min(count, job.low) - len(mine))]:
        cluster.kept[node] = job
    for other in running:  # growth on a kept node is given back
        while len(other.nodes) > other.low and cluster.kept.get(other.nodes[-1]) is job:
            cluster.remove(other)


def _grow(cluster: Cluster, running: Sequence[Job], policy: Policy) -> None:
    while True:
        growable = [
            j for j in running if len(j.nodes) < j.high and cluster.best(j, True) is not None
        ]
        if not growable:
            return
        cluster.add(min(growable, key=GROWTH[policy.growth]), anywhere=True)


def policies() -> list[Policy]:
    return [
        Policy(admission, growth, reserve)
        for admission in ADMISSION
        for growth in GROWTH
        for reserve in (None, 150.0, 450.0)
    ]


def measured() -> dict[str, Any]:
    """The last `make bench-elastic` run's waits, to set the model against."""
    if not MEASURED.exists():
        return {}
    traces = json.loads(MEASURED.read_text()).get("traces", {})
    return {
        t: {m: (r["meanWait"], r["maxWait"]) for m, r in v["runs"].items()}
        for t, v in traces.items()
    }


def ratios(path: Path, policy: Policy, seed: int, static: Sequence[float]) -> tuple[float, float]:
    waits = simulate(path, policy, seed)
    return statistics.mean(waits) / statistics.mean(static), max(waits) / max(static)


def report() -> str:
    static = {(t, s): simulate(p, None, s) for t, p in TRACES.items() for s in range(SEEDS)}
    rows, meets = [], []
    for policy in policies():
        found = {
            (t, s): ratios(p, policy, s, static[t, s])
            for t, p in TRACES.items()
            for s in range(SEEDS)
        }
        cells = []
        for trace in TRACES:
            mean = statistics.median(found[trace, s][0] for s in range(SEEDS))
            worst = statistics.median(found[trace, s][1] for s in range(SEEDS))
            cells.append(f"{mean:.2f} / {worst:.2f}")
        seeds = sum(all(max(found[t, s]) <= TARGET for t in TRACES) for s in range(SEEDS))
        meets.append(seeds)
        rows.append(f"| {policy.label} | {' | '.join(cells)} | {seeds} of {SEEDS} |")
    lines = [
        "# Elastic traces: a model of admission and growth orders",
        "",
        "Generated by `bench/elastic/model.py` (see its docstring for the model).",
        "Each cell: the autoscaler's mean wait / max wait as a share of static's in",
        f"the model, the median over {SEEDS} variants of the trace (as committed, and",
        f"with arrivals moved by up to {JITTER:g} s). The last column: in how many",
        f"variants the policy meets the target of issue #18 (at most {TARGET} for both,",
        "on every trace).",
        "",
        "| admission / growth / nodes kept | " + " | ".join(TRACES) + " | meets all |",
        "|---|" + "---|" * len(TRACES) + "---|",
        *rows,
        "",
        f"Policies meeting the target in every variant: {sum(m == SEEDS for m in meets)}"
        f" of {len(meets)}; in at least one: {sum(m > 0 for m in meets)}.",
        "",
        "The model against the last replay (mean / max wait, trace seconds, the",
        "traces as committed):",
        "",
        "| trace | model static | replay static | model autoscaler | replay autoscaler |",
        "|---|---|---|---|---|",
    ]
    replay = measured()
    ours = Policy()
    for trace, path in TRACES.items():
        got = replay.get(trace, {})
        lines.append(
            f"| {trace} | {_pair(static[trace, 0])} | {_fmt(got.get('static'))}"
            f" | {_pair(simulate(path, ours))} | {_fmt(got.get('autoscaler'))} |"
        )
    lines.append("")
    lines.append(f"The operator's own policy is the row {ours.label}.")
    return "\n".join([*lines, *_mixed_lines(ours)]) + "\n"


def _mixed_lines(policy: Policy) -> list[str]:
    """The operator's policy with every other job a PyTorchJob, against
    the traces as committed (PaddleJobs only)."""
    rows = []
    for label, mixed in (("PaddleJobs only", False), ("every other a PyTorchJob", True)):
        cells = []
        for path in TRACES.values():
            found = []
            for seed in range(SEEDS):
                static = simulate(path, None, seed, mixed)
                waits = simulate(path, policy, seed, mixed)
                found.append(
                    (
                        statistics.mean(waits) / statistics.mean(static),
                        max(waits) / max(static),
                    )
                )
            mean = statistics.median(f[0] for f in found)
            worst = statistics.median(f[1] for f in found)
            cells.append(f"{mean:.2f} / {worst:.2f}")
        rows.append(f"| {label} | {' | '.join(cells)} |")
    return [
        "",
        "PyTorchJobs and PaddleJobs together: the operator's policy, each cell its",
        "mean wait / max wait as a share of static's with the same jobs (the median",
        f"over the {SEEDS} variants). A PyTorchJob's group does no work for {RENDEZVOUS:g} s",
        "after each change of its worker count (torchrun's agents meet again).",
        "",
        "| jobs | " + " | ".join(TRACES) + " |",
        "|---|" + "---|" * len(TRACES),
        *rows,
    ]


def _pair(waits: Sequence[float]) -> str:
    return f"{statistics.mean(waits):.0f} / {max(waits):.0f}"


def _fmt(pair: tuple[float, float] | None) -> str:
    return "-" if pair is None else f"{pair[0]:.0f} / {pair[1]:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.elastic.model", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    text = report()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
