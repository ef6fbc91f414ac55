"""The chaos suite's log lines, on stderr."""

from __future__ import annotations

import sys
import time


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
