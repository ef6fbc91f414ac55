"""Starting and stopping a controller's threads, in an order a race cannot undo.

The informers start first; the workers only once every cache holds a full
list (a worker on a half-filled child index would take a restarted
operator's pods for lost ones). stop() may come at any moment of start(),
from another thread: a leader that loses its lease, or is told to stop,
while its caches sync must not start workers after the shutdown passed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from dlk8s.runtime.clock import seconds_left
from dlk8s.runtime.informer import Informer

log = logging.getLogger(__name__)


class Lifecycle:
    """The informers and the worker threads of one controller."""

    def __init__(
        self,
        informers: Sequence[Informer],
        workers: int,
        work: Callable[[], None],
        release: Callable[[], None],
    ) -> None:
        self.informers = informers  # what fills the caches (children first); started first
        self.workers = workers  # how many threads run `work`
        self._work = work  # a worker's loop; it returns once `release` has run
        self._release = release  # ends the workers' loops (the work queue's shut_down)
        self._threads: list[threading.Thread] = []  # the workers: joined by stop(), checked
        # Set once the first lists are in every cache; until then child
        # events queue nothing, as each job's own event queues it once.
        self.listed = threading.Event()
        if not informers:
            self.listed.set()
        self.started = threading.Event()  # the workers run: the controller is ready
        self.stopping = threading.Event()  # stop() was called: nothing more starts
        # Orders start() against stop(): whichever comes second sees the other.
        self._lock = threading.Lock()

    def start(self) -> bool:
        """Start the watches, wait until every cache holds a full list, then
        the workers; whether they started (not once stop() was called)."""
        with self._lock:
            if self.stopping.is_set():
                return False
            for informer in self.informers:
                informer.start()
        for informer in self.informers:
            while not informer.wait_synced(timeout=1):
                if self.stopping.is_set():
                    return False
                log.info("waiting for caches to sync", extra={"target": informer.name})
        with self._lock:
            if self.stopping.is_set():
                return False
            self.listed.set()
            for i in range(self.workers):
                thread = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
                thread.start()
                self._threads.append(thread)
            self.started.set()
        return True

    def stop(self, timeout: float) -> None:
        """End the workers, then the watches, all within `timeout` seconds."""
        with self._lock:
            self.stopping.set()
            threads = list(self._threads)
        self._release()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(seconds_left(deadline))
        for informer in self.informers:
            informer.stop(seconds_left(deadline))

    def dead_informers(self) -> list[str]:
        """An informer thread that died while nobody stopped it."""
        return [f"the informer of {i.name} has stopped" for i in self.informers if not i.alive]

    def exited_workers(self) -> list[str]:
        """A worker thread that returned while nobody stopped the controller."""
        if self.stopping.is_set():
            return []
        return [f"{t.name} has exited" for t in self._threads if not t.is_alive()]
