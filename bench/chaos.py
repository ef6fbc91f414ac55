"""The chaos suite: faults an operator of a real cluster meets, on the local
control plane (`make chaos`; not part of `make test`).

    make chaos                                   # the full run, ~12 minutes
    .tools/venv/bin/python bench/chaos.py --short  # fewer jobs and kills

One local control plane (4 kwok nodes; scenario 7 gets a second one, with
Kueue, once 1-6 are done), the chart installed, the operator run as a local
process with the chart's ServiceAccount, restarted like a kubelet would if it
exits on its own (each such restart is counted). The jobs of
scenarios 1-4, 6 and 7 are TFJobs and, every third, a PyTorchJob (a MASTER and
WORKERs; in 1, 6 and 7 every other of those is elastic: WORKERs only, with an
elasticPolicy); on kwok their MASTER (an elastic job's WORKERs) ends with 0
after a while. Scenarios, each in a namespace of its own:

1. operator-kill: the operator SIGKILLed at random moments, ten times,
   during a burst of 100 jobs, each time restarted after a random pause;
2. apiserver-restart: kube-apiserver killed and restarted three times
   while jobs start and finish;
3. sigstop-compact: the operator stopped (SIGSTOP) while jobs change (some
   finish, some are deleted, new ones come), etcd compacted so that its
   watches come back with 410, then resumed;
4. leader-kill: two operators with leader election, the leader SIGKILLed
   during a burst, the survivor SIGTERMed at the end (the hand-over);
5. hostile: 31 hostile but schema-valid jobs (thousands of replicas, huge
   annotations, names at the length limits, labels that claim another job's
   pods, variables that collide with ours, also a PyTorchJob's, a template
   that names its own pod or owner, ...) beside a bystander job that must
   not be touched;
6. drain-taint: one node drained with `kubectl drain` and another tainted
   NoExecute while 50 jobs run: every pod there is disrupted and recreated
   elsewhere, every job must end Done with no restart counted (issue 30);
7. kueue: the operator and Kueue's manager SIGKILLed at random moments while
   Kueue admits and preempts 50 queued jobs (bench/chaos_kueue.py), on a
   cluster of its own with Kueue beside it, so that 1-6 run without Kueue.

For each: duplicate pods (more than one pod per replica, or more creations
than replicas; in 6 and 7, where pods are recreated by design, a pod created
while another of its replica still existed), orphans (pods whose job is
gone, or still running after it finished), wrong final states, lost jobs
(never given a status; in 7, never finished), API requests and log lines
per second of the operator during the outage, and operator restarts; for 7
also pods of jobs Kueue had not admitted, samples over the queue's quota and
quota left reserved at the end. Pods are followed by a watch of the suite's
own, every creation counted by uid. The table goes to bench/results/chaos.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlk8s.job.vocabulary import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from dlk8s.runtime.apiresources import JOB_RESOURCES, resource_for
from dlk8s.runtime.client import Kube, Scope, Selectors
from dlk8s.runtime.errors import ApiError
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Informer
from dlk8s_dev.localcluster import (
    EXIT_CODE_ANNOTATION,
    REPO_ROOT,
    RUN_DURATION_ANNOTATION,
    LocalCluster,
    NodeSpec,
)
from dlk8s_dev.localdeploy import Install, OperatorProcess, install_chart
from dlk8s_dev.stopping import interrupt_on_termination

RESULTS = REPO_ROOT / "bench" / "results"
API = "dlk8s.io/v1alpha1"
LEASE_SECONDS = 15
FINISHED = ("Succeeded", "Failed")
MASTER, WORKER = "MASTER", "WORKER"


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the jobs ------------------------------------------------------------------------------------


def pod_template(container: str, image: str, run: str | None = None) -> dict[str, Any]:
    """A pod template whose kwok pod ends with 0 after `run` of running (None: runs on)."""
    pod: dict[str, Any] = {"spec": {"containers": [{"name": container, "image": image}]}}
    if run is not None:
        annotations = {EXIT_CODE_ANNOTATION: "0", RUN_DURATION_ANNOTATION: run}
        pod["metadata"] = {"annotations": annotations}
    return pod


def tfjob(name: str, workers: int = 1, run: str | None = "20s", **spec: Any) -> dict[str, Any]:
    """A TFJob whose MASTER ends with 0 after `run` of running (None: runs on)."""
    master = pod_template("tensorflow", "tf", run)
    specs = [{"tfReplicaType": "MASTER", "replicas": 1, "template": master}]
    if workers:
        worker = pod_template("tensorflow", "tf")
        specs.append({"tfReplicaType": "WORKER", "replicas": workers, "template": worker})
    return {
        "apiVersion": API,
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": specs, **spec},
    }


def pytorchjob(
    name: str, workers: int = 1, run: str | None = "20s", elastic: bool = False
) -> dict[str, Any]:
    """A PyTorchJob whose MASTER ends with 0 after `run` of running (None: runs on).
    Elastic: no MASTER, and its WORKERs (at least two) decide together, each
    ending with 0 after `run`; replicas at maxReplicas, so that the autoscaler
    cannot grow it and only the faults move its pods."""
    role = WORKER if elastic else MASTER
    workers = max(workers, 2) if elastic else workers
    specs: list[dict[str, Any]] = [] if elastic else [{"pytorchReplicaType": MASTER, "replicas": 1}]
    if workers:
        specs.append({"pytorchReplicaType": WORKER, "replicas": workers})
    for replica in specs:
        ends = replica["pytorchReplicaType"] == role
        replica["template"] = pod_template("pytorch", "torch", run if ends else None)
    spec: dict[str, Any] = {"replicaSpecs": specs}
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": workers, "maxRestarts": 3}
    return {"apiVersion": API, "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def mixed(
    name: str, i: int, workers: int = 1, run: str | None = "20s", elastic: bool = False
) -> dict[str, Any]:
    """The i-th job of a scenario: every third a PyTorchJob (with `elastic`,
    every other of those an elastic one), the rest TFJobs."""
    if i % 3 != 2:
        return tfjob(name, workers=workers, run=run)
    return pytorchjob(name, workers=workers, run=run, elastic=elastic and i % 6 == 5)


def mxjob(name: str, workers: int) -> dict[str, Any]:
    """An MXJob that runs on: one SCHEDULER and `workers` WORKERs."""
    template = {"spec": {"containers": [{"name": "mxnet", "image": "mx"}]}}
    specs = [
        {"mxReplicaType": "SCHEDULER", "replicas": 1, "template": template},
        {"mxReplicaType": "WORKER", "replicas": workers, "template": template},
    ]
    return {
        "apiVersion": API,
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": specs},
    }


# --- what happened to every pod ------------------------------------------------------------------


@dataclass
class Life:
    namespace: str
    job: str
    slot: tuple[str, str]  # (replica type, index)
    owner: str  # the controlling job's uid
    phase: str = ""
    deleted: bool = False
    # When the suite's watch first saw it, and saw it deleted: two lives of
    # one slot that overlap are a duplicate even where pods are recreated.
    born: float = field(default_factory=time.monotonic)
    died: float | None = None
    # Its resourceVersion when first seen: its creation's (unless a relist
    # came first), to place it among other objects' changes (chaos_kueue).
    version: int = 0


def owner_uid(meta: dict[str, Any]) -> str:
    """The uid of an object's controlling owner (its job), or ""."""
    return next((r["uid"] for r in meta.get("ownerReferences") or [] if r.get("controller")), "")


class Ledger:
    """Every pod carrying dlk8s.io/job-name, by uid, from a watch of the suite's own."""

    def __init__(self, kube: Kube) -> None:
        self.pods: dict[str, Life] = {}
        self._lock = threading.Lock()
        self._informer = Informer(kube, resource_for("v1", "Pod"), None, Selectors(LABEL_JOB_NAME))
        for kind in (ADDED, MODIFIED):
            self._informer.add_event_handler(kind, self._seen)
        self._informer.add_event_handler(DELETED, self._gone)

    def start(self) -> Ledger:
        self._informer.start()
        self._informer.wait_synced(60)
        return self

    def stop(self) -> None:
        self._informer.stop()

    def _seen(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        slot = (labels.get(LABEL_REPLICA_TYPE, ""), labels.get(LABEL_REPLICA_INDEX, ""))
        job, version = labels.get(LABEL_JOB_NAME, ""), int(meta.get("resourceVersion") or 0)
        with self._lock:
            life = self.pods.setdefault(
                meta["uid"], Life(meta["namespace"], job, slot, owner_uid(meta), version=version)
            )
            life.phase = (pod.get("status") or {}).get("phase", "")

    def _gone(self, pod: dict[str, Any]) -> None:
        with self._lock:
            life = self.pods.get(pod["metadata"].get("uid", ""))
            if life is not None:
                life.deleted, life.died = True, time.monotonic()

    def of(self, namespace: str) -> list[Life]:
        with self._lock:
            return [life for life in self.pods.values() if life.namespace == namespace]


def duplicates(ledger: Ledger, namespace: str) -> int:
    """Creations beyond one per replica slot of a job (no scenario kills pods)."""
    per_slot = Counter((life.owner, life.slot) for life in ledger.of(namespace))
    return sum(n - 1 for n in per_slot.values() if n > 1)


def overlaps(ledger: Ledger, namespace: str) -> int:
    """Pods created while another pod of their slot still existed: the
    duplicates of a scenario in which pods are disrupted and recreated."""
    lives: dict[tuple[str, tuple[str, str]], list[Life]] = {}
    for life in ledger.of(namespace):
        lives.setdefault((life.owner, life.slot), []).append(life)
    count = 0
    for group in lives.values():
        group.sort(key=lambda life: life.born)
        pairs = itertools.pairwise(group)
        count += sum(1 for old, new in pairs if old.died is None or new.born < old.died)
    return count


# --- the operators -------------------------------------------------------------------------------


class Operators:
    """The operator processes of a scenario, restarted like a kubelet would
    when one exits without being told to; such restarts are counted."""

    def __init__(self, install: Install, env: dict[str, str] | None = None) -> None:
        self.install = install
        self.env = env or {}
        self.procs: list[OperatorProcess] = []
        self.restarts = 0
        self._meant: set[int] = set()  # pids we stopped or killed
        self._stop = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._serial = 0
        self._lock = threading.Lock()  # the watchdog replaces processes too

    def start(self, count: int = 1) -> Operators:
        for _ in range(count):
            self.procs.append(self._new())
        self._watchdog.start()
        return self

    def _new(self) -> OperatorProcess:
        self._serial += 1
        name = f"chaos-{self._serial}"
        return OperatorProcess(self.install, name=name, env=self.env).start(wait_ready=False)

    def kill(self, proc: OperatorProcess) -> None:
        """SIGKILL, as the node or the OOM killer would."""
        with self._lock:
            self._meant.add(proc.pid)
        proc.kill()

    def terminate(self, proc: OperatorProcess) -> None:
        """SIGTERM, as Kubernetes does on a rollout."""
        with self._lock:
            self._meant.add(proc.pid)
        proc.stop()

    def replace(self, proc: OperatorProcess) -> OperatorProcess:
        fresh = self._new()
        with self._lock:
            self.procs[self.procs.index(proc)] = fresh
        return fresh

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                died = [
                    p
                    for p in self.procs
                    if p.popen.poll() is not None and p.pid not in self._meant  # type: ignore[union-attr]
                ]
                self._meant.update(p.pid for p in died)
            for proc in died:
                log(f"operator {proc.name} exited {proc.popen.returncode} by itself")  # type: ignore[union-attr]
                self.restarts += 1
                self.replace(proc)

    def stop(self) -> None:
        self._stop.set()
        self._watchdog.join()
        for proc in self.procs:
            self.terminate(proc)


def requests_sent(proc: OperatorProcess) -> float:
    total = 0.0
    for line in proc.metrics().splitlines():
        if line.startswith("dlk8s_api_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def log_size(proc: OperatorProcess) -> int:
    return proc.log_path.stat().st_size if proc.log_path.exists() else 0


def lines_since(proc: OperatorProcess, offset: int) -> list[str]:
    with proc.log_path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace").splitlines()


@dataclass
class Outage:
    """The operator's requests and log lines over windows of trouble."""

    seconds: float = 0.0
    requests: float = 0.0
    lines: int = 0

    @contextmanager
    def window(self, proc: OperatorProcess) -> Iterator[None]:
        began, sent, offset = time.monotonic(), requests_sent(proc), log_size(proc)
        yield
        self.seconds += time.monotonic() - began
        self.requests += requests_sent(proc) - sent
        self.lines += len(lines_since(proc, offset))

    def rates(self) -> tuple[float | None, float | None]:
        if not self.seconds:
            return None, None
        return self.requests / self.seconds, self.lines / self.seconds


# --- a scenario's verdict ------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    jobs: int = 0
    duplicates: int = 0
    orphans: int = 0
    wrong: int = 0
    lost: int = 0
    api_rps: float | None = None
    log_lps: float | None = None
    restarts: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # Scenario 7's (chaos_kueue); None elsewhere.
    unadmitted: int | None = None
    over_quota: int | None = None
    leaked_quota: int | None = None

    def must_be_zero(self) -> int:
        queued = (self.unadmitted, self.over_quota, self.leaked_quota)
        found = (self.duplicates, self.orphans, self.wrong, self.lost, self.restarts)
        return sum(found) + sum(n or 0 for n in queued)


class Suite:
    def __init__(self, args: argparse.Namespace, kueue: bool = False) -> None:
        self.args = args
        nodes = [NodeSpec(f"kwok-node-{i}", cpu="64", memory="256Gi") for i in range(4)]
        # Kueue only on the cluster of the scenarios that queue jobs: its pod
        # webhook would otherwise sit in the path of every other one's pods.
        self.cluster = LocalCluster(nodes=nodes, kueue=kueue)
        self.sets = ("cloud=gke", "kueue.enabled=true") if kueue else ("cloud=gke",)
        self.kube: Kube
        self.install: Install
        self.ledger: Ledger

    # -- jobs --

    def submit(self, namespace: str, jobs: list[dict[str, Any]]) -> None:
        def create(job: dict[str, Any]) -> None:
            job = json.loads(json.dumps(job))
            job["metadata"]["namespace"] = namespace
            self.kube.create(job)

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(create, jobs))

    def jobs(self, namespace: str) -> dict[str, dict[str, Any]]:
        found = {}
        for res in JOB_RESOURCES.values():
            for job in self.kube.list_objects(Scope(res, namespace)).items:
                found[job["metadata"]["name"]] = job
        return found

    def namespace(self, name: str) -> str:
        self.cluster.kubectl("create", "namespace", name)
        # Pods need the namespace's default ServiceAccount, made by the controller-manager.
        sa = ("get", "serviceaccount", "default", "-n", name)
        ok = self.wait(
            f"{name}'s ServiceAccount",
            lambda: self.cluster.kubectl(*sa, check=False).returncode == 0,
            60,
        )
        if not ok:
            raise TimeoutError(f"no default ServiceAccount in {name}")
        return name

    def wait(self, what: str, done: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if done():
                    return True
            except (ApiError, OSError) as err:
                log(f"{what}: {err!r}")
            time.sleep(1)
        log(f"timed out after {timeout:.0f}s waiting for {what}")
        return False

    # -- verdicts --

    def outcome(self, job: dict[str, Any] | None) -> str:
        if job is None:
            return "Deleted"
        status = job.get("status") or {}
        if status.get("state") in FINISHED:
            reason = status.get("reason")
            return "InvalidSpec" if reason == "InvalidSpec" else str(status["state"])
        created: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Created"), {}
        )
        if created.get("reason") == "FailedCreate":
            return "Refused"
        if any(
            c.get("type") == "Suspended" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ):
            return "Suspended"
        return str(status.get("phase") or "")  # Creating, Running, or "" (no status: lost)

    def settled(self, namespace: str, expected: dict[str, str]) -> bool:
        jobs = self.jobs(namespace)
        return all(self.outcome(jobs.get(name)) == want for name, want in expected.items())

    def orphans(self, namespace: str) -> int:
        """Pods whose job is gone, or still running although their job finished."""
        jobs = {j["metadata"]["uid"]: j for j in self.jobs(namespace).values()}
        count = 0
        for life in self.ledger.of(namespace):
            if life.deleted:
                continue
            job = jobs.get(life.owner)
            finished = job is not None and self.outcome(job) in FINISHED
            policy = ((job or {}).get("spec", {}).get("runPolicy") or {}).get(
                "cleanPodPolicy", "Running"
            )
            running = life.phase in ("Pending", "Running") and policy != "None"
            count += job is None or (finished and running)
        return count

    def judge(self, row: Row, namespace: str, expected: dict[str, str], timeout: float) -> Row:
        self.wait(
            f"{row.scenario}: final states", lambda: self.settled(namespace, expected), timeout
        )
        self.wait(f"{row.scenario}: cleanup", lambda: self.orphans(namespace) == 0, 60)
        jobs = self.jobs(namespace)
        outcomes = {name: self.outcome(jobs.get(name)) for name in expected}
        wrong = {n: (o, expected[n]) for n, o in outcomes.items() if o != expected[n] and o}
        if wrong:
            row.notes.append(f"wrong: {dict(list(wrong.items())[:4])}")
        seen = Counter(o or "no status" for o in outcomes.values())
        row.notes.append("final: " + ", ".join(f"{n} {o}" for o, n in seen.most_common()))
        kinds = Counter(
            ("elastic " if "elasticPolicy" in (job.get("spec") or {}) else "") + job["kind"]
            for name, job in jobs.items()
            if name in expected
        )
        row.notes.append("kinds left: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
        row.wrong = len(wrong)
        row.lost = sum(1 for o in outcomes.values() if not o)
        row.duplicates = duplicates(self.ledger, namespace)
        row.orphans = self.orphans(namespace)
        row.jobs = len(expected)
        return row

    # -- the run --

    def run(self, scenarios: Sequence[Callable[[Suite], Row]]) -> list[Row]:
        began = time.monotonic()
        self.cluster.start()
        try:
            self.install = install_chart(self.cluster, sets=self.sets)
            self.kube = Kube(self.cluster.api_client())
            self.ledger = Ledger(self.kube).start()
            rows = []
            for scenario in scenarios:
                started = time.monotonic()
                log(f"-- {scenario.__name__}")
                row = scenario(self)
                row.seconds = time.monotonic() - started
                log(f"   {row}")
                rows.append(row)
            self.ledger.stop()
            return rows
        finally:
            self.cluster.stop()
            log(f"wall time {time.monotonic() - began:.0f}s")


# --- the scenarios -------------------------------------------------------------------------------


def operator_kill(suite: Suite) -> Row:
    row = Row("operator SIGKILL x10 during a burst of 100 jobs")
    jobs = 30 if suite.args.short else 100
    kills = 3 if suite.args.short else 10
    ns = suite.namespace("chaos-kill")
    ops = Operators(suite.install).start()
    submitter = threading.Thread(
        target=suite.submit,
        args=(ns, [mixed(f"j{i}", i, workers=1, run="20s", elastic=True) for i in range(jobs)]),
    )
    submitter.start()
    rng = random.Random(suite.args.seed)
    for _ in range(kills):
        time.sleep(rng.uniform(0.5, 4.0))
        victim = ops.procs[0]
        ops.kill(victim)
        time.sleep(rng.uniform(0.0, 3.0))
        ops.replace(victim)
    submitter.join()
    expected = {f"j{i}": "Succeeded" for i in range(jobs)}
    suite.judge(row, ns, expected, timeout=300)
    row.restarts = ops.restarts
    row.notes.append(f"{kills} kills, pauses 0-3 s")
    ops.stop()
    return row


def apiserver_restart(suite: Suite) -> Row:
    row = Row("kube-apiserver killed and restarted x3 while jobs start and finish")
    ns = suite.namespace("chaos-apiserver")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    wave = 10 if suite.args.short else 20
    names: list[str] = []
    outage = Outage()
    for round_ in range(4):
        batch = [mixed(f"r{round_}-{i}", i, workers=1, run="10s") for i in range(wave)]
        suite.submit(ns, batch)
        names += [j["metadata"]["name"] for j in batch]
        if round_ == 3:
            break
        time.sleep(6)  # jobs starting, earlier ones finishing
        with outage.window(ops.procs[0]):
            suite.cluster.restart_apiserver(down=3)
    suite.judge(row, ns, {n: "Succeeded" for n in names}, timeout=300)
    row.api_rps, row.log_lps = outage.rates()
    row.restarts = ops.restarts
    row.notes.append(f"down {outage.seconds / 3:.1f}s each (kill to /readyz)")
    ops.stop()
    return row


def sigstop_compact(suite: Suite) -> Row:
    row = Row("operator SIGSTOPped while jobs change, etcd compacted, resumed")
    ns = suite.namespace("chaos-stop")
    ops = Operators(suite.install).start()
    op = ops.procs[0]
    op.wait_ready()
    first = [mixed(f"s{i}", i, workers=1, run=None) for i in range(20)]
    suite.submit(ns, first)
    suite.wait(
        "the first jobs to run",
        lambda: suite.settled(ns, {f"s{i}": "Running" for i in range(20)}),
        120,
    )
    offset = log_size(op)
    outage = Outage()
    with outage.window(op):
        op.popen.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        expected = change_while_stopped(suite, ns, first)
        revision = suite.cluster.compact_etcd()
        # The stopped process's watches would otherwise wait in their sockets
        # for it; a restarted API server drops them, and its new watch cache
        # starts past what the operator saw: its watches come back with 410.
        suite.cluster.restart_apiserver(down=1)
        op.popen.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    suite.judge(row, ns, expected, timeout=180)
    relists = sum("listing again" in line for line in lines_since(op, offset))
    row.api_rps, row.log_lps = outage.rates()
    row.restarts = ops.restarts
    row.notes.append(
        f"stopped {outage.seconds:.0f}s; etcd compacted at {revision};"
        f" {relists} watches relisted after 410"
    )
    ops.stop()
    return row


def change_while_stopped(suite: Suite, ns: str, first: list[dict[str, Any]]) -> dict[str, str]:
    """Finish ten of the first jobs (through their MASTER), delete five,
    submit ten; churn so that the stopped operator's resourceVersions fall
    out of the API server's watch window."""
    names = [job["metadata"]["name"] for job in first]
    expected = dict.fromkeys(names, "Running")
    for name in names[:10]:
        suite.cluster.kubectl(
            "annotate", "pod", f"{name}-master-0", "-n", ns, f"{EXIT_CODE_ANNOTATION}=0"
        )
        expected[name] = "Succeeded"
    for job in first[15:]:
        name, kind = job["metadata"]["name"], job["kind"].lower()
        suite.cluster.kubectl("delete", f"{kind}s.dlk8s.io", name, "-n", ns, "--wait=false")
        expected[name] = "Deleted"
    suite.submit(ns, [mixed(f"n{i}", i, workers=1, run=None) for i in range(10)])
    expected |= {f"n{i}": "Running" for i in range(10)}
    churn = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"churn-{i}", "namespace": ns},
        }
        for i in range(300)
    ]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(suite.kube.create, churn))
        list(
            pool.map(
                lambda c: suite.kube.delete("v1", "ConfigMap", ns, c["metadata"]["name"]), churn
            )
        )
    return expected


def leader_kill(suite: Suite) -> Row:
    row = Row("two operators with leader election, the leader SIGKILLed in a burst")
    jobs = 30 if suite.args.short else 100
    ns = suite.namespace("chaos-leader")
    env = {
        "DLK8S_LEADER_ELECT": "true",
        "DLK8S_LEASE_DURATION": str(LEASE_SECONDS),
        "DLK8S_LEADER_ELECTION_ID": f"{suite.install.release}-leader",
        "DLK8S_LEADER_ELECTION_NAMESPACE": suite.install.namespace,
    }
    ops = Operators(suite.install, env).start(2)
    leader = wait_leader(suite, ops)
    submitter = threading.Thread(
        target=suite.submit,
        args=(ns, [mixed(f"l{i}", i, workers=1, run="20s") for i in range(jobs)]),
    )
    submitter.start()
    time.sleep(2)
    standby = next(p for p in ops.procs if p is not leader)
    outage = Outage()
    with outage.window(standby):
        ops.kill(leader)
        killed = time.monotonic()
        suite.wait("the standby to lead", lambda: leads(standby), LEASE_SECONDS * 3)
    took_kill = time.monotonic() - killed
    ops.replace(leader)  # back as a standby
    submitter.join()
    suite.judge(row, ns, {f"l{i}": "Succeeded" for i in range(jobs)}, timeout=300)
    took_term = hand_over(suite, ops, standby)
    row.api_rps, row.log_lps = outage.rates()
    row.restarts = ops.restarts
    row.notes.append(
        f"takeover after SIGKILL {took_kill:.1f}s (lease {LEASE_SECONDS}s),"
        f" after SIGTERM {took_term:.1f}s"
    )
    ops.stop()
    return row


def leads(proc: OperatorProcess) -> bool:
    return "dlk8s_leader 1.0" in proc.metrics()


def wait_leader(suite: Suite, ops: Operators) -> OperatorProcess:
    suite.wait("a leader", lambda: any(leads(p) for p in ops.procs), LEASE_SECONDS * 3)
    return next(p for p in ops.procs if leads(p))


def hand_over(suite: Suite, ops: Operators, leader: OperatorProcess) -> float:
    """SIGTERM the leader; seconds until the other leads."""
    other = next(p for p in ops.procs if p is not leader)
    suite.wait("the new one to be a ready standby", lambda: other.get("/readyz")[0] == 200, 60)
    began = time.monotonic()
    ops.terminate(leader)
    suite.wait("the hand-over", lambda: leads(other), LEASE_SECONDS * 3)
    return time.monotonic() - began


def hostile(suite: Suite) -> Row:
    row = Row("31 hostile but schema-valid jobs beside a bystander")
    ns = suite.namespace("chaos-hostile")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    suite.submit(ns, [tfjob("bystander", workers=2, run=None)])
    suite.wait("the bystander", lambda: suite.settled(ns, {"bystander": "Running"}), 60)
    bystander = suite.jobs(ns)["bystander"]
    cases = hostile_jobs(bystander, 300 if suite.args.short else 2000)
    suite.submit(ns, [job for job, _ in cases])
    expected = {"bystander": "Running"} | {job["metadata"]["name"]: want for job, want in cases}
    suite.judge(row, ns, expected, timeout=420)
    touched = [life for life in suite.ledger.of(ns) if life.job == "bystander" and life.deleted]
    row.notes.append(f"bystander pods deleted or replaced: {len(touched)}")
    row.wrong += len(touched)
    row.restarts = ops.restarts
    ops.stop()
    return row


def hostile_jobs(bystander: dict[str, Any], many: int) -> list[tuple[dict[str, Any], str]]:
    """(job, the outcome it must reach)."""
    uid = bystander["metadata"]["uid"]
    claim = {LABEL_JOB_NAME: "bystander", LABEL_REPLICA_TYPE: "master", LABEL_REPLICA_INDEX: "0"}
    cases: list[tuple[dict[str, Any], str]] = [
        (mxjob("many", workers=many), "Running"),
        (
            with_template(tfjob("big-note", run=None), annotations={"note": "x" * 200_000}),
            "Running",
        ),
        (
            with_template(tfjob("huge-note", run=None), annotations={"note": "x" * 300_000}),
            "Refused",
        ),
        (tfjob("a" * 63, run=None), "Running"),
        (tfjob("b" * 64, run=None), "Running"),
        (tfjob("c" * 253, run=None), "Running"),
        (tfjob("d." + "e" * 100, run=None), "Running"),
        (tfjob("0digit-first", run=None), "Running"),
        (with_template(tfjob("claims", run=None), labels=claim), "Running"),
        (with_template(tfjob("claims-owner", run=None), owner=uid), "Running"),
        (with_template(tfjob("named", run=None), name="bystander-master-0"), "Running"),
        (with_template(tfjob("namespaced", run=None), namespace="kube-system"), "Running"),
        (
            with_env(
                tfjob("tf-config", run=None), {"TF_CONFIG": "{}", "KUBERNETES_SERVICE_HOST": "evil"}
            ),
            "Running",
        ),
        (
            with_env(pytorchjob("torch-env", run=None), {"MASTER_ADDR": "evil", "RANK": "7"}),
            "Running",
        ),
        (with_template(tfjob("label-too-long", run=None), labels={"team": "y" * 64}), "Refused"),
        (with_template(tfjob("label-unicode", run=None), labels={"team": "Ünïcode"}), "Refused"),
        (with_container(tfjob("typo", run=None), resource={"limits": {"cpu": "1"}}), "InvalidSpec"),
        (
            with_container(tfjob("privileged", run=None), securityContext={"privileged": True}),
            "Running",
        ),
        (with_pod(tfjob("pinned", run=None), nodeName="no-such-node"), "Creating"),
        (with_pod(tfjob("always", run=None), restartPolicy="Always"), "Running"),
        (with_pod(tfjob("host-net", run=None), hostNetwork=True), "Running"),
        (tfjob("deadline", run=None, runPolicy={"activeDeadlineSeconds": 1}), "Failed"),
        (tfjob("suspended", run=None, runPolicy={"suspend": True}), "Suspended"),
        (tfjob("ttl", run="1s", runPolicy={"ttlSecondsAfterFinished": 0}), "Deleted"),
        (with_exit(tfjob("retry-never", run=None, runPolicy={"backoffLimit": 0}), 137), "Failed"),
        (with_exit(tfjob("fails", run=None), 1), "Failed"),
        (tfjob("no-workers", workers=0, run=None), "Running"),
        (with_ps_containers(tfjob("ps-own", run=None)), "Running"),
        (with_env(tfjob("dup-env", run=None), {"A": "1"}, duplicate=True), "Running"),
        (init_clash(tfjob("init-clash", run=None)), "Refused"),
        (
            tfjob("hostile-tensorboard", run=None, tensorboard={"logDir": "/" + "l" * 1000}),
            "Running",
        ),
    ]
    return cases


def _templates(job: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for replica in job["spec"]["replicaSpecs"]:
        if "template" in replica:
            yield replica["template"]


def with_template(
    job: dict[str, Any],
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str = "",
    name: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    for template in _templates(job):
        meta = template.setdefault("metadata", {})
        meta.setdefault("labels", {}).update(labels or {})
        meta.setdefault("annotations", {}).update(annotations or {})
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": API,
                    "kind": "TFJob",
                    "name": "bystander",
                    "uid": owner,
                    "controller": True,
                }
            ]
        if name:
            meta["name"] = name
        if namespace:
            meta["namespace"] = namespace
    return job


def with_container(job: dict[str, Any], **fields: Any) -> dict[str, Any]:
    for template in _templates(job):
        template["spec"]["containers"][0].update(fields)
    return job


def with_pod(job: dict[str, Any], **fields: Any) -> dict[str, Any]:
    for template in _templates(job):
        template["spec"].update(fields)
    return job


def with_env(job: dict[str, Any], env: dict[str, str], duplicate: bool = False) -> dict[str, Any]:
    items = [{"name": k, "value": v} for k, v in env.items()]
    return with_container(job, env=items * (2 if duplicate else 1))


def with_exit(job: dict[str, Any], code: int) -> dict[str, Any]:
    master = job["spec"]["replicaSpecs"][0]["template"]
    master["metadata"] = {
        "annotations": {EXIT_CODE_ANNOTATION: str(code), RUN_DURATION_ANNOTATION: "1s"}
    }
    return job


def init_clash(job: dict[str, Any]) -> dict[str, Any]:
    """A PS whose init container takes the name of the gRPC server the
    operator adds: the pod is invalid, and the status must say so."""
    template = {
        "spec": {
            "containers": [{"name": "sidecar", "image": "x"}],
            "initContainers": [{"name": "tensorflow", "image": "x"}],
        }
    }
    job["spec"]["replicaSpecs"].append({"tfReplicaType": "PS", "replicas": 1, "template": template})
    return job


def with_ps_containers(job: dict[str, Any]) -> dict[str, Any]:
    """A PS that brings its own container named like the operator's gRPC server."""
    own = {"spec": {"containers": [{"name": "tensorflow", "image": "my-ps"}]}}
    job["spec"]["replicaSpecs"].append({"tfReplicaType": "PS", "replicas": 2, "template": own})
    return job


def drain_taint(suite: Suite) -> Row:
    row = Row("a node drained and another tainted NoExecute during 50 running jobs")
    jobs = 20 if suite.args.short else 50
    ns = suite.namespace("chaos-drain")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    names = [f"d{i}" for i in range(jobs)]
    suite.submit(
        ns, [mixed(name, i, workers=2, run="60s", elastic=True) for i, name in enumerate(names)]
    )
    suite.wait("the jobs to run", lambda: suite.settled(ns, dict.fromkeys(names, "Running")), 180)
    drained, tainted = busiest_nodes(suite, ns)
    selector = f"--pod-selector={LABEL_JOB_NAME}"  # the chart's own pods stay
    try:
        # The taint first: it takes effect at once, while the drain also
        # evicts what earlier scenarios left on its node (the hostile MXJob's
        # thousands of pods); tainted after the drain in a full run, the node
        # had no pod of this scenario left to evict.
        suite.cluster.kubectl("taint", "node", tainted, "chaos=drained:NoExecute")
        suite.cluster.kubectl(
            "drain", drained, selector, "--ignore-daemonsets", "--delete-emptydir-data",
            "--timeout=180s",
        )  # fmt: skip
        suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=420)
    finally:
        suite.cluster.kubectl("uncordon", drained, check=False)
        suite.cluster.kubectl("taint", "node", tainted, "chaos-", check=False)

    def phases() -> list[str]:
        return [(job.get("status") or {}).get("phase", "") for job in suite.jobs(ns).values()]

    suite.wait("every job Done", lambda: set(phases()) == {"Done"}, 60)
    statuses = [job.get("status") or {} for job in suite.jobs(ns).values()]
    counted = [s.get("restartCount", 0) for s in statuses]
    # Not Done, or a restart counted for a disruption: both are wrong.
    row.wrong += sum(1 for s in statuses if s.get("phase") != "Done" or s.get("restartCount"))
    row.duplicates = overlaps(suite.ledger, ns)
    why = Counter(e.get("reason") for s in statuses for e in s.get("uncountedRestarts") or [])
    row.notes.append(
        f"{drained} drained, {tainted} tainted; {sum(why.values())} pods recreated without"
        f" counting ({', '.join(f'{n} {reason}' for reason, n in why.most_common())}),"
        f" restarts counted {sum(counted)}"
    )
    row.notes += charged(suite, ns)
    row.restarts = ops.restarts
    ops.stop()
    return row


def charged(suite: Suite, ns: str) -> list[str]:
    """The jobs that counted a restart, with their kind and how many pods
    each of their replicas had: to tell which disruption was taken for a loss."""
    notes = []
    for name, job in suite.jobs(ns).items():
        count = (job.get("status") or {}).get("restartCount")
        if count:
            lives = Counter("/".join(life.slot) for life in suite.ledger.of(ns) if life.job == name)
            pods = ", ".join(f"{slot} {n}" for slot, n in sorted(lives.items()))
            notes.append(f"{name} ({job['kind']}) counted {count}, pods per replica: {pods}")
    return notes


def busiest_nodes(suite: Suite, namespace: str) -> tuple[str, str]:
    """The two nodes that run the most pods of the scenario."""
    counts = Counter(
        pod["spec"].get("nodeName", "")
        for pod in suite.kube.list_objects(Scope(resource_for("v1", "Pod"), namespace)).items
    )
    (first, _), (second, _) = counts.most_common(2)
    return first, second


SCENARIOS = [operator_kill, apiserver_restart, sigstop_compact, leader_kill, hostile, drain_taint]


# --- the table -----------------------------------------------------------------------------------


def table(rows: list[Row], wall: float, args: argparse.Namespace) -> str:
    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    def count(value: int | None) -> str:
        return "—" if value is None else str(value)

    columns = (
        "scenario", "jobs", "duplicate pods", "orphans", "wrong final states", "lost jobs",
        "pods of unadmitted jobs", "samples over quota", "leaked quota",
        "API req/s in the outage", "log lines/s in the outage", "operator restarts", "took",
        "notes",
    )  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * 12 + "---|"]
    for r in rows:
        cells = (
            r.scenario, r.jobs, r.duplicates, r.orphans, r.wrong, r.lost, count(r.unadmitted),
            count(r.over_quota), count(r.leaked_quota), rate(r.api_rps), rate(r.log_lps),
            r.restarts, f"{r.seconds:.0f}s", "; ".join(r.notes),
        )  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    run = "make chaos" + (" (--short)" if args.short else "")
    head = f"`{run}`, seed {args.seed}: wall time {wall / 60:.1f} min.\n\n"
    return head + "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--short", action="store_true", help="fewer jobs and kills (a few minutes)")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument(
        "--only", nargs="*", default=[], help="scenario function names (drain_taint, kueue, ...)"
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    # chaos_kueue builds on this module's helpers: imported once it is whole.
    from chaos_kueue import SCENARIOS as KUEUE_SCENARIOS

    rows: list[Row] = []
    for kueue, scenarios in ((False, SCENARIOS), (True, KUEUE_SCENARIOS)):
        chosen = [s for s in scenarios if not args.only or s.__name__ in args.only]
        if chosen:
            rows += Suite(args, kueue=kueue).run(chosen)
    wall = time.monotonic() - began
    text = table(rows, wall, args)
    print(text)
    name = "chaos-short" if args.short else "chaos"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.md").write_text("# The chaos suite\n\n" + text)
    (args.out / f"{name}.json").write_text(json.dumps([r.__dict__ for r in rows], indent=2))
    return 1 if sum(r.must_be_zero() for r in rows) else 0


if __name__ == "__main__":
    # chaos_kueue imports this file as `chaos`: the same module, not a second copy.
    sys.modules.setdefault("chaos", sys.modules[__name__])
    sys.exit(main())
