"""Structured (JSON lines) logging that carries the job key and runtime id."""

from __future__ import annotations

import json
import logging
import sys
import time

# Fields a caller may pass through `extra=` and that end up as JSON keys.
# "cluster", "changes" and "elasticJobs" carry the autoscaler's pass summary.
CONTEXT_FIELDS = (
    *("job", "kind", "runtimeId", "action", "target", "error", "duration"),
    *("cluster", "changes", "elasticJobs"),
)


class JsonFormatter(logging.Formatter):
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
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The client's informer and leader election are chatty at info.
    for noisy in ("kubernetes", "leaderelection", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
