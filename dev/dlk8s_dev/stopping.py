"""How `make cluster` and `make demo` stop: on SIGINT, SIGTERM or SIGHUP, however many come.

The work (start the cluster, run the demo, wait) runs in a thread of its
own; the main thread only waits for signals and for the work to end.

- No handler does anything. Python's own C-level handler writes each
  signal's number to a socket (``signal.set_wakeup_fd``), which the main
  thread reads in ordinary code. No lock is ever taken in a handler, so no
  number of signals, however close together, can deadlock the process (an
  ``Event.set()`` in a handler, entered again by a second signal while it
  held the Event's lock, once waited on itself forever).
- Signals within ``SAME_REQUEST`` of the last one counted are one request:
  a signal to a process group reaches us twice (directly, and again from
  `make`, which passes SIGTERM on), and a burst must not count as three.
- The first request gives the tools the work is waiting on (kubectl, helm,
  an image build: our children in our own process group) SIGTERM, as
  Ctrl-C in a terminal gives them, then sets ``Run.stopping``. The work
  then tears down what it made, in order.
- A second request while that goes on changes nothing: teardown goes on,
  and we say how long it may still take.
- A third, or a teardown not done ``GRACE`` seconds after the first
  request, kills every process of the run at once (SIGKILL) and waits
  until they have exited; its directories, links and cgroups are removed
  all the same.
- At the end, whatever of this run is still on the machine is removed
  (after an orderly teardown: nothing), and the last line says what was
  removed. All of it within 60 s of the first signal.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from . import leftovers

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Signals this close to the last one counted are the same request.
SAME_REQUEST = 1.0
# From the first request to the forced kills; then the work gets FORCED_WAIT
# more to finish, and the sweep a few seconds: within 60 s in all.
GRACE = 40.0
FORCED_WAIT = 10.0
# What the work thread writes to the wakeup socket when it ends (no signal is 0).
WORK_DONE = 0


class StoppedError(Exception):
    """The work gave up what it was doing because a signal asked it to stop."""


class _Cluster(Protocol):
    removed: list[str]

    def stop(self) -> object: ...


@dataclass
class Run:
    """What the main thread and the work share."""

    # Set by the main thread at the first request; the work waits on it and
    # gives up its start at its next wait (LocalCluster.interrupt).
    stopping: threading.Event = field(default_factory=threading.Event)
    # Set by the work as its teardown begins: its tools are then not killed.
    tearing_down: bool = False
    # Held by the main thread while it kills the work's tools, and by the
    # work as it begins its teardown, so no teardown tool is ever among them
    # (not even one forked a moment before its own session). Never taken
    # in a signal handler.
    lock: threading.Lock = field(default_factory=threading.Lock)
    # What the work's teardown removed, for the last line.
    removed: list[str] = field(default_factory=list)
    # The signal of the first request (0 while none came).
    first_signal: int = 0

    def wait(self, timeout: float | None = None) -> bool:
        """Until a signal asks us to stop (True) or ``timeout`` passes (False)."""
        return self.stopping.wait(timeout)

    def pause(self, seconds: float, doing: str) -> None:
        """Sleep ``seconds``, or raise StoppedError at once if a signal asks us to stop."""
        if self.stopping.wait(seconds):
            raise StoppedError(f"asked to stop while {doing}")

    @contextlib.contextmanager
    def keeping(self, cluster: _Cluster) -> Iterator[None]:
        """Stop ``cluster`` as the block ends, however it ends; its removals go to the last line."""
        try:
            yield
        finally:
            with self.lock:
                self.tearing_down = True
            try:
                cluster.stop()
            finally:
                self.removed += cluster.removed
                self.tearing_down = False


def _nothing(signum: int, frame: object) -> None:
    """The wakeup socket carries the signal; a handler must only exist (see above)."""


class _Waker:
    """Where the main thread hears of signals and of the work's end."""

    def __enter__(self) -> _Waker:
        # Python's C handler writes each signal's number to the outbox (so
        # does the work thread its WORK_DONE); the main thread reads the inbox.
        self.inbox, self.outbox = socket.socketpair()
        self.inbox.setblocking(False)
        self.outbox.setblocking(False)
        signal.set_wakeup_fd(self.outbox.fileno(), warn_on_full_buffer=False)
        for signum in SIGNALS:
            signal.signal(signum, _nothing)
        return self

    def wait(self, timeout: float) -> list[int]:
        """Signal numbers (and WORK_DONE) that came, waiting up to ``timeout``."""
        ready, _, _ = select.select([self.inbox], [], [], max(0.0, timeout))
        if not ready:
            return []
        try:
            return list(self.inbox.recv(4096))
        except BlockingIOError:
            return []

    def poke(self) -> None:
        with contextlib.suppress(OSError):
            self.outbox.send(bytes([WORK_DONE]))

    def __exit__(self, *exc: object) -> None:
        # The process ends right after: a late duplicate signal must not cut
        # its last line short or change its exit status, so they are ignored.
        for signum in SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        signal.set_wakeup_fd(-1)
        self.inbox.close()
        self.outbox.close()


def own_children() -> list[int]:
    """Our child processes, whichever of our threads started them."""
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


def _term_own_tools() -> None:
    """SIGTERM to our children in our own process group: the tools the work waits on.

    The cluster's own processes have sessions of their own and are left to
    the work's teardown.
    """
    for pid in own_children():
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == os.getpgrp():
                os.kill(pid, signal.SIGTERM)


def _kill_everything() -> None:
    leftovers.kill_own_run()
    leftovers.kill(own_children())


@dataclass
class _Outcome:
    """How the work ended: its exit code, or what it raised."""

    code: int | None = None  # what the work returned
    error: BaseException | None = None  # or what it raised
    trace: list[str] = field(default_factory=list)  # and where, to show when no signal explains it
    # Set once the work is over (the main thread reads the rest only then).
    done: threading.Event = field(default_factory=threading.Event)


def _do_work(work: Callable[[Run], int], run: Run, outcome: _Outcome, waker: _Waker) -> None:
    try:
        outcome.code = work(run)
    except BaseException as err:  # reported by the main thread
        outcome.error = err
        outcome.trace = traceback.format_exception(err)
    finally:
        outcome.done.set()
        waker.poke()


def _name(signum: int) -> str:
    return signal.Signals(signum).name


class _Requests:
    """The main thread's count of stop requests, and what each one does."""

    def __init__(self, run: Run, say: Callable[[str], None]) -> None:
        self.run = run  # what the requests are told to
        self.say = say  # how each request is answered, to the user
        self.count = 0  # requests so far (signals close together count once)
        self.last = float("-inf")  # when the last counted signal came
        self.first_at: float | None = None  # the first request: the deadlines count from it
        self.forced_at: float | None = None  # when we killed what was left, if we did

    def hear(self, signum: int, now: float) -> None:
        if now - self.last < SAME_REQUEST:
            return
        self.last = now
        self.count += 1
        name = _name(signum)
        if self.count == 1:
            self.first_at = now
            self.run.first_signal = signum
            self.say(
                f"got {name}: stopping, and removing everything this run started "
                f"(at most {GRACE + FORCED_WAIT:.0f} s); a second signal shows the time left, "
                "a third kills what is left at once"
            )
            with self.run.lock:
                # Before the work hears of it: its teardown has not begun.
                if not self.run.tearing_down:
                    _term_own_tools()
            self.run.stopping.set()
        elif self.forced_at is not None:
            self.say(f"got {name}: already killing what is left")
        elif self.count == 2:
            assert self.first_at is not None
            left = self.first_at + GRACE - now
            self.say(
                f"got {name} again: already stopping; {left:.0f} s left before whatever remains "
                "is killed; one more signal kills it now (its directories are removed all the same)"
            )
        else:
            self.say(f"got {name} a third time: killing what is left now, then removing its files")
            self.force(now)

    def tick(self, now: float) -> None:
        """Force the stop once the teardown has had its time."""
        if self.first_at is not None and self.forced_at is None and now > self.first_at + GRACE:
            self.say(f"teardown not done after {GRACE:.0f} s: killing what is left now")
            self.force(now)

    def force(self, now: float) -> None:
        self.forced_at = now
        _kill_everything()

    def timeout(self, now: float) -> float:
        """How long the main thread may wait for the next signal."""
        if self.forced_at is not None:
            return self.forced_at + FORCED_WAIT - now
        if self.first_at is not None:
            return self.first_at + GRACE - now
        return 3600.0


def run_until_signal(
    work: Callable[[Run], int], say: Callable[[str], None], first_line: str
) -> int:
    """Run ``work`` in a thread until it ends, stopping it on signals (see above).

    ``first_line`` is said once the signals are ours; the last line says
    what was removed. Returns the exit code: the work's, or 128 plus the
    signal's number when a signal cut it short. On return SIGINT, SIGTERM
    and SIGHUP are ignored: the process is meant to end now.
    """
    run = Run()
    outcome = _Outcome()
    began = time.monotonic()
    with _Waker() as waker:
        say(first_line)
        requests = _Requests(run, say)
        worker = threading.Thread(
            target=_do_work, args=(work, run, outcome, waker), name="work", daemon=True
        )
        worker.start()
        while not outcome.done.is_set():
            if requests.forced_at is not None and requests.timeout(time.monotonic()) <= 0:
                break
            for signum in waker.wait(requests.timeout(time.monotonic())):
                if signum != WORK_DONE:
                    requests.hear(signum, time.monotonic())
            requests.tick(time.monotonic())
        code = _finish(run, outcome, requests, say, began)
    if not outcome.done.is_set():
        # The work is stuck past every deadline (say, on a lock another
        # process holds); its pool threads would keep the interpreter up.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _finish(
    run: Run, outcome: _Outcome, requests: _Requests, say: Callable[[str], None], began: float
) -> int:
    """Sweep what is left of the run, say what was removed, and choose the exit code."""
    done = outcome.done.is_set()
    removed = (list(run.removed) if done else []) + leftovers.sweep_own_run()
    stopped = run.stopping.is_set()
    if done and outcome.error is not None:
        if stopped:
            lines = str(outcome.error).strip().splitlines() or [type(outcome.error).__name__]
            say(f"cut short: {lines[0][:300]}")
        else:
            print("".join(outcome.trace), file=sys.stderr, flush=True)
    if done and outcome.error is None and outcome.code is not None:
        code = outcome.code
    else:
        code = 128 + run.first_signal if stopped else 1
    now = time.monotonic()
    if requests.first_at is not None:
        ending = f"stopped {now - requests.first_at:.1f} s after {_name(run.first_signal)}"
    else:
        ending = f"ended after {now - began:.0f} s"
    what = "; ".join(removed) if removed else "nothing (nothing of this run was left)"
    say(f"{ending}; removed: {what}")
    return code


def interrupt_on_termination() -> None:
    """For programs whose main thread holds a cluster in a `with` block or a
    fixture (the test session, the benchmarks): SIGTERM and SIGHUP interrupt
    it as Ctrl-C does, with KeyboardInterrupt, so that the block's teardown
    runs and stops the cluster. Only the first one does: a burst (a process
    group signalled twice, by the sender and by `make`) must not interrupt
    the teardown it started. Appending to a list takes no lock."""
    fired: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        if not fired:
            fired.append(signum)
            raise KeyboardInterrupt(f"stopped by {_name(signum)}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
