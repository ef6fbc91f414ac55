"""The controller loop: watch caches feed a work queue; workers reconcile jobs.

Event handlers only maintain an index of children by owning job and enqueue
the job's key; all decisions are made by the pure ``reconcile`` on what the
caches hold, and the actions it returns are carried out here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes.informer import ADDED, DELETED, MODIFIED

from dlk8s.job.actions import (
    MAX_EVENT_MESSAGE,
    Action,
    Create,
    Delete,
    DeleteJob,
    Event,
    Patch,
    merge_events,
)
from dlk8s.job.api import API_VERSION, LABEL_JOB_NAME, Observed, Reason
from dlk8s.job.children import controlled_by
from dlk8s.job.config import ControllerConfig
from dlk8s.job.kinds import KINDS
from dlk8s.job.reconcile import reconcile
from dlk8s.runtime import metrics
from dlk8s.runtime.client import ApiError, Kube, Resource, register, resource_for, wait_synced
from dlk8s.runtime.expectations import Change, Expectations
from dlk8s.runtime.workqueue import ShutDownError, WorkQueue

log = logging.getLogger(__name__)

# Every child carries the job-name label: one existence selector finds them all.
CHILD_SELECTOR = LABEL_JOB_NAME
JOB_RESOURCES = {kind: register(Resource(API_VERSION, kind, f"{kind.lower()}s")) for kind in KINDS}
CHILD_KINDS = {
    "pods": resource_for("v1", "Pod"),
    "services": resource_for("v1", "Service"),
    "configmaps": resource_for("v1", "ConfigMap"),
    "deployments": resource_for("apps/v1", "Deployment"),
}
GROUP_OF_KIND = {res.kind: group for group, res in CHILD_KINDS.items()}

JobKey = tuple[str, str, str]  # kind, namespace, name

# A job's pods change one by one (created, scheduled, started): their events
# requeue the job this much later, so a burst of them costs one pass and one
# status write instead of one each; the client-go Job controller batches its
# pod events the same way. Events of the job itself are handled at once, and
# every pass still writes its status whole and at once.
CHILD_EVENT_BATCH_SECONDS = 1.0


class ChildIndex:
    """Children grouped by the uid of the job that controls them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_owner: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(
            lambda: {group: {} for group in CHILD_KINDS}
        )

    def apply(self, group: str, event: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Record one watch event; return the controlling job reference, if it is one of ours."""
        owner = controller_ref(obj)
        if owner is None:
            return None
        name = obj["metadata"]["name"]
        uid = owner["uid"]
        with self._lock:
            if event != DELETED:
                self._by_owner[uid][group][name] = obj
            elif uid in self._by_owner:
                self._by_owner[uid][group].pop(name, None)
                if not any(self._by_owner[uid].values()):
                    del self._by_owner[uid]
        return owner

    def observed(self, uid: str) -> Observed:
        with self._lock:
            groups = self._by_owner.get(uid)
            if groups is None:
                return Observed(pods=[], services=[], configmaps=[], deployments=[])
            return Observed(**{group: list(items.values()) for group, items in groups.items()})


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("apiVersion") == API_VERSION
            and ref.get("kind") in JOB_RESOURCES
        ):
            return dict(ref)
    return None


class Controller:
    def __init__(
        self,
        kube: Kube,
        config: ControllerConfig,
        namespace: str | None = None,
        workers: int = 4,
        api_parallelism: int = 32,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        child_event_batch: float = CHILD_EVENT_BATCH_SECONDS,
    ) -> None:
        self.kube = kube
        self.config = config
        self.namespace = namespace or None
        self.workers = workers
        self.clock = clock
        self.child_event_batch = child_event_batch
        self.queue = WorkQueue()
        self.children = ChildIndex()
        self.expectations = Expectations()
        self._pool = ThreadPoolExecutor(max_workers=api_parallelism, thread_name_prefix="api")
        self._job_informers = {
            kind: kube.informer(res, self.namespace) for kind, res in JOB_RESOURCES.items()
        }
        self._child_informers = {
            group: kube.informer(res, self.namespace, CHILD_SELECTOR)
            for group, res in CHILD_KINDS.items()
        }
        # Status we wrote that the watch has not delivered yet, by job uid.
        self._written: dict[str, dict[str, Any]] = {}
        self._written_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._started = threading.Event()
        self._wire_handlers()

    # -- wiring --------------------------------------------------------------

    def _wire_handlers(self) -> None:
        for kind, informer in self._job_informers.items():
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, self._on_job(kind))
            informer.add_event_handler(DELETED, self._on_job_deleted)
        for group, informer in self._child_informers.items():
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, self._on_child(group, event))

    def _on_job(self, kind: str) -> Callable[[dict[str, Any]], None]:
        def handle(obj: dict[str, Any]) -> None:
            meta = obj.get("metadata", {})
            self.queue.add((kind, meta.get("namespace", ""), meta.get("name", "")))

        return handle

    def _on_job_deleted(self, obj: dict[str, Any]) -> None:
        uid = obj.get("metadata", {}).get("uid", "")
        self.expectations.forget(uid)
        with self._written_lock:
            self._written.pop(uid, None)

    def _on_child(self, group: str, event: str) -> Callable[[dict[str, Any]], None]:
        def handle(obj: dict[str, Any]) -> None:
            owner = self.children.apply(group, event, obj)
            if owner is not None:
                meta = obj["metadata"]
                seen = ("uid", meta.get("uid", "")) if event == DELETED else (group, meta["name"])
                self.expectations.observe(owner["uid"], seen)
                namespace = obj["metadata"].get("namespace", "")
                key = (owner["kind"], namespace, owner["name"])
                self.queue.add_after(key, self.child_event_batch)

        return handle

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start the watches, wait until every cache holds a full list, then the workers."""
        informers = [*self._child_informers.values(), *self._job_informers.values()]
        for informer in informers:
            informer.start()
        for informer in informers:
            while not wait_synced(informer, timeout=1):
                log.info("waiting for caches to sync")
        for i in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._started.set()
        log.info("controller started", extra={"action": f"{self.workers} workers"})

    @property
    def synced(self) -> bool:
        return self._started.is_set()

    def stop(self, timeout: float = 10) -> None:
        self.queue.shut_down()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for informer in [*self._job_informers.values(), *self._child_informers.values()]:
            # The informer's stop joins a thread blocked in a long watch read;
            # the process is exiting, so signal and move on.
            informer._stop_event.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the loop ------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            try:
                key = self.queue.get()
            except ShutDownError:
                return
            metrics.QUEUE_DEPTH.set(len(self.queue))
            try:
                requeue_after = self.sync(key)  # type: ignore[arg-type]
            except Exception as err:
                metrics.RECONCILE_ERRORS.labels(key[0]).inc()  # type: ignore[index]
                log.warning(
                    "reconcile failed; retrying",
                    extra={"job": _key_str(key), "error": repr(err)},  # type: ignore[arg-type]
                    exc_info=not isinstance(err, (ApiError, ChildNotCreatedError)),
                )
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if requeue_after is not None:
                    self.queue.add_after(key, requeue_after)
            finally:
                self.queue.done(key)

    def job(self, key: JobKey) -> dict[str, Any] | None:
        kind, namespace, name = key
        cached: dict[str, Any] | None = self._job_informers[kind].cache.get_by_key(
            f"{namespace}/{name}"
        )
        if cached is None:
            return None
        uid = cached["metadata"]["uid"]
        with self._written_lock:
            written = self._written.get(uid)
            if written is None:
                return cached
            if _newer(cached, written):
                del self._written[uid]
                return cached
            return written

    def sync(self, key: JobKey) -> float | None:
        job = self.job(key)
        if job is None:
            return None
        started = time.monotonic()
        uid = job["metadata"]["uid"]
        wait = self.expectations.wait_left(uid)
        if wait:
            # The events that show our last changes requeue the job; the
            # timer only matters if one of them never comes.
            return wait
        result = reconcile(job, self.children.observed(uid), self.config, self.clock())
        self._execute(job, result.actions)
        if result.status != job.get("status"):
            self._write_status(job, result.status)
        metrics.RECONCILE_SECONDS.labels(key[0]).observe(time.monotonic() - started)
        return result.requeue_after

    # -- carrying out actions --------------------------------------------------------

    def _execute(self, job: dict[str, Any], actions: list[Action]) -> None:
        """API calls of one pass go out in parallel; events are sent after the
        changes, one per kind of event (see merge_events)."""
        changes = [a for a in actions if not isinstance(a, Event)]
        events = [a for a in actions if isinstance(a, Event)]
        uid = job["metadata"]["uid"]
        self.expectations.expect(uid, {c for a in changes if (c := expected_change(a))})
        failures = [err for err in self._pool.map(self._apply_safely(job), changes) if err]
        for event in merge_events(events):
            self._pool.submit(self._send_event, job, event)
        if failures:
            raise failures[0]

    def _apply_safely(self, job: dict[str, Any]) -> Callable[[Action], Exception | None]:
        def apply(action: Action) -> Exception | None:
            change = expected_change(action)
            try:
                changed = self._apply(job, action)
            except Exception as err:
                changed = False
                return err
            finally:
                if change and not changed:
                    self.expectations.cancel(job["metadata"]["uid"], change)
            return None

        return apply

    def _apply(self, job: dict[str, Any], action: Action) -> bool:
        """Carry out one action; whether it changed something the caches will show."""
        meta = job["metadata"]
        if isinstance(action, Create):
            return self._create(job, action.obj)
        if isinstance(action, Delete):
            return self.kube.delete(
                action.api_version, action.kind, action.namespace, action.name, action.uid
            )
        if isinstance(action, Patch):
            self.kube.patch(
                action.api_version, action.kind, action.namespace, action.name, action.patch
            )
        elif isinstance(action, DeleteJob):
            self.kube.delete(
                job["apiVersion"], job["kind"], meta["namespace"], meta["name"], meta["uid"]
            )
        return False

    def _create(self, job: dict[str, Any], obj: dict[str, Any]) -> bool:
        try:
            return create_child(self.kube, job["metadata"]["uid"], obj)
        except NameTakenError as err:
            self._send_event(job, Event("Warning", Reason.NAME_TAKEN, str(err)))
            raise

    def _send_event(self, job: dict[str, Any], event: Event) -> None:
        try:
            self.kube.create_event(event_manifest(job, event, self.clock()))
        except Exception as err:  # events are best effort: never fail a reconcile
            log.info("event not recorded", extra={"job": _job_str(job), "error": repr(err)})

    def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        updated = self.kube.replace_status({**job, "status": status})
        with self._written_lock:
            self._written[job["metadata"]["uid"]] = updated
        log.info(
            "status updated",
            extra={
                "job": _job_str(job),
                "kind": job["kind"],
                "runtimeId": status.get("runtimeId"),
                "action": f"{status.get('phase')}/{status.get('state')}",
            },
        )

    # -- introspection -------------------------------------------------------------------

    def jobs(self, kind: str) -> list[dict[str, Any]]:
        """The jobs of one kind in the cache (the autoscaler reads PaddleJobs here)."""
        informer = self._job_informers.get(kind)
        return informer.cache.list() if informer is not None else []

    def count_jobs(self) -> dict[tuple[str, str], int]:
        counts: Counter[tuple[str, str]] = Counter()
        for kind, informer in self._job_informers.items():
            for job in informer.cache.list():
                state = (job.get("status") or {}).get("state") or "Pending"
                counts[(kind, state)] += 1
        return dict(counts)


class ChildApi(Protocol):
    def create(self, obj: dict[str, Any]) -> dict[str, Any] | None: ...

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None: ...


class ChildNotCreatedError(Exception):
    """A create that neither made the child nor found the job's own."""


class NameTakenError(ChildNotCreatedError):
    """A child's name is held by an object the job does not control."""


def create_child(api: ChildApi, job_uid: str, obj: dict[str, Any]) -> bool:
    """Create one child of a job: True if created now, False if the job's own
    child of that name already exists (a cache behind the API server).

    Anything else fails the pass: the status a pass writes counts the pods
    it created, and the next pass would count one that is not there as lost.
    """
    if api.create(obj) is not None:
        return True
    meta = obj["metadata"]
    what = f"{obj['kind']} {meta['name']}"
    found = api.get(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
    if found is None:
        # Taken by an object deleted since, or refused in a namespace being deleted.
        raise ChildNotCreatedError(f"{what} was not created and does not exist; retrying")
    if not controlled_by(found, job_uid):
        raise NameTakenError(
            f"{what} already exists and is not controlled by this job; "
            "delete or rename it so the job can create its own"
        )
    return False


def expected_change(action: Action) -> Change | None:
    """How a create or delete of a watched child will show up in the caches."""
    if isinstance(action, Create):
        group = GROUP_OF_KIND.get(action.obj.get("kind", ""))
        return (group, action.obj["metadata"]["name"]) if group else None
    if isinstance(action, Delete) and action.uid and action.kind in GROUP_OF_KIND:
        return ("uid", action.uid)
    return None


def event_manifest(job: dict[str, Any], event: Event, now: datetime) -> dict[str, Any]:
    meta = job["metadata"]
    involved = event.involved or job
    involved_meta = involved.get("metadata", {})
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{meta['name'][:200]}.",
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", job["apiVersion"]),
            "kind": involved.get("kind", job["kind"]),
            "name": involved_meta.get("name", meta["name"]),
            "namespace": involved_meta.get("namespace", meta["namespace"]),
            "uid": involved_meta.get("uid", meta["uid"]),
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:MAX_EVENT_MESSAGE],
        "source": {"component": "dlk8s-operator"},
        "reportingComponent": "dlk8s-operator",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether a's resourceVersion is at least b's (they are etcd revisions here)."""
    try:
        return int(a["metadata"]["resourceVersion"]) >= int(b["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return True


def _key_str(key: JobKey) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


def _job_str(job: dict[str, Any]) -> str:
    return f"{job['kind']}/{job['metadata']['namespace']}/{job['metadata']['name']}"
