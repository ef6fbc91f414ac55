"""Leader election over a fake of our own client wrapper's Lease calls.

The protocol itself (takeover, release on SIGTERM) is tested against a real
kube-apiserver in tests/e2e/kinds/test_leader.py; here, what a clock decides."""

from __future__ import annotations

import copy
import itertools
import threading
from typing import Any

from dlk8s.runtime.errors import AlreadyExistsError, ConflictError, NotFoundError
from dlk8s.runtime.leader import Election, Lease

LEASE = Lease("dlk8s-leader", "dlk8s-system", duration=15)


class LeaseStore:
    """One Lease with resourceVersion preconditions, as the API server keeps it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self._versions = itertools.count(1)
        self._lock = threading.Lock()

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            if self.lease is None:
                raise NotFoundError(404, "Not Found", {})
            return copy.deepcopy(self.lease)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self.lease is not None:
                raise AlreadyExistsError(409, "Conflict", {"reason": "AlreadyExists"})
            return self._store(obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            assert self.lease is not None
            if obj["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise ConflictError(409, "Conflict", {})
            return self._store(obj)

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        self.lease = stored
        return copy.deepcopy(stored)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def candidate(store: LeaseStore, clock: Clock) -> Election:
    return Election(store, LEASE, lambda: None, threading.Event(), clock=clock)


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    store, clock = LeaseStore(), Clock()
    first = candidate(store, clock)
    assert first._try_acquire_or_renew()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == first.identity


def test_a_standby_waits_for_the_lease_to_expire_after_the_last_renewal_it_saw() -> None:
    store, clock = LeaseStore(), Clock()
    leader, standby = candidate(store, clock), candidate(store, clock)
    assert leader._try_acquire_or_renew()
    assert not standby._try_acquire_or_renew()
    clock.now += 14
    assert not standby._try_acquire_or_renew()  # the record did not change: still counting
    clock.now += 2
    assert standby._try_acquire_or_renew()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == standby.identity
    assert store.lease["spec"]["leaseTransitions"] == 1


def test_a_renewal_restarts_the_standbys_count() -> None:
    store, clock = LeaseStore(), Clock()
    leader, standby = candidate(store, clock), candidate(store, clock)
    leader._try_acquire_or_renew()
    standby._try_acquire_or_renew()
    clock.now += 10
    assert leader._try_acquire_or_renew()  # renewed
    assert not standby._try_acquire_or_renew()
    clock.now += 10
    assert not standby._try_acquire_or_renew()


def test_a_released_lease_is_taken_at_once() -> None:
    store, clock = LeaseStore(), Clock()
    leader, standby = candidate(store, clock), candidate(store, clock)
    assert leader._try_acquire_or_renew()
    leader._leading.set()
    assert not standby._try_acquire_or_renew()
    leader.release()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == ""
    assert standby._try_acquire_or_renew()  # no wait for the lease duration


def test_a_standby_never_releases_what_it_does_not_hold() -> None:
    store, clock = LeaseStore(), Clock()
    leader, standby = candidate(store, clock), candidate(store, clock)
    leader._try_acquire_or_renew()
    standby._try_acquire_or_renew()
    standby.release()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == leader.identity


class SlowStore(LeaseStore):
    """Each write takes `seconds` of the clock, as a slow API server's does."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.clock.now += self.seconds
        return super().replace(obj)


def leading(store: LeaseStore, clock: Clock) -> Election:
    """A candidate that has won the lease and leads."""
    elected = candidate(store, clock)
    assert elected._try_acquire_or_renew()
    elected._leading.set()
    return elected


def test_no_writes_before_the_lease_is_won() -> None:
    store, clock = LeaseStore(), Clock()
    leader = candidate(store, clock)
    assert not leader.may_write()
    assert leader._try_acquire_or_renew()
    assert not leader.may_write()  # won, but the work has not been started yet
    leader._leading.set()
    assert leader.may_write()


def test_writes_stop_at_the_renew_deadline_after_the_last_renewal_began() -> None:
    store, clock = LeaseStore(), Clock()
    leader = leading(store, clock)
    clock.now += LEASE.renew_deadline - 0.5
    assert leader.may_write()
    clock.now += 1
    assert not leader.may_write()  # a standby may take over 5 s from now
    assert leader._try_acquire_or_renew()
    assert leader.may_write()


def test_a_renewal_counts_from_when_it_was_sent_not_from_its_answer() -> None:
    clock = Clock()
    store = SlowStore(clock, seconds=8)
    leader = leading(store, clock)
    sent = clock.now
    assert leader._try_acquire_or_renew()  # answered 8 s after it was sent
    clock.now = sent + LEASE.renew_deadline + 0.5
    assert not leader.may_write()


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_runs_again() -> None:
    store, clock = LeaseStore(), Clock()
    leader, standby = leading(store, clock), candidate(store, clock)
    assert not standby._try_acquire_or_renew()
    clock.now += LEASE.duration + 1  # the leader stopped; the standby's clock ran on
    assert standby._try_acquire_or_renew()
    # The leader runs again: its work threads may ask before its renew loop does.
    assert not leader.may_write()
    assert not leader._try_acquire_or_renew()
    assert leader._taken
