"""Scenario 2, apiserver-restart: kube-apiserver killed and restarted three
times while jobs start and finish."""

from __future__ import annotations

import time

from bench.chaos.jobs import mixed
from bench.chaos.operators import Operators, Outage
from bench.chaos.suite import Row, Suite


def apiserver_restart(suite: Suite) -> Row:
    row = Row("kube-apiserver killed and restarted x3 while jobs start and finish")
    ns = suite.namespace("chaos-apiserver")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    wave = 10 if suite.args.short else 20
    names: list[str] = []
    outage = Outage()
    for round_ in range(4):
        batch = [mixed(f"r{round_}-{i}", i, workers=1, run="10s") for i in range(wave)]
        suite.submit(ns, batch)
        names += [j["metadata"]["name"] for j in batch]
        if round_ == 3:
            break
        time.sleep(6)  # jobs starting, earlier ones finishing
        with outage.window(ops.procs[0]):
            suite.cluster.restart_apiserver(down=3)
    suite.judge(row, ns, {n: "Succeeded" for n in names}, timeout=300)
    row.api_rps, row.log_lps = outage.rates()
    row.restarts = ops.restarts
    row.notes.append(f"down {outage.seconds / 3:.1f}s each (kill to /readyz)")
    ops.stop()
    return row
