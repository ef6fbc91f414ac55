"""Scenario 11, clock-skew: the operator's clock three minutes ahead of the
API server's (libfaketime), while a tainted node's pods shut down through
their whole grace period (issue 49).

Reconcile compares times the API server wrote with its own `now`: a pod
deleted by the taint manager is taken for stuck Terminating 30 s past its
deletionTimestamp, and is then replaced beside itself. Read on a clock 180 s
ahead, every such pod would look stuck the moment it is deleted, and its
replacement would run beside it for its grace period. The operator reads
the API server's clock from its answers (dlk8s.runtime.serverclock) and
must wait instead. Must be zero: two pods of one slot alive at once,
restarts counted for the disruption, jobs not Done.
"""

from __future__ import annotations

import glob

from bench.chaos.jobs import mixed, with_pod, with_template
from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.scenarios.drain_taint import busiest_nodes
from bench.chaos.suite import Row, Suite
from bench.common.devtools import USE_GRACE_ANNOTATION

AHEAD = 180  # seconds the operator's clock is ahead of the API server's
GRACE = 30  # each pod's terminationGracePeriodSeconds, all of it used
LIBFAKETIME = "/usr/lib/*/faketime/libfaketime.so.1"


def shifted_clock(seconds: int) -> dict[str, str]:
    """The environment that runs a process `seconds` ahead (behind when
    negative) on the wall clock; its monotonic clock stays true."""
    found = sorted(glob.glob(LIBFAKETIME))
    if not found:
        raise RuntimeError(f"no {LIBFAKETIME}: run `make tools` as root (apt-get libfaketime)")
    return {
        "LD_PRELOAD": found[0],
        "FAKETIME": f"{seconds:+d}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def clock_skew(suite: Suite) -> Row:
    row = Row(f"the operator's clock {AHEAD}s ahead; a node tainted NoExecute under 30 jobs")
    jobs = 15 if suite.args.short else 30
    ns = suite.namespace("chaos-skew")
    ops = Operators(suite.install, shifted_clock(AHEAD)).start()
    op = ops.procs[0]
    op.wait_ready()
    names = [f"k{i}" for i in range(jobs)]
    slow = [
        with_pod(
            with_template(
                mixed(n, i, workers=2, run="60s"), annotations={USE_GRACE_ANNOTATION: ""}
            ),
            terminationGracePeriodSeconds=GRACE,
        )
        for i, n in enumerate(names)
    ]
    suite.submit(ns, slow)
    suite.wait("the jobs to run", lambda: suite.settled(ns, dict.fromkeys(names, "Running")), 180)
    offset = clock_offset(op.metrics())
    tainted, _ = busiest_nodes(suite, ns)
    try:
        suite.cluster.kubectl("taint", "node", tainted, "chaos=skewed:NoExecute")
        suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=420)
    finally:
        suite.cluster.kubectl("taint", "node", tainted, "chaos-", check=False)
    counted, note = suite.restarts(ns)
    row.wrong += counted
    row.duplicates = overlaps(suite.ledger, ns)
    row.notes.append(
        f"the operator read the API server's clock as {offset:+.1f}s off its own;"
        f" {tainted} tainted: {note}"
    )
    row.restarts = ops.restarts
    ops.stop()
    return row


def clock_offset(metrics: str) -> float:
    for line in metrics.splitlines():
        if line.startswith("dlk8s_clock_offset_seconds "):
            return float(line.split()[1])
    return 0.0
