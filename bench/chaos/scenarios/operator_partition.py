"""Scenario 12, operator-partition: the operator cut off from the API
server for a minute while its jobs change, its connections left open and
silent (a TCP proxy between them stops forwarding without closing, as a
partition looks to a client), then healed (issue 49).

Meanwhile ten jobs finish, five are deleted and ten new ones come (as in
scenario 3). The operator's requests time out and its watches hang; when
the partition heals, what was held is delivered and it must catch up on
everything. Must be zero: the usual; `took` says how long after the heal
the last job reached its state.
"""

from __future__ import annotations

import time
from urllib.parse import urlparse

from bench.chaos.operators import Operators, Outage
from bench.chaos.scenarios.sigstop_compact import change_while_stopped, first_jobs_running
from bench.chaos.suite import Row, Suite
from bench.common.devtools import TcpProxy

CUT = 60  # seconds the operator is cut off
BOUND = 180  # seconds after the heal by which every job must be in its state


def operator_partition(suite: Suite) -> Row:
    row = Row(f"the operator cut off from the API server for {CUT}s (connections hang), healed")
    ns = suite.namespace("chaos-partition")
    api = urlparse(suite.cluster.server)
    with TcpProxy((str(api.hostname), int(api.port or 443))) as proxy:
        ops = Operators(suite.install, server=f"https://127.0.0.1:{proxy.port}").start()
        op = ops.procs[0]
        op.wait_ready()
        first = first_jobs_running(suite, ns, "c")
        outage = Outage()
        with outage.window(op), proxy.partitioned():
            cut = time.monotonic()
            expected = change_while_stopped(suite, ns, first)
            time.sleep(max(0.0, CUT - (time.monotonic() - cut)))
        healed = time.monotonic()
        settled = suite.wait(
            "every job in its state after the heal", lambda: suite.settled(ns, expected), BOUND
        )
        took = time.monotonic() - healed
        suite.judge(row, ns, expected, timeout=60)
        row.api_rps, row.log_lps = outage.rates()
        row.restarts = ops.restarts
        row.notes.append(
            f"cut off {outage.seconds:.0f}s; every job in its state"
            + (f" {took:.0f}s after the heal" if settled else f" not within {BOUND}s of the heal")
        )
        ops.stop()
    return row
