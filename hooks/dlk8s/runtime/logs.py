"""Structured (JSON lines) logging that carries the job key and runtime id.

Every line of one pass of the work queue also carries that pass's
``reconcileId`` (as controller-runtime's reconcileID), those of the API
calls the pass runs on the executor's pool included: the lines of one pass
read together however many workers interleave theirs.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# Fields a caller may pass through `extra=` and that end up as JSON keys.
# "cluster", "changes" and "elasticJobs" carry the autoscaler's pass summary.
CONTEXT_FIELDS = (
    *("job", "kind", "runtimeId", "action", "target", "error", "duration"),
    *("cluster", "changes", "elasticJobs"),
)

# The pass a line is logged in; None outside every pass. A context variable:
# each worker thread has its own, and the executor copies it into the
# threads of its pool with each call it submits (runtime.executor).
RECONCILE_ID: ContextVar[str | None] = ContextVar("reconcile_id", default=None)


@contextmanager
def reconcile_id() -> Iterator[str]:
    """A new id for the lines logged in this context until the block ends."""
    new = secrets.token_hex(4)  # 8 hex digits: unique enough among the passes of a log
    token = RECONCILE_ID.set(new)
    try:
        yield new
    finally:
        RECONCILE_ID.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object a line. Formats in the thread that logs (the handler
    is a StreamHandler), so the reconcile id is that thread's."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        reconcile = RECONCILE_ID.get()
        if reconcile is not None:
            entry["reconcileId"] = reconcile
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The Kubernetes client library and urllib3 are chatty at info (so is the
    # library's leader election, which runtime.leader replaces).
    for noisy in ("kubernetes", "leaderelection", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
