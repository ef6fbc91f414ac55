"""Scenario 3, sigstop-compact: the operator stopped (SIGSTOP) while jobs
change (some finish, some are deleted, new ones come), etcd compacted so
that its watches come back with 410, then resumed."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.chaos.jobs import mixed
from bench.chaos.operators import Operators, Outage, lines_since, log_size
from bench.chaos.suite import Row, Suite
from bench.common.devtools import EXIT_CODE_ANNOTATION


def sigstop_compact(suite: Suite) -> Row:
    row = Row("operator SIGSTOPped while jobs change, etcd compacted, resumed")
    ns = suite.namespace("chaos-stop")
    ops = Operators(suite.install).start()
    op = ops.procs[0]
    op.wait_ready()
    first = first_jobs_running(suite, ns, "s")
    offset = log_size(op)
    outage = Outage()
    with outage.window(op):
        op.popen.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        expected = change_while_stopped(suite, ns, first)
        revision = suite.cluster.compact_etcd()
        # The stopped process's watches would otherwise wait in their sockets
        # for it; a restarted API server drops them, and its new watch cache
        # starts past what the operator saw: its watches come back with 410.
        suite.cluster.restart_apiserver(down=1)
        op.popen.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    suite.judge(row, ns, expected, timeout=180)
    relists = sum("listing again" in line for line in lines_since(op, offset))
    row.api_rps, row.log_lps = outage.rates()
    row.restarts = ops.restarts
    row.notes.append(
        f"stopped {outage.seconds:.0f}s; etcd compacted at {revision};"
        f" {relists} watches relisted after 410"
    )
    ops.stop()
    return row


def first_jobs_running(suite: Suite, ns: str, prefix: str) -> list[dict[str, Any]]:
    """Twenty jobs that run on (change_while_stopped ends or deletes some),
    submitted and Running."""
    first = [mixed(f"{prefix}{i}", i, workers=1, run=None) for i in range(20)]
    suite.submit(ns, first)
    names = [job["metadata"]["name"] for job in first]
    suite.wait(
        "the first jobs to run", lambda: suite.settled(ns, dict.fromkeys(names, "Running")), 120
    )
    return first


def change_while_stopped(suite: Suite, ns: str, first: list[dict[str, Any]]) -> dict[str, str]:
    """Finish ten of the first jobs (through their MASTER), delete five,
    submit ten; churn so that the stopped operator's resourceVersions fall
    out of the API server's watch window."""
    names = [job["metadata"]["name"] for job in first]
    expected = dict.fromkeys(names, "Running")
    for name in names[:10]:
        suite.cluster.kubectl(
            "annotate", "pod", f"{name}-master-0", "-n", ns, f"{EXIT_CODE_ANNOTATION}=0"
        )
        expected[name] = "Succeeded"
    for job in first[15:]:
        name, kind = job["metadata"]["name"], job["kind"].lower()
        suite.cluster.kubectl("delete", f"{kind}s.dlk8s.io", name, "-n", ns, "--wait=false")
        expected[name] = "Deleted"
    suite.submit(ns, [mixed(f"n{i}", i, workers=1, run=None) for i in range(10)])
    expected |= {f"n{i}": "Running" for i in range(10)}
    churn = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"churn-{i}", "namespace": ns},
        }
        for i in range(300)
    ]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(suite.kube.create, churn))
        list(
            pool.map(
                lambda c: suite.kube.delete("v1", "ConfigMap", ns, c["metadata"]["name"]), churn
            )
        )
    return expected
