"""The chaos suite's runner: ``Suite`` starts a local control plane, installs
the chart, runs the scenarios one after the other (each in a namespace of
its own) and judges each (``Suite.judge``) into a ``Row`` of the table."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bench.chaos.ledger import Ledger, duplicates
from bench.chaos.log import log
from bench.common.devtools import Install, LocalCluster, NodeSpec, install_chart
from bench.common.operator import JOB_RESOURCES, ApiError, Kube, Scope

FINISHED = ("Succeeded", "Failed")


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
    # Scenario 10's (paused_leader): writes by a leader after it lost its lease.
    stale_writes: int | None = None

    def must_be_zero(self) -> int:
        queued = (self.unadmitted, self.over_quota, self.leaked_quota, self.stale_writes)
        found = (self.duplicates, self.orphans, self.wrong, self.lost, self.restarts)
        return sum(found) + sum(n or 0 for n in queued)


class Suite:
    def __init__(self, args: argparse.Namespace, kueue: bool = False) -> None:
        self.args = args
        nodes = [NodeSpec(f"kwok-node-{i}", cpu="64", memory="256Gi") for i in range(4)]
        # Kueue only on the cluster of the scenarios that queue jobs: its pod
        # webhook would otherwise sit in the path of every other one's pods.
        # The API server logs the operators' writes (their ServiceAccount's
        # namespace is the release's, install_chart's default): scenario 10
        # tells a paused leader's writes from its successor's there.
        self.cluster = LocalCluster(
            nodes=nodes, kueue=kueue, audited_groups=("system:serviceaccounts:dlk8s-system",)
        )
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

    def restarts(self, namespace: str) -> tuple[int, str]:
        """The jobs that counted a restart, and a note of the pods recreated
        without counting (by reason) and of the restarts counted."""
        statuses = [job.get("status") or {} for job in self.jobs(namespace).values()]
        why = Counter(e.get("reason") for s in statuses for e in s.get("uncountedRestarts") or [])
        reasons = ", ".join(f"{n} {reason}" for reason, n in why.most_common())
        counted = sum(s.get("restartCount", 0) for s in statuses)
        note = f"{sum(why.values())} pods recreated without counting ({reasons}),"
        return sum(1 for s in statuses if s.get("restartCount")), (
            f"{note} restarts counted {counted}"
        )

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
