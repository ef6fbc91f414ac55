"""Scenario 16, operator-away: pods that fail or are evicted, and are
deleted, while no operator runs (issue 49).

40 TFJobs (a MASTER that ends after a while, two WORKERs) run; the operator
is stopped (SIGTERM, as a rollout or a node drain does) for 30 s. Meanwhile,
in 10 jobs a WORKER ends with exit code 137 (as the OOM killer ends it) and
its pod is deleted (by a person, or pod GC); in 10 others a WORKER is
evicted (a drain); in 5 more, which have a podFailurePolicy rule FailJob on
exit code 42, a WORKER exits 42 and is deleted. Each pod stays Terminating
on the operator's tracking finalizer. Back, the operator must count each
failure once, charge nothing for an eviction, fail the 5 jobs by their rule,
and let every such pod go.

Must be zero: wrong outcomes (the 5 not Failed by their rule, the rest not
Succeeded), failures not counted (a job of the first 10 whose restartCount
is not 1), restarts charged for a disruption (an evicted one's not 0),
overlaps of one slot's pods, orphans.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench.chaos.jobs import tfjob
from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.common.devtools import EXIT_CODE_ANNOTATION

AWAY = 30.0  # seconds without an operator
RULE = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}


def operator_away(suite: Suite) -> Row:
    row = Row("operator stopped 30 s while pods fail, are evicted and deleted, 40 jobs")
    ns = suite.namespace("chaos-away")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    failed, evicted = [f"f{i}" for i in range(10)], [f"e{i}" for i in range(10)]
    fatal = [f"x{i}" for i in range(5)]
    calm = [f"c{i}" for i in range(15)]
    jobs = [tfjob(n, workers=2, run="90s") for n in failed + evicted + calm]
    jobs += [
        tfjob(n, workers=2, run="90s", runPolicy={"podFailurePolicy": {"rules": [RULE]}})
        for n in fatal
    ]
    suite.submit(ns, jobs)
    names = failed + evicted + calm + fatal
    suite.wait("the jobs to run", lambda: suite.settled(ns, dict.fromkeys(names, "Running")), 180)
    away = ops.procs[0]
    ops.terminate(away)
    began = time.monotonic()
    for name in failed:
        end_and_delete(suite, ns, f"{name}-worker-0", 137)
    for name in fatal:
        end_and_delete(suite, ns, f"{name}-worker-0", 42)
    for name in evicted:
        evict(suite, ns, f"{name}-worker-0")
    time.sleep(max(0.0, AWAY - (time.monotonic() - began)))
    ops.replace(away)
    away_for = time.monotonic() - began
    expected = dict.fromkeys(failed + evicted + calm, "Succeeded") | dict.fromkeys(fatal, "Failed")
    suite.judge(row, ns, expected, timeout=240)
    statuses = {name: job.get("status") or {} for name, job in suite.jobs(ns).items()}
    uncounted = [n for n in failed if statuses[n].get("restartCount") != 1]
    charged = [n for n in evicted + calm if statuses[n].get("restartCount")]
    by_rule = [n for n in fatal if statuses[n].get("reason") != "PodFailurePolicy"]
    row.wrong += len(uncounted) + len(charged) + len(by_rule)
    row.duplicates = overlaps(suite.ledger, ns)
    row.notes.append(
        f"operator away {away_for:.0f}s; failures not counted {len(uncounted)},"
        f" restarts charged for an eviction {len(charged)}, FailJob not applied {len(by_rule)}"
    )
    row.restarts = ops.restarts
    ops.stop()
    return row


def end_and_delete(suite: Suite, ns: str, pod: str, code: int) -> None:
    """The pod's container ends with `code` (kwok), then the pod is deleted."""
    suite.cluster.kubectl("annotate", "pod", pod, "-n", ns, f"{EXIT_CODE_ANNOTATION}={code}")
    suite.wait(f"{pod} to fail", lambda: _phase(suite, ns, pod) == "Failed", 30)
    suite.cluster.kubectl("delete", "pod", pod, "-n", ns, "--wait=false")


def evict(suite: Suite, ns: str, pod: str) -> None:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns},
    }
    path = f"/api/v1/namespaces/{ns}/pods/{pod}/eviction"
    suite.cluster.kubectl("create", "--raw", path, "-f", "-", input=json.dumps(body))


def _phase(suite: Suite, ns: str, pod: str) -> str:
    found = suite.cluster.kubectl("get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.phase}")
    return str(found.stdout).strip()
