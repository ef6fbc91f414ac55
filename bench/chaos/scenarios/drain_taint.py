"""Scenario 6, drain-taint: one node drained with `kubectl drain` and another
tainted NoExecute while 50 jobs run: every pod there is disrupted and
recreated elsewhere, every job must end Done with no restart counted
(issue 30)."""

from __future__ import annotations

from collections import Counter

from bench.chaos.jobs import mixed
from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.common.operator import LABEL_JOB_NAME, Scope, resource_for


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
    # Not Done, or a restart counted for a disruption: both are wrong.
    counted, note = suite.restarts(ns)
    row.wrong += counted + sum(1 for phase in phases() if phase != "Done")
    row.duplicates = overlaps(suite.ledger, ns)
    row.notes.append(f"{drained} drained, {tainted} tainted; {note}")
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
