"""Leader election on a Lease: one instance acts, the others stand by.

client-go's protocol (tools/leaderelection), through our own client:
- a candidate reads the Lease every retry period; it takes it when nobody
  holds it, or when the holder has not renewed it for the lease's duration
  (measured on the candidate's own clock, from when it last saw the record
  change);
- the leader renews every retry period, and gives up (the process exits, as
  another instance may act by then) when it could not renew within the
  renew deadline;
- on SIGTERM the leader, once its work has stopped, releases the Lease
  (client-go's ReleaseOnCancel): holder empty, so a standby takes over at its
  next look instead of after the lease expires.

The official client's LeaderElection cannot do the last: it has no release,
and its candidates wait a full lease duration even for a Lease that names no
holder, so a failover after SIGTERM took as long as one after a kill (about
18 s with the 15 s lease). Writes are updates with the resourceVersion read,
so two candidates never both win.

What client-go leaves open, a leader paused (SIGSTOP, a long GC, a frozen
VM) past its lease while a standby takes over, is fenced here: the work's
writes ask `may_write`, which holds only while the last successful renewal
began less than the renew deadline ago. A standby takes over no sooner
than the lease's duration after it saw that renewal, so a write leaves at
least duration - deadline (5 s of 15) before then. The clock is
CLOCK_BOOTTIME, which goes on while the machine sleeps.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from dlk8s.runtime import metrics
from dlk8s.runtime.errors import AlreadyExistsError, ConflictError, NotFoundError

log = logging.getLogger(__name__)

LEASE_API_VERSION = "coordination.k8s.io/v1"


@dataclass(frozen=True)
class Lease:
    name: str
    namespace: str
    # Seconds a standby waits after the last renewal it saw before it takes
    # over; the renew deadline and retry period follow as client-go's
    # defaults do (15 / 10 / 2).
    duration: int = 15

    @property
    def renew_deadline(self) -> float:
        return max(2.0, self.duration * 2 / 3)

    @property
    def retry_period(self) -> float:
        return max(1.0, self.duration / 7.5)


class LeaseApi(Protocol):
    """What the election needs of runtime.client.Kube."""

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any]: ...

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]: ...


class Election:
    def __init__(
        self,
        api: LeaseApi,
        lease: Lease,
        on_lead: Callable[[], None],
        stop: threading.Event,
        clock: Callable[[], float] = lambda: time.clock_gettime(time.CLOCK_BOOTTIME),
    ) -> None:
        self._api = api
        self._lease = lease
        self._on_lead = on_lead  # starts the work; called once, when the lease is won
        self._stop = stop  # the process's stop signal: set when the lease is lost
        self._clock = clock
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.lost = False  # the lease was lost while leading: the process exits non-zero
        self._leading = threading.Event()
        self._done = threading.Event()  # stop looking and renewing (before release)
        self._thread: threading.Thread | None = None
        # The record last read, and when (our clock) it last changed.
        self._seen: tuple[Any, ...] | None = None
        self._seen_at = 0.0
        self._held: dict[str, Any] | None = None  # the Lease as our last write left it
        self._taken = False  # the last read found another holder
        # When (our clock) the last acquire or renewal that succeeded began:
        # the start of the request, as the standby sees the write after it.
        self._renewed_at: float | None = None

    @property
    def standing_by(self) -> bool:
        return self._thread is not None and not self._leading.is_set() and not self._done.is_set()

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    def may_write(self) -> bool:
        """Whether the work may send a write now (runtime.client asks)."""
        renewed = self._renewed_at
        return (
            self._leading.is_set()
            and renewed is not None
            and self._clock() - renewed < self._lease.renew_deadline
        )

    def problems(self) -> list[str]:
        thread = self._thread
        if thread is not None and not thread.is_alive() and not self._done.is_set():
            return ["the leader election has stopped"]
        return []

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def release(self, timeout: float = 5) -> None:
        """Stop renewing and, if leading, hand the Lease back. Call once the
        work has stopped: until then nobody else may act."""
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if not self._leading.is_set() or self._held is None:
            return
        released = dict(self._held)
        spec = dict(released["spec"])
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
        try:
            self._api.replace({**released, "spec": spec})
            log.info("released the leader lease", extra={"target": self.identity})
        except Exception as err:  # it expires by itself; the standby waits longer
            log.warning("could not release the leader lease", extra={"error": repr(err)})
        self._leading.clear()
        metrics.IS_LEADER.set(0)

    # -- the loop ----------------------------------------------------------------

    def _run(self) -> None:
        period = self._lease.retry_period
        while not self._done.is_set():
            if self._try_acquire_or_renew():
                break
            self._done.wait(period * (1 + 0.2 * random.random()))
        if self._done.is_set():
            return
        self._lead()
        self._renew_loop()

    def _lead(self) -> None:
        self._leading.set()
        metrics.IS_LEADER.set(1)
        log.info("became leader", extra={"target": self.identity})
        # On a thread of its own: syncing the caches may take longer than
        # the renew deadline, and the renewals must go on meanwhile.
        threading.Thread(target=self._on_lead, name="leader-start", daemon=True).start()

    def _renew_loop(self) -> None:
        while not self._done.wait(self._lease.retry_period):
            if self._try_acquire_or_renew():
                continue
            if self._taken or not self.may_write():
                # Another holder (we were paused past our lease) acts already:
                # waiting out the deadline would make two writers.
                self._lose()
                return

    def _lose(self) -> None:
        self._leading.clear()
        metrics.IS_LEADER.set(0)
        if not self._stop.is_set():
            log.error("lost the leader lease; exiting")
            self.lost = True
            self._stop.set()

    def _try_acquire_or_renew(self) -> bool:
        began = self._clock()
        won = self._read_and_write()
        if won:
            self._renewed_at = began
        return won

    def _read_and_write(self) -> bool:
        try:
            current = self._api.get(
                LEASE_API_VERSION, "Lease", self._lease.namespace, self._lease.name
            )
        except NotFoundError:
            return self._create()
        except Exception as err:
            log.debug("lease not read", extra={"error": repr(err)})
            return False
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        self._observe(spec)
        self._taken = bool(holder) and holder != self.identity
        if self._taken and not self._expired(spec):
            return False
        return self._update(current, holder)

    def _observe(self, spec: dict[str, Any]) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._seen:
            self._seen, self._seen_at = record, self._clock()

    def _expired(self, spec: dict[str, Any]) -> bool:
        duration = spec.get("leaseDurationSeconds") or self._lease.duration
        return self._clock() > self._seen_at + float(duration)

    def _create(self) -> bool:
        now = _micro_time()
        lease = {
            "apiVersion": LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": {"name": self._lease.name, "namespace": self._lease.namespace},
            "spec": self._spec(now, now, 0),
        }
        try:
            self._held = self._api.create(lease)
        except (AlreadyExistsError, ConflictError):
            return False
        except Exception as err:
            log.debug("lease not created", extra={"error": repr(err)})
            return False
        return True

    def _update(self, current: dict[str, Any], holder: str) -> bool:
        spec = current.get("spec") or {}
        now = _micro_time()
        ours = holder == self.identity
        acquired = spec.get("acquireTime") if ours else now
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        try:
            self._held = self._api.replace(
                {**current, "spec": self._spec(acquired, now, transitions)}
            )
        except Exception as err:  # a Conflict: someone else wrote first
            log.debug("lease not updated", extra={"error": repr(err)})
            return False
        return True

    def _spec(self, acquired: Any, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self._lease.duration,
            "acquireTime": acquired or renewed,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }


def _micro_time() -> str:
    """A MicroTime as the API server writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
