"""Scenario 10, paused-leader: two operators with leader election; the
leader SIGSTOPped during a burst, as a long GC or a frozen VM stops it,
past its lease, while the standby takes over and works; then resumed
(issue 49).

The resumed leader's threads run on from where they stopped, some in the
middle of a pass, before its election notices that the Lease has another
holder. Must be zero: writes it sends once the standby holds the Lease
(counted in the API server's audit log, which names each request's sender
by its user agent), besides the usual duplicates, orphans, wrong and lost
jobs (a resumed leader that does not exit counts as wrong). Its exit, once
it sees the Lease taken, is expected and not counted as a restart; it
comes back as a standby.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter

from bench.chaos import audit
from bench.chaos.jobs import mixed
from bench.chaos.log import log
from bench.chaos.operators import Operators, lines_since, log_size
from bench.chaos.scenarios.leader_kill import LEASE_SECONDS, leader_env, leads, wait_leader
from bench.chaos.suite import Row, Suite

# How long the standby works alone, after it took over, before the old
# leader runs again: writes of both would overlap in this window if the old
# one did not hold back.
ALONE = 10
FENCED = "the leader lease may have passed on"


def paused_leader(suite: Suite) -> Row:
    row = Row("two operators with leader election, the leader SIGSTOPped past its lease, resumed")
    jobs = 30 if suite.args.short else 60
    ns = suite.namespace("chaos-paused")
    ops = Operators(suite.install, leader_env(suite)).start(2)
    leader = wait_leader(suite, ops)
    identity = holder(suite)
    standby = next(p for p in ops.procs if p is not leader)
    submitter = threading.Thread(
        target=suite.submit,
        args=(ns, [mixed(f"p{i}", i, workers=1, run="20s") for i in range(jobs)]),
    )
    submitter.start()
    time.sleep(3)  # the leader in the middle of creating pods
    offset = log_size(leader)
    ops.expect_exit(leader)  # it gives the lease up once it runs again
    leader.popen.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    paused = time.monotonic()
    suite.wait("the standby to lead", lambda: leads(standby), LEASE_SECONDS * 3)
    took = time.monotonic() - paused
    successor = holder(suite)
    time.sleep(ALONE)
    leader.popen.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    gave_up = suite.wait(
        "the resumed leader to exit", lambda: leader.popen.poll() is not None, LEASE_SECONDS * 2
    )
    fenced = sum(FENCED in line for line in lines_since(leader, offset))
    ops.replace(leader)  # back as a standby
    submitter.join()
    suite.judge(row, ns, {f"p{i}": "Succeeded" for i in range(jobs)}, timeout=300)
    row.stale_writes = stale_writes(suite, identity, successor)
    row.wrong += 0 if gave_up else 1  # a leader that does not step down is wrong
    row.restarts = ops.restarts
    row.notes.append(
        f"standby led {took:.1f}s after the pause (lease {LEASE_SECONDS}s), worked {ALONE}s"
        f" alone; the resumed leader {'exited' if gave_up else 'did not exit'},"
        f" its log named {fenced} write(s) held back"
    )
    ops.stop()
    return row


def holder(suite: Suite) -> str:
    name = f"{suite.install.release}-leader"
    lease = suite.kube.get("coordination.k8s.io/v1", "Lease", suite.install.namespace, name)
    return str(lease["spec"]["holderIdentity"])


def stale_writes(suite: Suite, old: str, new: str) -> int:
    """The old leader's writes the API server received once the new one
    held the Lease (its own Lease's excepted: they change nothing once it
    sees another holder)."""
    log_ = audit.writes(suite.cluster.audit_log)
    taken = audit.took_lease(new, log_)
    if taken is None:
        log(f"paused_leader: no Lease write by {new} in the audit log")
        return 1
    late = [w for w in audit.by(old, log_) if w.at >= taken and not w.to_lease]
    if late:
        kinds = Counter(f"{w.verb} {w.resource} {w.code}" for w in late)
        log(f"paused_leader: writes after the takeover: {dict(kinds)}")
    return len(late)
