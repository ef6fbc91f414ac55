"""Scenario 9, lost-node: a node lost for good, with its pods, while 40
jobs run (issue 49).

Two nodes beside the cluster's four, each played by a kwok process of its
own; the jobs' pods go only there (a taint they tolerate, a required
affinity), and tolerate the node controller's unreachable and not-ready
taints for 10 s, as the docs advise. The node with more of the jobs' pods
loses its kubelet (its kwok SIGKILLed, as a power cut ends it) and never
comes back. Nothing of ours touches its pods: kube-controller-manager marks
it Unknown after its grace period, taints it, and the taint manager
deletes its pods, which stay Terminating, since nothing confirms that they
stopped. The operator must replace each beside it on the other node.

Must be zero: jobs not Done (each within the bound below), restarts counted
(an eviction by the taint manager is a disruption), overlaps between pods
of one slot other than a stuck pod and its replacement, orphans once the
lost node is removed (as its owner would, or a cloud's node controller).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from bench.chaos.jobs import mixed, with_pod
from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.common.devtools import LosableNode, NodeSpec, losable_node
from bench.common.operator import Scope, resource_for

POOL, TAINT = "chaos/pool", "lost-node"
NODES = ("chaos-lost-a", "chaos-lost-b")
# The pods' toleration of an unreachable node: its pods are deleted this
# long after kube-controller-manager taints it (300 s by default).
TOLERATION = 10
# How long each job's deciding pod runs: past the loss being noticed (the
# node controller's grace, 50 s, and the toleration) and acted on.
RUN = "100s"
# Seconds after the loss by which every job must be Done: the node noticed
# (50 s), its pods deleted (10 s) and their grace (5 s) past, the operator's
# wait (30 s), a replacement's run (100 s), and as much again for a loaded
# machine.
BOUND = 2 * (50 + TOLERATION + 5 + 30 + 100)


def placed(job: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": POOL, "operator": "In", "values": [TAINT]}]}
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    tolerations = [{"key": POOL, "value": TAINT, "effect": "NoSchedule"}] + [
        {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": TOLERATION}
        for t in ("unreachable", "not-ready")
    ]  # fmt: skip
    return with_pod(
        job,
        affinity={"nodeAffinity": affinity},
        tolerations=tolerations,
        terminationGracePeriodSeconds=5,
    )


def lost_node(suite: Suite) -> Row:
    row = Row("a node lost for good with its pods during 40 running jobs")
    jobs = 15 if suite.args.short else 40
    ns = suite.namespace("chaos-lost")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    names = [f"n{i}" for i in range(jobs)]
    with busy_pool(suite, ns, names, NODES) as (lost, stuck):
        lost.lose()
        done = suite.wait(
            "every job Done", lambda: suite.settled(ns, dict.fromkeys(names, "Succeeded")), BOUND
        )
        still = [p for p in pods_of(suite, ns) if p["metadata"]["uid"] in stuck]
        row.notes.append(
            f"{lost.name} lost with {len(stuck)} pods; {len(still)} still Terminating there"
            f" when every job was {'Done' if done else 'not Done'}"
        )
    # The node removed: its pods go with it (pod GC, or here the suite).
    suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=60)
    counted, note = suite.restarts(ns)
    row.wrong += counted
    row.duplicates = overlaps(suite.ledger, ns, lost_with_node=stuck)
    row.notes.append(note)
    row.restarts = ops.restarts
    ops.stop()
    return row


@contextlib.contextmanager
def busy_pool(
    suite: Suite, ns: str, names: list[str], nodes: tuple[str, str]
) -> Iterator[tuple[LosableNode, set[str]]]:
    """Two nodes of kwok processes of their own, the jobs `names` running
    there (placed), for the block: the busier node and its pods' uids."""
    labels, taints = {POOL: TAINT}, [{"key": POOL, "value": TAINT, "effect": "NoSchedule"}]
    with (
        losable_node(suite.cluster, NodeSpec(nodes[0], gpu=0), labels, taints) as a,
        losable_node(suite.cluster, NodeSpec(nodes[1], gpu=0), labels, taints) as b,
    ):
        suite.submit(ns, [placed(mixed(n, i, workers=2, run=RUN)) for i, n in enumerate(names)])
        suite.wait(
            "the jobs to run", lambda: suite.settled(ns, dict.fromkeys(names, "Running")), 180
        )
        pods = Counter(p["spec"].get("nodeName", "") for p in pods_of(suite, ns))
        busier = a if pods[a.name] >= pods[b.name] else b
        there = {
            p["metadata"]["uid"]
            for p in pods_of(suite, ns)
            if p["spec"].get("nodeName") == busier.name
        }
        yield busier, there


def pods_of(suite: Suite, ns: str) -> list[dict[str, Any]]:
    return list(suite.kube.list_objects(Scope(resource_for("v1", "Pod"), ns)).items)
