"""A rate-limited work queue with the semantics of client-go's workqueue.

- A key waiting in the queue is there once, however often it is added.
- A key is never handed to two workers at once: added while being processed,
  it is queued again when its worker calls ``done``.
- A key added as urgent is served before the others, also when it was
  queued already: a job that Kueue admitted does not wait behind a burst
  of new jobs' first passes (the controller says which adds are urgent).
- ``add_after`` schedules a key; a key scheduled twice keeps the earlier
  time, and a key already queued is not scheduled again, so a burst of
  delayed adds costs one pass. A key handed to a worker loses its
  schedule: its pass sees every change that was scheduled for, and sets
  its own timers again (the controller's passes derive them from the job
  each time). Unlike client-go's, whose delayed adds still fire, so that a
  pod's count change batched just before its job's urgent pass ran a
  second pass that found nothing to do.
- ``add_rate_limited`` delays a key exponentially per consecutive failure,
  and all retries together by a token bucket (client-go's default controller
  rate limiter: the larger of the two waits), so that a failure every job
  meets at once (an API server down) cannot turn into a storm of retries;
  ``forget`` resets a key's count after a success.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

# The key type: the controller's JobKey; tests use strings.
K = TypeVar("K", bound=Hashable)


class ShutDownError(Exception):
    """The queue was shut down; workers should return."""


class TokenBucket:
    """Retries over all keys: `burst` at once, then `rate` a second."""

    def __init__(self, rate: float = 10.0, burst: float = 100.0) -> None:
        self._rate = rate
        self._burst = burst
        self._tokens = burst  # may go negative: waits already promised
        self._at = time.monotonic()

    def reserve(self) -> float:
        """Take a token; the seconds until it is there (not thread-safe)."""
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        self._tokens -= 1
        return max(0.0, -self._tokens / self._rate)


class QueueObserver(Protocol):
    """What the queue reports as it moves keys (the standard work queue
    figures); called under the queue's lock, so the depth is exact."""

    def added(self) -> None: ...
    def retried(self) -> None: ...
    def depth(self, ready: int) -> None: ...
    def started(self, waited: float) -> None: ...
    def finished(self, worked: float) -> None: ...


class _Unobserved:
    def added(self) -> None:
        pass

    def retried(self) -> None:
        pass

    def depth(self, ready: int) -> None:
        pass

    def started(self, waited: float) -> None:
        pass

    def finished(self, worked: float) -> None:
        pass


class WorkQueue(Generic[K]):
    def __init__(
        self,
        base_delay: float = 0.05,
        max_delay: float = 300.0,
        bucket: TokenBucket | None = None,
        observer: QueueObserver | None = None,
    ) -> None:
        self._observer = observer or _Unobserved()
        self._queued_at: dict[K, float] = {}  # when a ready key entered _queue
        self._started_at: dict[K, float] = {}  # when a worker took a key
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._bucket = bucket or TokenBucket()
        self._lock = threading.Lock()
        # Two conditions on the one lock: a key made ready wakes one worker,
        # and only a new earliest deadline wakes the timer. A single condition
        # notified to all woke every idle worker and the timer on each child
        # event, all but one to sleep again, and under a burst the informer
        # thread that adds the keys waited behind them for the lock.
        self._ready = threading.Condition(self._lock)
        self._timer_due = threading.Condition(self._lock)
        self._queue: deque[K] = deque()  # ready keys, in order
        self._urgent: deque[K] = deque()  # ready urgent keys, served first
        self._urgent_keys: set[K] = set()  # keys whose next pass is urgent
        # Entries of _queue whose key moved to _urgent since: skipped once each.
        self._stale: dict[K, int] = {}
        self._stale_total = 0
        self._dirty: set[K] = set()  # keys queued or to queue again once done
        self._processing: set[K] = set()  # keys a worker holds
        self._failures: dict[K, int] = {}  # consecutive failures, for the back-off
        self._waiting: list[tuple[float, int, K]] = []  # a heap of (ready time, seq, key)
        self._ready_at: dict[K, float] = {}  # a key's live entry in _waiting
        self._seq = itertools.count()
        self._shutting_down = False
        self._timer = threading.Thread(
            target=self._release_due, name="workqueue-delay", daemon=True
        )
        self._timer.start()

    # -- adding ------------------------------------------------------------

    def add(self, key: K, urgent: bool = False) -> None:
        with self._lock:
            self._add_locked(key, urgent)

    def _add_locked(self, key: K, urgent: bool = False) -> None:
        if self._shutting_down:
            return
        if key in self._dirty:
            if urgent and key not in self._urgent_keys:
                self._urgent_keys.add(key)
                if key not in self._processing:  # in _queue: served first now
                    self._stale[key] = self._stale.get(key, 0) + 1
                    self._stale_total += 1
                    self._urgent.append(key)
            return
        self._observer.added()
        self._dirty.add(key)
        if urgent:
            self._urgent_keys.add(key)
        if key not in self._processing:
            self._enqueue_locked(key)

    def _enqueue_locked(self, key: K) -> None:
        (self._urgent if key in self._urgent_keys else self._queue).append(key)
        self._queued_at[key] = time.monotonic()
        self._observer.depth(self._ready_count())
        self._ready.notify()

    def _ready_count(self) -> int:
        return len(self._urgent) + len(self._queue) - self._stale_total

    def _pop_ready(self) -> K | None:
        """The next key to hand out: urgent ones first; None if none is ready."""
        if self._urgent:
            key = self._urgent.popleft()
            self._urgent_keys.discard(key)
            return key
        while self._queue:
            key = self._queue.popleft()
            if key not in self._stale:
                return key
            self._stale_total -= 1
            self._stale[key] -= 1
            if not self._stale[key]:
                del self._stale[key]
        return None

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._lock:
            # Queued means a pass that has not started yet, which will see
            # whatever this add is about.
            if self._shutting_down or key in self._dirty:
                return
            ready = time.monotonic() + delay
            if self._ready_at.get(key, math.inf) <= ready:
                return
            self._ready_at[key] = ready
            entry = (ready, next(self._seq), key)
            heapq.heappush(self._waiting, entry)
            if self._waiting[0] is entry:  # the timer sleeps until a later time
                self._timer_due.notify()

    def add_rate_limited(self, key: K) -> None:
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            shared = self._bucket.reserve()
            self._observer.retried()
        self.add_after(key, max(shared, min(self._max_delay, self._base_delay * 2**failures)))

    def forget(self, key: K) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    # -- processing ----------------------------------------------------------

    def get(self, timeout: float | None = None) -> K:
        """Block until a key is ready; raise ShutDownError once the queue is shut down."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while (key := self._pop_ready()) is None:
                if self._shutting_down:
                    raise ShutDownError
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                self._ready.wait(remaining)
            self._processing.add(key)
            self._dirty.discard(key)
            self._ready_at.pop(key, None)  # its entry in _waiting is skipped
            now = time.monotonic()
            self._started_at[key] = now
            self._observer.depth(self._ready_count())
            self._observer.started(now - self._queued_at.pop(key, now))
            return key

    def done(self, key: K) -> None:
        with self._lock:
            self._processing.discard(key)
            started = self._started_at.pop(key, None)
            if started is not None:
                self._observer.finished(time.monotonic() - started)
            if key in self._dirty:
                self._enqueue_locked(key)

    def longest_running(self) -> float:
        """Seconds the longest-held key has been with its worker (0: none)."""
        with self._lock:
            oldest = min(self._started_at.values(), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def __len__(self) -> int:
        with self._lock:
            return self._ready_count()

    @property
    def waiting(self) -> int:
        """Keys scheduled for later (timers and retries)."""
        with self._lock:
            return len(self._ready_at)

    def shut_down(self) -> None:
        with self._lock:
            self._shutting_down = True
            self._ready.notify_all()
            self._timer_due.notify_all()

    def _release_due(self) -> None:
        with self._lock:
            while not self._shutting_down:
                now = time.monotonic()
                while self._waiting and self._waiting[0][0] <= now:
                    ready, _, key = heapq.heappop(self._waiting)
                    if self._ready_at.get(key) == ready:  # else superseded by an earlier time
                        del self._ready_at[key]
                        self._add_locked(key)
                timeout = self._waiting[0][0] - now if self._waiting else None
                self._timer_due.wait(timeout)
