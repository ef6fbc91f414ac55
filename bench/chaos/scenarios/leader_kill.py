"""Scenario 4, leader-kill: two operators with leader election, the leader
SIGKILLed during a burst, the survivor SIGTERMed at the end (the hand-over)."""

from __future__ import annotations

import threading
import time

from bench.chaos.jobs import mixed
from bench.chaos.operators import Operators, Outage
from bench.chaos.suite import Row, Suite
from bench.common.devtools import OperatorProcess

LEASE_SECONDS = 15


def leader_kill(suite: Suite) -> Row:
    row = Row("two operators with leader election, the leader SIGKILLed in a burst")
    jobs = 30 if suite.args.short else 100
    ns = suite.namespace("chaos-leader")
    ops = Operators(suite.install, leader_env(suite)).start(2)
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


def leader_env(suite: Suite) -> dict[str, str]:
    """Operators that elect a leader on the release's Lease."""
    return {
        "DLK8S_LEADER_ELECT": "true",
        "DLK8S_LEASE_DURATION": str(LEASE_SECONDS),
        "DLK8S_LEADER_ELECTION_ID": f"{suite.install.release}-leader",
        "DLK8S_LEADER_ELECTION_NAMESPACE": suite.install.namespace,
    }


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
