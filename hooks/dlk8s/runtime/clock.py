"""Deadlines on the monotonic clock: one shutdown shares one deadline among
its steps, each waiting only what is left of it."""

from __future__ import annotations

import time


def seconds_left(deadline: float) -> float:
    """Until `deadline` (a time.monotonic() value), never below zero."""
    return max(0.0, deadline - time.monotonic())
