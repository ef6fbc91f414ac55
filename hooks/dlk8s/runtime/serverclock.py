"""The API server's clock, as this process estimates it.

Reconcile compares the times the API server writes (a pod's
deletionTimestamp, its creation) with `now`: whether a pod is stuck
Terminating, how long a pending pod has waited for the autoscaler's
reserve. With the operator's clock minutes off the API server's, such a
comparison is off by as much: a pod shutting down within its grace period
would be taken for stuck and replaced beside itself. Kubernetes assumes
synchronized clocks; an operator can check its own: every answer of the
API server carries its `Date` (whole seconds), and the offset between that
and the middle of the request's round trip on our clock is the skew,
within half a second and half the round trip.

An offset under MIN_OFFSET is taken for none: that is the estimate's own
error, and synchronized clocks are what nearly every cluster has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

MIN_OFFSET: Final = 2.0  # seconds
# A sample whose round trip took longer says too little of when the server
# wrote its Date.
MAX_ROUND_TRIP: Final = 1.0
EVERY: Final = 10.0  # seconds between samples: a clock does not drift faster


class ServerClock:
    def __init__(self, local: Callable[[], float] = time.time) -> None:
        self._local = local  # our wall clock, the one that may be off
        self._offset = 0.0  # what to add to it; 0 below MIN_OFFSET
        self._next = 0.0  # (time.monotonic) when the next sample is due
        self._lock = threading.Lock()

    def wants_sample(self) -> bool:
        return time.monotonic() >= self._next

    def local(self) -> float:
        return self._local()

    def observe(self, date: str | None, sent: float, received: float) -> None:
        """One answer's Date header, with our clock's `local()` before the
        request and after the answer."""
        if not date or received - sent > MAX_ROUND_TRIP:
            return
        try:
            server = parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            return
        # The Date is the whole second the answer was written in.
        offset = server + 0.5 - (sent + received) / 2
        with self._lock:
            self._offset = offset if abs(offset) >= MIN_OFFSET else 0.0
            self._next = time.monotonic() + EVERY

    @property
    def offset(self) -> float:
        return self._offset

    def timestamp(self) -> float:
        """Now on the API server's clock, in seconds since the epoch."""
        return self._local() + self._offset

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp(), UTC)
