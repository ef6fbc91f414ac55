"""The work queue keeps client-go's promises: dedup, one worker per key, backoff."""

from __future__ import annotations

import threading
import time

import pytest

from dlk8s.runtime.workqueue import ShutDownError, TokenBucket, WorkQueue


def test_adding_a_waiting_key_twice_queues_it_once() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert len(queue) == 2
    assert [queue.get(timeout=1), queue.get(timeout=1)] == ["a", "b"]
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.05)


def test_key_added_while_processing_waits_for_done() -> None:
    queue = WorkQueue()
    queue.add("job")
    key = queue.get(timeout=1)
    queue.add("job")  # an event arrives while a worker holds the key
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.05)  # a second worker must not get it now
    queue.done(key)
    assert queue.get(timeout=1) == "job"


def test_never_two_workers_on_one_key() -> None:
    queue = WorkQueue()
    active: set[str] = set()
    overlaps = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                key = queue.get(timeout=0.5)
            except (ShutDownError, TimeoutError):
                return
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.001)
            with lock:
                active.discard(key)
            queue.done(key)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for i in range(2000):
        queue.add(f"k{i % 5}")
    for t in threads:
        t.join()
    assert overlaps == []


def test_rate_limited_retries_back_off_exponentially_until_forgotten() -> None:
    queue = WorkQueue(base_delay=0.05, max_delay=1)
    delays = []
    for _ in range(3):
        began = time.monotonic()
        queue.add_rate_limited("flaky")
        key = queue.get(timeout=2)
        delays.append(time.monotonic() - began)
        queue.done(key)
    assert queue.failures("flaky") == 3
    assert delays[0] >= 0.045
    assert delays[1] >= 0.095
    assert delays[2] >= 0.195
    queue.forget("flaky")
    assert queue.failures("flaky") == 0


def test_add_after_releases_at_the_right_time() -> None:
    queue = WorkQueue()
    began = time.monotonic()
    queue.add_after("later", 0.2)
    queue.add_after("sooner", 0.05)
    assert queue.get(timeout=1) == "sooner"
    assert queue.get(timeout=1) == "later"
    assert time.monotonic() - began >= 0.195


def test_shut_down_releases_blocked_workers() -> None:
    queue = WorkQueue()
    outcome = []

    def worker() -> None:
        try:
            queue.get()
        except ShutDownError:
            outcome.append("shut down")

    thread = threading.Thread(target=worker)
    thread.start()
    time.sleep(0.05)
    queue.shut_down()
    thread.join(timeout=1)
    assert outcome == ["shut down"]


def test_a_burst_of_delayed_adds_is_one_pass_at_the_earliest_time() -> None:
    queue = WorkQueue()
    began = time.monotonic()
    queue.add_after("job", 0.3)
    for _ in range(50):  # the events of one job's pods, within the window
        queue.add_after("job", 0.5)
    queue.add_after("job", 0.1)  # an earlier time wins
    queue.add_after("marker", 0.2)  # due after the earliest, before the others
    assert queue.waiting == 2
    assert queue.get(timeout=1) == "job"
    assert time.monotonic() - began >= 0.095  # never before its time
    assert queue.get(timeout=1) == "marker"
    queue.done("marker")
    queue.done("job")
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.5)  # the later entries were superseded


def test_a_key_handed_to_a_worker_loses_its_schedule() -> None:
    """Its pass sees what the later time was for (a batched count change):
    no second pass follows it, though other keys keep their times."""
    queue = WorkQueue()
    queue.add_after("job", 0.2)
    queue.add_after("other", 0.2)
    queue.add("job")  # an urgent change of the same job
    assert queue.get(timeout=1) == "job"
    assert queue.waiting == 1
    queue.done("job")
    assert queue.get(timeout=1) == "other"
    queue.done("other")
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.4)
    queue.add_after("job", 0.05)  # scheduled again: it runs again
    assert queue.get(timeout=1) == "job"


def test_delayed_add_of_a_queued_key_is_dropped() -> None:
    queue = WorkQueue()
    queue.add("job")
    queue.add_after("job", 0.05)  # the queued pass will see what this add is about
    assert queue.waiting == 0
    queue.done(queue.get(timeout=1))
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.2)


def test_retries_of_all_keys_together_are_rate_limited() -> None:
    """A failure every job meets at once (an API server down) must not turn
    into a retry storm: past a burst, retries go out at the bucket's rate."""
    queue = WorkQueue(base_delay=0.001, bucket=TokenBucket(rate=20, burst=2))
    began = time.monotonic()
    for i in range(6):
        queue.add_rate_limited(f"job-{i}")
    got = [queue.get(timeout=2) for _ in range(6)]
    took = time.monotonic() - began
    assert sorted(got) == [f"job-{i}" for i in range(6)]
    # Two at once, then four at 20 a second: the last one after 0.2 s.
    assert took >= 0.18, took
    queue.shut_down()


def test_the_bucket_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=100, burst=1)
    assert bucket.reserve() == 0
    assert 0.005 < bucket.reserve() <= 0.01
    time.sleep(0.03)
    assert bucket.reserve() == 0


class Recorder:
    """A QueueObserver that keeps what it was told."""

    def __init__(self) -> None:
        self.adds = self.retries = 0
        self.depths: list[int] = []
        self.waits: list[float] = []
        self.works: list[float] = []

    def added(self) -> None:
        self.adds += 1

    def retried(self) -> None:
        self.retries += 1

    def depth(self, ready: int) -> None:
        self.depths.append(ready)

    def started(self, waited: float) -> None:
        self.waits.append(waited)

    def finished(self, worked: float) -> None:
        self.works.append(worked)


def test_the_observer_sees_the_exact_depth_and_each_pass() -> None:
    seen = Recorder()
    q: WorkQueue[str] = WorkQueue(observer=seen)
    try:
        q.add("a")
        q.add("b")
        q.add("a")  # already queued: no add, no depth change
        assert (seen.adds, seen.depths) == (2, [1, 2])
        key = q.get(timeout=1)
        assert seen.depths[-1] == 1 == len(q)
        q.add(key)  # while processing: queued again only when done
        assert seen.depths[-1] == 1
        assert q.longest_running() > 0
        q.done(key)
        assert seen.depths[-1] == 2 == len(q)
        assert len(seen.works) == 1
        assert q.longest_running() == 0
        q.add_rate_limited("c")
        assert seen.retries == 1
        assert len(seen.waits) == 1
    finally:
        q.shut_down()


def test_an_urgent_key_is_served_before_the_others_even_if_queued_already() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c", "d"):
        queue.add(key)
    queue.add("new", urgent=True)
    queue.add("c", urgent=True)  # queued already: moves ahead, and is served once
    served = []
    while len(queue):
        key = queue.get(timeout=1)
        served.append(key)
        queue.done(key)
    assert served == ["new", "c", "a", "b", "d"]
    assert len(queue) == 0


def test_a_key_made_urgent_while_processed_comes_back_first() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("busy")
    assert queue.get(timeout=1) == "busy"
    queue.add("waiting")
    queue.add("busy", urgent=True)
    queue.done("busy")
    assert [queue.get(timeout=1), queue.get(timeout=1)] == ["busy", "waiting"]
    queue.add("waiting")  # still processing: not queued twice
    queue.done("waiting")
    queue.done("busy")
    assert queue.get(timeout=1) == "waiting"
    queue.done("waiting")
    assert len(queue) == 0
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.05)
