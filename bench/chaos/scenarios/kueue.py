"""Scenario 7 of the chaos suite (bench/chaos/), `kueue`: the operator and
Kueue's manager SIGKILLed at random moments while Kueue admits and preempts
50 queued jobs, each restarted after a random pause.

It runs on a cluster of its own, with Kueue beside it (dlk8s_dev.kueue) and
the chart installed with kueue.enabled=true: scenarios 1-6 keep a cluster
without Kueue, whose pod webhook would otherwise sit in their pods' way.
One ClusterQueue whose CPU quota admits about six of the jobs at once,
preemption withinClusterQueue LowerPriority, two WorkloadPriorityClasses:
35 low-priority jobs first, then three waves of 5 high-priority ones that
preempt running low ones. The jobs are the suite's mix (jobs.mixed), each
pod asking for one CPU. A killed Kueue leaves its webhooks registered with
nobody behind them, as a crashed one does: until it is back, every pod
creation and every Workload write fails.

Beyond the suite's figures (a "lost" job here is one that never finished):
- pods of unadmitted jobs: pods created while no Workload of their job was
  Admitted (and not Finished). Each pod's creation is placed among its
  Workloads' changes by resourceVersion: one etcd, whose revisions order
  the changes of every kind;
- samples over quota: every state of the Workloads the suite's watch saw,
  and the ClusterQueue's status read every second, in which the CPUs
  admitted (reserved, or in use) exceed the nominal quota;
- leaked quota: once every job finished, the ClusterQueue's reservation or
  usage left above zero, and Workloads that still reserve quota unfinished.
When one of them is not zero, the operators' and Kueue's logs and the
evidence are kept in a temporary folder named in the notes.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.chaos.jobs import mixed, with_container
from bench.chaos.ledger import Life, overlaps, owner_uid
from bench.chaos.log import log
from bench.chaos.operators import Operators, Outage
from bench.chaos.suite import FINISHED, Row, Suite
from bench.common.devtools import Kueue
from bench.common.operator import (
    ADDED,
    DELETED,
    KUEUE_API_VERSION,
    LABEL_JOB_NAME,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    MODIFIED,
    ApiError,
    Informer,
    Scope,
    Selectors,
    TransportError,
    parse_quantity,
    resource_for,
)

FLAVOR, CLUSTER_QUEUE, QUEUE = "chaos-cpus", "chaos-kueue", "chaos"
LOW, HIGH = "chaos-low", "chaos-high"
QUOTA_CPUS = Decimal(12)  # about six jobs of two one-CPU pods
RUN = "20s"  # how long a job's deciding pods run once admitted
WAVE_GAP = 20.0  # seconds between the waves of high-priority jobs
WORKLOADS = resource_for(KUEUE_API_VERSION, "Workload")
QUEUE_PATH = f"/apis/{KUEUE_API_VERSION}/clusterqueues/{CLUSTER_QUEUE}"
USAGES = ("flavorsReservation", "flavorsUsage")  # the ClusterQueue's admitted CPUs


# --- the queue and its jobs ----------------------------------------------------------------------


def queue_objects(namespace: str) -> list[dict[str, Any]]:
    def obj(kind: str, name: str, body: dict[str, Any], ns: str = "") -> dict[str, Any]:
        meta = {"name": name} | ({"namespace": ns} if ns else {})
        return {"apiVersion": KUEUE_API_VERSION, "kind": kind, "metadata": meta, **body}

    quota = [{"name": "cpu", "nominalQuota": str(QUOTA_CPUS)}]
    spec = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": quota}]}
        ],
    }
    return [
        obj("ResourceFlavor", FLAVOR, {"spec": {}}),
        obj("ClusterQueue", CLUSTER_QUEUE, {"spec": spec}),
        obj("LocalQueue", QUEUE, {"spec": {"clusterQueue": CLUSTER_QUEUE}}, namespace),
        obj("WorkloadPriorityClass", LOW, {"value": 10}),
        obj("WorkloadPriorityClass", HIGH, {"value": 1000}),
    ]


def make_queue(suite: Suite, namespace: str) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": queue_objects(namespace)}
    suite.cluster.kubectl("apply", "-f", "-", input=json.dumps(items))

    def active() -> bool:
        queue = suite.kube.request("GET", QUEUE_PATH, resource="clusterqueues")
        conditions = (queue.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

    if not suite.wait("the ClusterQueue to be active", active, 60):
        raise TimeoutError(f"ClusterQueue {CLUSTER_QUEUE} not active")


def queued_job(name: str, i: int, priority: str) -> dict[str, Any]:
    """The suite's i-th job, in the LocalQueue at `priority`, a CPU a pod."""
    job = with_container(
        mixed(name, i, workers=1, run=RUN, elastic=True), resources={"requests": {"cpu": "1"}}
    )
    job["metadata"]["labels"] = {LABEL_QUEUE_NAME: QUEUE, LABEL_PRIORITY_CLASS: priority}
    return job


def usage(queue: dict[str, Any]) -> dict[str, Decimal]:
    """The ClusterQueue's CPUs reserved and in use (flavorsReservation, flavorsUsage)."""
    status = queue.get("status") or {}
    return {
        kind: sum(
            (
                parse_quantity(r.get("total")) or Decimal(0)
                for flavor in status.get(kind) or []
                for r in flavor.get("resources") or []
                if r.get("name") == "cpu"
            ),
            Decimal(0),
        )
        for kind in USAGES
    }


# --- what Kueue and the operator made of the queue -----------------------------------------------


def true_conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in conditions if c.get("status") == "True"}


def reserved_cpus(workload: dict[str, Any]) -> Decimal:
    """The CPUs a Workload's admission holds: none once it finished."""
    true = true_conditions(workload)
    if "QuotaReserved" not in true or "Finished" in true:
        return Decimal(0)
    admission = (workload.get("status") or {}).get("admission") or {}
    return sum(
        (
            parse_quantity((a.get("resourceUsage") or {}).get("cpu")) or Decimal(0)
            for a in admission.get("podSetAssignments") or []
        ),
        Decimal(0),
    )


class Referee:
    """Every change of the scenario's Workloads, from a watch of the suite's
    own, and the ClusterQueue's status, read every second."""

    def __init__(self, suite: Suite, namespace: str) -> None:
        self.suite = suite
        # Job uid -> (resourceVersion, Workload, admitted), in the watch's order.
        self.changes: dict[str, list[tuple[int, str, bool]]] = {}
        self.holding: dict[str, Decimal] = {}  # Workload -> CPUs its admission holds
        self.evicted: set[str] = set()
        self.evictions: Counter[str] = Counter()  # by Kueue's reason
        self.over: list[str] = []  # what each sample over the quota saw
        self.peak = Decimal(0)
        self.samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._informer = Informer(suite.kube, WORKLOADS, namespace, Selectors(LABEL_JOB_NAME))
        for event in (ADDED, MODIFIED):
            self._informer.add_event_handler(event, self._seen)
        self._informer.add_event_handler(DELETED, self._gone)
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> Referee:
        self._informer.start()
        self._informer.wait_synced(60)
        self._sampler.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._sampler.join()
        self._informer.stop()

    def _seen(self, workload: dict[str, Any]) -> None:
        true = true_conditions(workload)
        admitted = {"QuotaReserved", "Admitted"} <= set(true) and "Finished" not in true
        name = workload["metadata"]["name"]
        with self._lock:
            self._note(workload["metadata"], admitted, reserved_cpus(workload))
            if "Evicted" in true and name not in self.evicted:
                self.evictions[true["Evicted"].get("reason") or "?"] += 1
            self.evicted = (self.evicted | {name}) if "Evicted" in true else self.evicted - {name}

    def _gone(self, workload: dict[str, Any]) -> None:
        with self._lock:
            self._note(workload["metadata"], False, Decimal(0))

    def _note(self, meta: dict[str, Any], admitted: bool, cpus: Decimal) -> None:
        version = int(meta.get("resourceVersion") or 0)
        change = (version, meta["name"], admitted)
        self.changes.setdefault(owner_uid(meta), []).append(change)
        self.holding[meta["name"]] = cpus
        total = sum(self.holding.values(), Decimal(0))
        self.peak = max(self.peak, total)
        if total > QUOTA_CPUS:
            self.over.append(f"Workloads hold {total} CPUs at resourceVersion {version}")

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            try:
                queue = self.suite.kube.request("GET", QUEUE_PATH, resource="clusterqueues")
            except (ApiError, TransportError, OSError):
                continue
            over = {k: str(v) for k, v in usage(queue).items() if v > QUOTA_CPUS}
            with self._lock:
                self.samples += 1
                if over:
                    self.over.append(f"ClusterQueue {over}")

    def unadmitted(self, lives: list[Life]) -> list[str]:
        """The pods created while no Workload of their job was admitted."""
        with self._lock:
            changes = {uid: sorted(c) for uid, c in self.changes.items()}
        return [
            f"{life.job}/{'-'.join(life.slot)} at resourceVersion {life.version}"
            for life in lives
            if not admitted_at(changes.get(life.owner, []), life.version)
        ]

    def history(self, job_uid: str) -> list[tuple[int, str, bool]]:
        with self._lock:
            return sorted(self.changes.get(job_uid, []))


def admitted_at(changes: list[tuple[int, str, bool]], version: int) -> bool:
    """Whether a Workload was admitted just before `version` (changes sorted)."""
    state: dict[str, bool] = {}
    for changed, workload, admitted in changes:
        if changed >= version:
            break
        state[workload] = admitted
    return any(state.values())


def leaks(suite: Suite, namespace: str) -> list[str]:
    """Quota still held: the ClusterQueue's, and unfinished Workloads' reservations."""
    queue = suite.kube.request("GET", QUEUE_PATH, resource="clusterqueues")
    left = [f"ClusterQueue {kind} {cpus} CPUs" for kind, cpus in usage(queue).items() if cpus]
    for workload in suite.kube.list_objects(Scope(WORKLOADS, namespace)).items:
        true = true_conditions(workload)
        if "QuotaReserved" in true and "Finished" not in true:
            left.append(f"Workload {workload['metadata']['name']} reserves quota, unfinished")
    return left


# --- the faults ----------------------------------------------------------------------------------


@dataclass
class Strikes:
    """What the faults did: the operator's requests while Kueue was away."""

    operator: int = 0
    kueue: int = 0
    kueue_away: list[float] = field(default_factory=list)  # SIGKILL to webhooks answering
    outage: Outage = field(default_factory=Outage)


def strike(suite: Suite, ops: Operators, plan: list[str], rng: random.Random) -> Strikes:
    """SIGKILL the operator or Kueue, as `plan` says, at random moments,
    each back after a random pause; never both away at once."""
    kueue = suite.cluster.kueue_process
    assert kueue is not None
    done = Strikes()
    for victim in plan:
        time.sleep(rng.uniform(2.0, 8.0))
        if victim == "operator":
            proc = ops.procs[0]
            ops.kill(proc)
            time.sleep(rng.uniform(0.0, 3.0))
            ops.replace(proc)
            done.operator += 1
            continue
        # Ready, so that its metrics count what it sends while Kueue is away.
        ops.procs[0].wait_ready()
        with done.outage.window(ops.procs[0]):
            done.kueue_away.append(restart_kueue(kueue, rng.uniform(0.0, 5.0)))
        done.kueue += 1
        log(f"Kueue back after {done.kueue_away[-1]:.1f}s")
    return done


def restart_kueue(kueue: Kueue, pause: float) -> float:
    """SIGKILL Kueue's manager, wait `pause`, start it again (its log goes
    on in the same file); the seconds until its webhooks answer again."""
    began = time.monotonic()
    kueue.kill()
    time.sleep(pause)
    kueue.stop()
    kueue.start()
    return time.monotonic() - began


def keep_log(kueue: Kueue, keep: Path) -> None:
    """Kueue's log, every start of it (dlk8s_dev.kueue appends)."""
    if kueue.log_file.exists():
        shutil.copy(kueue.log_file, keep / "kueue.log")


# --- the scenario --------------------------------------------------------------------------------


def kueue(suite: Suite) -> Row:
    short = suite.args.short
    lows, waves = (14, [3, 3]) if short else (35, [5, 5, 5])
    row = Row(
        f"operator and Kueue SIGKILLed while Kueue admits and preempts {lows + sum(waves)}"
        " queued jobs"
    )
    rng = random.Random(suite.args.seed)
    plan = ["operator"] * (3 if short else 8) + ["kueue"] * (2 if short else 4)
    rng.shuffle(plan)
    ns = suite.namespace("chaos-kueue")
    make_queue(suite, ns)
    referee = Referee(suite, ns).start()
    keep = Path(tempfile.mkdtemp(prefix="chaos-kueue-"))
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    low = [queued_job(f"lo{i}", i, LOW) for i in range(lows)]
    high = [queued_job(f"hi{i}", i, HIGH) for i in range(sum(waves))]
    # The strikes on this thread, the jobs on another: Kueue, started
    # again by a strike, dies with the thread that started it (dlk8s_dev.pdeath).
    with ThreadPoolExecutor(1) as pool:
        submitting = pool.submit(submit_waves, suite, ns, low, high, waves)
        strikes = strike(suite, ops, plan, rng)
        submitting.result()
    names = [job["metadata"]["name"] for job in low + high]
    suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=600)
    evidence = verdict(suite, row, ns, referee, names)
    referee.stop()
    row.api_rps, row.log_lps = strikes.outage.rates()
    row.restarts = ops.restarts
    away = ", ".join(f"{s:.0f}" for s in strikes.kueue_away)
    row.notes.append(
        f"{strikes.operator} operator kills (back after 0-3 s), {strikes.kueue} Kueue kills"
        f" (away {away} s, to its webhooks answering)"
    )
    keep_evidence(suite, row, ops, keep, evidence)
    ops.stop()
    return row


def submit_waves(
    suite: Suite,
    ns: str,
    low: list[dict[str, Any]],
    high: list[dict[str, Any]],
    waves: list[int],
) -> None:
    """The low-priority jobs at once, then the high ones in waves."""
    suite.submit(ns, low)
    for wave, count in enumerate(waves):
        time.sleep(WAVE_GAP)
        first = sum(waves[:wave])
        suite.submit(ns, high[first : first + count])


def verdict(suite: Suite, row: Row, ns: str, referee: Referee, names: list[str]) -> dict[str, Any]:
    """The figures judge() leaves: lost as never finished, duplicates as
    overlapping pods (preempted jobs' pods are recreated by design), and
    the queue's own. Returns what backs them."""
    jobs = suite.jobs(ns)
    outcomes = [suite.outcome(jobs.get(name)) for name in names]
    row.lost = sum(1 for o in outcomes if o not in FINISHED)
    row.wrong = sum(1 for o in outcomes if o in FINISHED and o != "Succeeded")
    row.duplicates = overlaps(suite.ledger, ns)
    early = referee.unadmitted(suite.ledger.of(ns))
    row.unadmitted = len(early)
    row.over_quota = len(referee.over)
    suite.wait("the quota given back", lambda: not leaks(suite, ns), 90)
    left = leaks(suite, ns)
    row.leaked_quota = len(left)
    evictions = ", ".join(f"{n} {why}" for why, n in referee.evictions.most_common()) or "none"
    row.notes.append(
        f"evictions: {evictions}; {len(suite.ledger.of(ns))} pods created;"
        f" at most {referee.peak} of {QUOTA_CPUS} CPUs admitted;"
        f" {referee.samples} ClusterQueue samples"
    )
    row.notes += [f"e.g. {what}" for what in (early[:3] + referee.over[:3] + left[:3])]
    return {
        "unadmitted": early,
        "over quota": referee.over,
        "leaks": left,
        "pods": [life.__dict__ for life in suite.ledger.of(ns)],
        "workloads by job uid": {uid: referee.history(uid) for uid in referee.changes},
    }


def keep_evidence(
    suite: Suite, row: Row, ops: Operators, keep: Path, evidence: dict[str, Any]
) -> None:
    """The logs and the evidence, kept when a figure that must be zero is not."""
    kueue = suite.cluster.kueue_process
    if not row.must_be_zero():
        shutil.rmtree(keep, ignore_errors=True)
        return
    if kueue is not None:
        keep_log(kueue, keep)
    for path in ops.procs[0].dir.glob("*.log"):
        shutil.copy(path, keep / path.name)
    (keep / "evidence.json").write_text(json.dumps(evidence, indent=1, default=str))
    row.notes.append(f"logs kept in {keep}")
    log(f"kueue: logs kept in {keep}")


SCENARIOS = [kueue]
