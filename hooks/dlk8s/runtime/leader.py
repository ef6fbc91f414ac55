"""Leader election on a Lease: one instance acts, the others stand by.

The official client's LeaderElection does the Lease protocol; this module
adds what the operator needs around it: the dlk8s_leader metric, a standby
state that counts as ready (a standby must not fail its readiness probe),
and exiting when the lease is lost, since another instance may act by then
and carrying on would mean two writers.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from dlk8s.runtime import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    name: str
    namespace: str
    # Seconds a standby waits after the last renewal before it takes over;
    # the renew deadline and retry period are derived from it as client-go's
    # defaults are (15 / 10 / 2).
    duration: int = 15

    @property
    def renew_deadline(self) -> int:
        return max(2, self.duration * 2 // 3)

    @property
    def retry_period(self) -> int:
        return max(1, self.duration // 7)


class Election:
    def __init__(
        self,
        api_client: client.ApiClient,
        lease: Lease,
        on_lead: Callable[[], None],
        stop: threading.Event,
    ) -> None:
        self._api_client = api_client
        self._lease = lease
        self._on_lead = on_lead  # starts the work; called once, when the lease is won
        self._stop = stop  # the process's stop signal: set when the lease is lost
        self._standby = threading.Event()  # waiting for the lease, which counts as ready
        self.lost = False  # the lease was lost while running: the process exits non-zero
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

    @property
    def standing_by(self) -> bool:
        return self._standby.is_set()

    def start(self) -> None:
        self._standby.set()
        lock = LeaseLock(self._lease.name, self._lease.namespace, self.identity)
        lock.api_instance = client.CoordinationV1Api(self._api_client)
        lease = self._lease
        cfg = electionconfig.Config(
            lock, lease.duration, lease.renew_deadline, lease.retry_period, self._lead, self._lost
        )
        election = leaderelection.LeaderElection(cfg)
        threading.Thread(target=election.run, name="leader-election", daemon=True).start()

    def _lead(self) -> None:
        self._standby.clear()
        metrics.IS_LEADER.set(1)
        log.info("became leader", extra={"target": self.identity})
        self._on_lead()
        # Returning would stop the renewals while the work goes on.
        self._stop.wait()

    def _lost(self) -> None:
        metrics.IS_LEADER.set(0)
        if not self._stop.is_set():
            log.error("lost the leader lease; exiting")
            self.lost = True
            self._stop.set()
