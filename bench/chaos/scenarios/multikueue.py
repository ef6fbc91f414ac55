"""Scenario 8 of the chaos suite, `multikueue`: jobs dispatched by Kueue's
MultiKueue from a manager to two workers (docs/multicluster.md) while the
first worker's kube-apiserver is stopped past workerLostTimeout and then
started again, and the manager's operator and Kueue are SIGKILLed at random
moments during dispatch, each back after a random pause.

It runs on clusters of its own: a manager and two workers
(devtools.MultiCluster), each with Kueue, the chart and an operator. Its
jobs are TFJobs whose MASTER ends with 0 after a while, submitted to the
manager in waves; a few are deleted on the manager while they run. What
must be zero, in the suite's columns:
- duplicate pods: samples (one a second) in which one job had pods Running
  on both workers at once;
- orphans: copies on a worker of jobs deleted on the manager, two of
  MultiKueue's garbage collections after the last deletion;
- wrong final states: jobs whose manager status ended otherwise than
  Succeeded (every MASTER exits 0);
- lost jobs: jobs whose manager status never reached an end.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.chaos.jobs import tfjob
from bench.chaos.log import log
from bench.chaos.suite import FINISHED, Row
from bench.common.devtools import LocalCluster, MultiCluster

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
LOST_TIMEOUT, GC_INTERVAL = 20, 10  # seconds: MultiKueue's settings here
NAMESPACE = "chaos-multikueue"


def dispatched(name: str) -> dict[str, Any]:
    job = tfjob(name, workers=1, run="20s", managedBy=MULTIKUEUE)
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    return job


def items(cluster: LocalCluster, kind: str) -> list[dict[str, Any]]:
    status, found = cluster.api(_path(kind))
    return list(found.get("items") or []) if status == 200 else []


def _path(kind: str) -> str:
    if kind == "pods":
        return f"/api/v1/namespaces/{NAMESPACE}/pods"
    return f"/apis/dlk8s.io/v1alpha1/namespaces/{NAMESPACE}/{kind}"


class Referee:
    """Samples, once a second, which workers run each job's pods."""

    def __init__(self, clusters: MultiCluster) -> None:
        self.clusters = clusters
        self.overlaps: dict[str, int] = defaultdict(int)  # job -> samples on two workers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="referee", daemon=True)

    def start(self) -> Referee:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            where: dict[str, set[str]] = defaultdict(set)
            for worker, cluster in self.clusters.members.items():
                for pod in items(cluster, "pods"):
                    if (pod.get("status") or {}).get("phase") == "Running":
                        job = (pod["metadata"].get("labels") or {}).get("dlk8s.io/job-name")
                        where[str(job)].add(worker)
            for job, workers in where.items():
                if len(workers) > 1:
                    self.overlaps[job] += 1


def strike(clusters: MultiCluster, rng: random.Random, kills: int) -> list[str]:
    """SIGKILL the manager's operator or Kueue `kills` times at random
    moments, each back after a random pause; what was done."""
    done = []
    manager = clusters.manager
    for i in range(kills):
        time.sleep(rng.uniform(2.0, 6.0))
        if i % 2 == 0:
            proc = clusters.operators["manager"]
            proc.kill()
            time.sleep(rng.uniform(0.0, 3.0))
            proc.start(wait_ready=False)
            done.append("operator")
        elif manager.kueue_process is not None:
            manager.kueue_process.kill()
            time.sleep(rng.uniform(0.0, 3.0))
            manager.kueue_process.stop()
            manager.kueue_process.start()
            done.append("kueue")
    return done


def multikueue(args: argparse.Namespace) -> Row:
    row = Row("MultiKueue: a worker's API server stopped past workerLostTimeout; the manager's")
    row.scenario += " operator and Kueue killed during dispatch"
    rng = random.Random(args.seed)
    waves, per_wave = (2, 6) if args.short else (3, 10)
    lost_timeout, gc = f"{LOST_TIMEOUT}s", f"{GC_INTERVAL}s"
    with MultiCluster(worker_lost_timeout=lost_timeout, gc_interval=gc) as clusters:
        for cluster in clusters.clusters.values():
            cluster.kubectl("create", "namespace", NAMESPACE)
            clusters.local_queue(cluster, NAMESPACE)
        referee = Referee(clusters).start()
        names, deleted, struck = [], [], []
        for wave in range(waves):
            batch = [dispatched(f"mk-{wave}-{i}") for i in range(per_wave)]
            for job in batch:
                clusters.manager.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(job))
            names += [j["metadata"]["name"] for j in batch]
            struck += strike(clusters, rng, 2)
            if wave == 0:
                with clusters.members["worker-1"].api_server_down():
                    time.sleep(LOST_TIMEOUT + 15)
                restart_exited(clusters)
            gone = rng.choice(names)
            clusters.manager.kubectl("delete", "tfjob", gone, "-n", NAMESPACE, "--wait=false")
            deleted.append(gone)
            names.remove(gone)
        judge(clusters, row, names, deleted)
        referee.stop()
        row.duplicates = sum(referee.overlaps.values())
        row.notes.append(
            f"{waves} waves of {per_wave}; worker-1's API server down {LOST_TIMEOUT + 15}s;"
            f" kills: {', '.join(struck)}; deleted on the manager: {len(deleted)}"
        )
        if row.duplicates or row.orphans or row.lost or row.wrong:
            keep_evidence(clusters, row, referee)
    return row


def keep_evidence(clusters: MultiCluster, row: Row, referee: Referee) -> None:
    """Every cluster's jobs, Workloads and events, Kueue's and the
    operator's logs, and the referee's overlaps by job, kept past the
    clusters' teardown: what explains a figure that must be zero and is not."""
    keep = Path(tempfile.mkdtemp(prefix="chaos-multikueue-"))
    for name, cluster in clusters.clusters.items():
        for what in ("tfjobs", "workloads.kueue.x-k8s.io", "events"):
            found = cluster.kubectl("get", what, "-n", NAMESPACE, "-o", "yaml", check=False)
            (keep / f"{name}-{what.split('.')[0]}.yaml").write_text(found.stdout)
        if cluster.kueue_process is not None and cluster.kueue_process.log_file.exists():
            shutil.copy(cluster.kueue_process.log_file, keep / f"{name}-kueue.log")
    for name, process in clusters.operators.items():
        if process.log_path.exists():
            shutil.copy(process.log_path, keep / f"{name}-operator.log")
    (keep / "overlaps.json").write_text(json.dumps(dict(referee.overlaps), indent=1))
    row.notes.append(f"logs kept in {keep}")
    log(f"multikueue: logs kept in {keep}")


def restart_exited(clusters: MultiCluster) -> None:
    """An operator that lost its Lease while its API server was away exits;
    its Deployment would start it again."""
    for process in clusters.operators.values():
        if process.popen is None or process.popen.poll() is not None:
            process.start(wait_ready=False)


def judge(clusters: MultiCluster, row: Row, names: list[str], deleted: list[str]) -> None:
    deadline = time.monotonic() + 300
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = {
            j["metadata"]["name"]: str((j.get("status") or {}).get("state") or "")
            for j in items(clusters.manager, "tfjobs")
        }
        if all(states.get(n) in FINISHED for n in names):
            break
        time.sleep(2)
    time.sleep(2 * GC_INTERVAL)
    left = [
        (worker, j["metadata"]["name"])
        for worker, cluster in clusters.members.items()
        for j in items(cluster, "tfjobs")
        if j["metadata"]["name"] in deleted
    ]
    row.jobs = len(names) + len(deleted)
    row.lost = sum(1 for n in names if states.get(n) not in FINISHED)
    row.wrong = sum(1 for n in names if states.get(n) in FINISHED and states[n] != "Succeeded")
    row.orphans = len(left)
    if left or row.lost or row.wrong:
        row.notes.append(f"left on workers: {left[:4]}; states: {dict(list(states.items())[:6])}")
    log(f"multikueue: {row}")
