"""A Lease's history as its candidates wrote it, for tests that judge a
leader hand-over by the Lease's own record instead of the test's clock."""

from __future__ import annotations

import threading
from datetime import datetime

from dlk8s_dev.localcluster import LocalCluster


class LeaseHistory:
    """Every version of one Lease, from a watch begun before the test acts:
    (holder, acquireTime, renewTime) as the candidates wrote them."""

    def __init__(self, cluster: LocalCluster, namespace: str, name: str) -> None:
        from kubernetes import client, watch

        self.versions: list[tuple[str, datetime | None, datetime | None]] = []
        self._watch = watch.Watch()
        api = client.CoordinationV1Api(cluster.api_client())
        self._events = self._watch.stream(
            api.list_namespaced_lease,
            namespace,
            field_selector=f"metadata.name={name}",
            timeout_seconds=300,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stopping = threading.Event()
        self.failure: Exception | None = None  # what ended the watch early, if anything did

    def __enter__(self) -> LeaseHistory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._watch.stop()  # takes effect at the next event: a renewal, within seconds
        self._thread.join(30)

    def _run(self) -> None:
        try:
            for event in self._events:
                spec = event["object"].spec
                holder = spec.holder_identity or ""
                self.versions.append((holder, spec.acquire_time, spec.renew_time))
        except Exception as err:  # the stream cut under a watch being stopped is no news
            if not self._stopping.is_set():
                self.failure = err

    def holders(self) -> list[str]:
        return list(dict.fromkeys(h for h, _, _ in self.versions if h))

    def handover(self, old: str, new: str) -> tuple[datetime, datetime]:
        """The old holder's last renewal and the new holder's acquisition."""
        renewed = [r for h, _, r in self.versions if h == old and r is not None]
        acquired = [a for h, a, _ in self.versions if h == new and a is not None]
        assert renewed, (self.versions, self.failure)
        assert acquired, (self.versions, self.failure)
        return renewed[-1], acquired[0]

    def released(self, old: str) -> datetime | None:
        """When the old holder handed the Lease back (holder emptied), if it did."""
        last = max((i for i, (h, _, _) in enumerate(self.versions) if h == old), default=None)
        if last is None:
            return None
        after = [r for h, _, r in self.versions[last + 1 :] if not h]
        return after[0] if after else None
