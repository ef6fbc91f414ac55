"""Scenario 1, operator-kill: the operator SIGKILLed at random moments, ten
times, during a burst of 100 jobs, each time restarted after a random pause."""

from __future__ import annotations

import random
import threading
import time

from bench.chaos.jobs import mixed
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite


def operator_kill(suite: Suite) -> Row:
    row = Row("operator SIGKILL x10 during a burst of 100 jobs")
    jobs = 30 if suite.args.short else 100
    kills = 3 if suite.args.short else 10
    ns = suite.namespace("chaos-kill")
    ops = Operators(suite.install).start()
    submitter = threading.Thread(
        target=suite.submit,
        args=(ns, [mixed(f"j{i}", i, workers=1, run="20s", elastic=True) for i in range(jobs)]),
    )
    submitter.start()
    rng = random.Random(suite.args.seed)
    for _ in range(kills):
        time.sleep(rng.uniform(0.5, 4.0))
        victim = ops.procs[0]
        ops.kill(victim)
        time.sleep(rng.uniform(0.0, 3.0))
        ops.replace(victim)
    submitter.join()
    expected = {f"j{i}": "Succeeded" for i in range(jobs)}
    suite.judge(row, ns, expected, timeout=300)
    row.restarts = ops.restarts
    row.notes.append(f"{kills} kills, pauses 0-3 s")
    ops.stop()
    return row
