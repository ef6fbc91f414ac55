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
from collections import Counter
from typing import Any

from bench.chaos.jobs import mixed
from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.scenarios.lost_node import BOUND, POOL, RUN, TAINT, placed
from bench.chaos.suite import Row, Suite
from bench.common.devtools import NodeSpec, losable_node
from bench.common.operator import Scope, resource_for

NODES = ("chaos-cut-a", "chaos-cut-b")
# Past the node controller's grace (50 s), the pods' toleration (10 s),
# their grace (5 s) and the operator's wait (30 s): their replacements run
# before the node is back.
CUT = 120


def node_partition(suite: Suite) -> Row:
    row = Row(f"a node cut off from the API server for {CUT}s during 40 running jobs, then back")
    jobs = 15 if suite.args.short else 40
    ns = suite.namespace("chaos-cut")
    labels, taints = {POOL: TAINT}, [{"key": POOL, "value": TAINT, "effect": "NoSchedule"}]
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    names = [f"q{i}" for i in range(jobs)]
    with (
        losable_node(suite.cluster, NodeSpec(NODES[0], gpu=0), labels, taints) as a,
        losable_node(suite.cluster, NodeSpec(NODES[1], gpu=0), labels, taints) as b,
    ):
        suite.submit(ns, [placed(mixed(n, i, workers=2, run=RUN)) for i, n in enumerate(names)])
        suite.wait(
            "the jobs to run", lambda: suite.settled(ns, dict.fromkeys(names, "Running")), 180
        )
        pods = Counter(p["spec"].get("nodeName", "") for p in _pods(suite, ns))
        cut = a if pods[a.name] >= pods[b.name] else b
        there = {
            p["metadata"]["uid"] for p in _pods(suite, ns) if p["spec"]["nodeName"] == cut.name
        }
        with cut.cut_off():
            time.sleep(CUT)
        done = suite.wait(
            "every job Done", lambda: suite.settled(ns, dict.fromkeys(names, "Succeeded")), BOUND
        )
        left = suite.wait(
            "the cut-off node's pods gone",
            lambda: not [p for p in _pods(suite, ns) if p["metadata"]["uid"] in there],
            60,
        )
        leftover = len([p for p in _pods(suite, ns) if p["metadata"]["uid"] in there])
        by_design = overlaps(suite.ledger, ns) - overlaps(suite.ledger, ns, lost_with_node=there)
        row.notes.append(
            f"{cut.name} cut off with {len(there)} pods; every job"
            f" {'Done' if done else 'not Done'} within {BOUND}s of its return;"
            f" its pods {'gone' if left else 'still there'} once back;"
            f" {by_design} ran on beside their replacements while cut off (by design)"
        )
    suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=60)
    statuses = [job.get("status") or {} for job in suite.jobs(ns).values()]
    row.wrong += sum(1 for s in statuses if s.get("restartCount"))
    row.duplicates = overlaps(suite.ledger, ns, lost_with_node=there)
    row.orphans += leftover
    row.restarts = ops.restarts
    ops.stop()
    return row


def _pods(suite: Suite, ns: str) -> list[dict[str, Any]]:
    return list(suite.kube.list_objects(Scope(resource_for("v1", "Pod"), ns)).items)
