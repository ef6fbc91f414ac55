"""Scenario 15, start-failure: jobs whose containers can never start (the
runtime's StartError, exit code 128: the image has no such executable),
beside jobs that run (issue 49).

Each pod is recreated after its failure until the backoffLimit is spent;
then the job fails as BackoffLimitExceeded with the runtime's words in its
status. The jobs set a backoffLimit of 2: the default, 6, would spend
10.5 minutes in back-off (10 s, doubling per restart); that default is
tests/unit/job/test_start_failures.py's. Must be zero: a broken job not Failed
so (wrong), one whose status does not name the StartError (wrong), a
healthy job not Succeeded, lost jobs, duplicates (two pods of one slot at
once).
"""

from __future__ import annotations

from typing import Any

from bench.chaos.jobs import mixed, with_template
from bench.chaos.ledger import overlaps
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.common.devtools import (
    END_MESSAGE_ANNOTATION,
    END_REASON_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    RUN_DURATION_ANNOTATION,
)

NOT_FOUND = 'exec: "python": executable file not found in $PATH: unknown'
BACKOFF_LIMIT = 2


def start_failure(suite: Suite) -> Row:
    row = Row(f"jobs whose containers can never start (StartError), backoffLimit {BACKOFF_LIMIT}")
    broken_count = 3 if suite.args.short else 10
    ns = suite.namespace("chaos-start")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    broken = [f"b{i}" for i in range(broken_count)]
    healthy = [f"h{i}" for i in range(broken_count)]
    suite.submit(
        ns,
        [cannot_start(mixed(n, i, workers=1, run="5s")) for i, n in enumerate(broken)]
        + [mixed(n, i, workers=1, run="20s") for i, n in enumerate(healthy)],
    )
    expected = dict.fromkeys(broken, "Failed") | dict.fromkeys(healthy, "Succeeded")
    suite.judge(row, ns, expected, timeout=300)
    jobs = suite.jobs(ns)
    said = [why(jobs.get(name)) for name in broken]
    row.wrong += sum(1 for reason, message in said if reason != "BackoffLimitExceeded")
    row.wrong += sum(1 for _, message in said if "StartError" not in message)
    row.duplicates = overlaps(suite.ledger, ns)
    pods = [sum(1 for life in suite.ledger.of(ns) if life.job == name) for name in broken]
    row.notes.append(
        f"pods per broken job: {min(pods)} to {max(pods)} (backoffLimit {BACKOFF_LIMIT});"
        f" e.g. {said[0][1][:160]!r}"
    )
    row.restarts = ops.restarts
    ops.stop()
    return row


def cannot_start(job: dict[str, Any]) -> dict[str, Any]:
    """Every container of the job ends at once, as one whose command the
    image does not have (the real node's StartError, tests/e2e/realnode)."""
    ends = {
        EXIT_CODE_ANNOTATION: "128",
        RUN_DURATION_ANNOTATION: "1s",
        END_REASON_ANNOTATION: "StartError",
        END_MESSAGE_ANNOTATION: NOT_FOUND,
    }
    job["spec"]["runPolicy"] = {"backoffLimit": BACKOFF_LIMIT}
    return with_template(job, annotations=ends)


def why(job: dict[str, Any] | None) -> tuple[str, str]:
    status = (job or {}).get("status") or {}
    failed = next((c for c in status.get("conditions") or [] if c.get("type") == "Failed"), {})
    return str(status.get("reason") or ""), str(failed.get("message") or "")
