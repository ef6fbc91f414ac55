"""Scenario 13, node-partition: a node cut off from the API server for two
minutes while its pods run on, then back (issue 49).

As in scenario 9 (lost_node), on two nodes of kwok processes of their own;
here the busier one's kwok is stopped (SIGSTOP) instead of killed: it
renews nothing and confirms nothing, as a node behind a partition. The
control plane cannot tell it from a lost node: it marks it Unknown, the
taint manager deletes its pods, and the operator replaces each beside its
pod once that is past its deadline. When the node is back its kwok deletes
the pods that were deleted meanwhile.

The cut-off pods overlap their replacements by design (nothing can tell a
cut-off pod from a dead one; the note counts them). Must be zero: other
overlaps, restarts counted, jobs not Done within the bound, orphans (pods
of the cut-off node still there once it is back among them).
"""

from __future__ import annotations

import time

from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.scenarios.lost_node import BOUND, busy_pool, pods_of
from bench.chaos.suite import Row, Suite

NODES = ("chaos-cut-a", "chaos-cut-b")
# Past the node controller's grace (50 s), the pods' toleration (10 s),
# their grace (5 s) and the operator's wait (30 s): their replacements run
# before the node is back.
CUT = 120


def node_partition(suite: Suite) -> Row:
    row = Row(f"a node cut off from the API server for {CUT}s during 40 running jobs, then back")
    jobs = 15 if suite.args.short else 40
    ns = suite.namespace("chaos-cut")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    names = [f"q{i}" for i in range(jobs)]
    with busy_pool(suite, ns, names, NODES) as (cut, there):
        with cut.cut_off():
            time.sleep(CUT)
        done = suite.wait(
            "every job Done", lambda: suite.settled(ns, dict.fromkeys(names, "Succeeded")), BOUND
        )

        def left() -> int:
            return len([p for p in pods_of(suite, ns) if p["metadata"]["uid"] in there])

        gone = suite.wait("the cut-off node's pods gone", lambda: not left(), 60)
        leftover = left()
        by_design = overlaps(suite.ledger, ns) - overlaps(suite.ledger, ns, lost_with_node=there)
        row.notes.append(
            f"{cut.name} cut off with {len(there)} pods; every job"
            f" {'Done' if done else 'not Done'} within {BOUND}s of its return;"
            f" its pods {'gone' if gone else 'still there'} once back;"
            f" {by_design} ran on beside their replacements while cut off (by design)"
        )
    suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=60)
    counted, note = suite.restarts(ns)
    row.wrong += counted
    row.duplicates = overlaps(suite.ledger, ns, lost_with_node=there)
    row.orphans += leftover
    row.notes.append(note)
    row.restarts = ops.restarts
    ops.stop()
    return row
