"""The controller loop: watch caches feed a work queue; workers reconcile jobs.

Event handlers only maintain an index of children by owning job and enqueue
the job's key; all decisions are made by the pure ``reconcile`` on what the
caches hold, ``runtime.executor`` carries out the actions it returns, and
``process_next`` holds the whole retry contract in one place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor as Pool
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from dlk8s.job.actions import Event
from dlk8s.job.api import API_VERSION, LABEL_JOB_NAME, EventType, Observed, Reason, State
from dlk8s.job.config import ControllerConfig
from dlk8s.job.kept import kept_child, kept_job
from dlk8s.job.reconcile import after_refusals, reconcile
from dlk8s.job.urgency import changes_state
from dlk8s.runtime import metrics
from dlk8s.runtime.client import Kube
from dlk8s.runtime.clock import seconds_left
from dlk8s.runtime.errors import ApiError, TerminalError, TransportError
from dlk8s.runtime.executor import Api, ChildNotCreatedError, Executor, Outcome, job_str
from dlk8s.runtime.expectations import Expectations
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Cache, Informer
from dlk8s.runtime.resources import CHILD_RESOURCES, JOB_RESOURCES
from dlk8s.runtime.workqueue import ShutDownError, WorkQueue

log = logging.getLogger(__name__)

# Every child carries the job-name label: one existence selector finds them all.
CHILD_SELECTOR = LABEL_JOB_NAME

# A job's pods change one by one (created, scheduled, started): events that
# only move its counts requeue the job this much later, so a burst of them
# costs one pass and one status write instead of one each, as the client-go
# Job controller batches its pod events. A change that may move the job's
# phase or state (job.urgency: its deciding pods up or done, a pod failed or
# gone) runs the pass at once: the status follows within the pass, not a
# second later. Events of the job itself are handled at once (but for the
# echo of our own status write), and every pass writes its status whole.
CHILD_EVENT_BATCH_SECONDS = 1.0

# A pass takes milliseconds, seconds for a job of thousands of pods; one that
# has run this long is wedged (a call that never returns), and the liveness
# probe should restart the operator rather than leave the job unattended.
STUCK_PASS_SECONDS = 300.0

# Failures that say what went wrong without a traceback.
_EXPECTED_FAILURES = (ApiError, TransportError, ChildNotCreatedError)


class JobKey(NamedTuple):
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


class StatusApi(Api, Protocol):
    """What the controller needs of runtime.client.Kube: the executor's calls
    and the status write."""

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]: ...


class ReconcileBugError(Exception):
    """reconcile raised: a bug in dlk8s, never the user's (see job.reconcile)."""

    def __init__(self, job: dict[str, Any], cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.job = job  # the job to send the InternalError event about


class ChildIndex:
    """Children grouped by the uid of the job that controls them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_owner: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(
            lambda: {group: {} for group in CHILD_RESOURCES}
        )

    def apply(
        self, group: str, event: str, obj: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Record one watch event: the controlling job reference if the child
        is one of ours, and the child as it was before (None if new)."""
        owner = controller_ref(obj)
        if owner is None:
            return None, None
        name = obj["metadata"]["name"]
        uid = owner["uid"]
        before = None
        with self._lock:
            if event != DELETED:
                before = self._by_owner[uid][group].get(name)
                self._by_owner[uid][group][name] = obj
            elif uid in self._by_owner:
                before = self._by_owner[uid][group].pop(name, None)
                if not any(self._by_owner[uid].values()):
                    del self._by_owner[uid]
        return owner, before

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
    """Reconciles the jobs its caches hold.

    ``Controller.watching`` builds the informers that fill the caches; a
    test passes caches of its own and drives ``sync`` or ``process_next``.
    """

    def __init__(
        self,
        kube: StatusApi,
        config: ControllerConfig,
        jobs: Mapping[str, Cache],
        informers: Sequence[Informer] = (),
        workers: int = 4,
        api_parallelism: int = 32,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        child_event_batch: float = CHILD_EVENT_BATCH_SECONDS,
        pool: Pool | None = None,
        stuck_after: float = STUCK_PASS_SECONDS,
    ) -> None:
        self.kube = kube
        self.config = config
        self.workers = workers
        self.clock = clock  # `now` for reconcile and event timestamps
        self.child_event_batch = child_event_batch
        self.queue: WorkQueue[JobKey] = WorkQueue(observer=metrics.QueueMetrics())
        metrics.QUEUE_LONGEST.set_function(self.queue.longest_running)
        self.children = ChildIndex()
        self.expectations = Expectations()
        self._jobs = jobs  # the job caches by kind
        self._informers = informers  # what fills the caches; started by start()
        # The API calls of a pass, in parallel; a test passes one it can drain.
        self._pool = pool or ThreadPoolExecutor(api_parallelism, thread_name_prefix="api")
        self.executor = Executor(kube, self.expectations, self._pool, clock)
        # Status we wrote that the watch has not delivered yet, by job uid.
        self._written: dict[str, dict[str, Any]] = {}
        # The resourceVersion of each job's last status write, until its event comes.
        self._echoes: dict[str, str] = {}
        self._written_lock = threading.Lock()
        # Jobs whose urgent child change came while their last pass's changes
        # were still awaited: their pass runs once the last of those shows.
        self._deferred: set[str] = set()
        self._deferred_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # Set once the first lists are in every cache; until then child
        # events queue nothing, as each job's own event queues it once.
        self._listed = threading.Event()
        if not informers:
            self._listed.set()
        self._started = threading.Event()
        self._stopping = threading.Event()
        # Orders start() against stop(): whichever comes second sees the other.
        self._lifecycle = threading.Lock()
        # A pass running longer than this means a wedged worker (see problems()).
        self.stuck_after = stuck_after
        self._passes: dict[int, tuple[JobKey, float]] = {}  # by worker: its key, since when
        self._passes_lock = threading.Lock()

    @classmethod
    def watching(
        cls, kube: Kube, config: ControllerConfig, namespace: str | None = None, **options: Any
    ) -> Controller:
        """A controller fed by watches of the jobs and their children (all
        namespaces when `namespace` is None). The caches keep what
        reconcile reads (job.kept), and the child index the same copy."""
        job_informers = {
            kind: kube.informer(res, namespace, transform=kept_job)
            for kind, res in JOB_RESOURCES.items()
        }
        child_informers = {
            group: kube.informer(
                res, namespace, CHILD_SELECTOR, transform=kept_child, handlers_get_kept=True
            )
            for group, res in CHILD_RESOURCES.items()
        }
        jobs = {kind: informer.cache for kind, informer in job_informers.items()}
        # Children first: a job handled before its children are known would
        # look as if it had lost them.
        informers = [*child_informers.values(), *job_informers.values()]
        controller = cls(kube, config, jobs, informers, **options)
        for kind, informer in job_informers.items():
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, controller.on_job(kind))
            # (items of a list carry no kind; a relist's deletes come from there)
            informer.add_event_handler(DELETED, controller.on_kind_deleted(kind))
        for group, informer in child_informers.items():
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, controller.on_child(group, event))
        return controller

    # -- event handlers ----------------------------------------------------------

    def on_job(self, kind: str) -> Callable[[dict[str, Any]], None]:
        def handle(obj: dict[str, Any]) -> None:
            meta = obj.get("metadata", {})
            key = JobKey(kind, meta.get("namespace", ""), meta.get("name", ""))
            if self._own_write(meta):
                self.queue.add_after(key, self.child_event_batch)
            else:
                self.queue.add(key)

        return handle

    def _own_write(self, meta: dict[str, Any]) -> bool:
        """Whether a job's event only shows back the status we wrote. The pass
        that wrote it saw all the event holds: a pass at once would mostly
        write counts that moved since (a write more per job), so it is
        batched with the events that moved them."""
        with self._written_lock:
            version = self._echoes.get(meta.get("uid", ""))
            if version is None or version != meta.get("resourceVersion"):
                return False
            del self._echoes[meta["uid"]]
            return True

    def on_kind_deleted(self, kind: str) -> Callable[[dict[str, Any]], None]:
        return lambda obj: self.on_job_deleted({**obj, "kind": kind})

    def on_job_deleted(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata", {})
        metrics.JOBS_DELETED.labels(obj.get("kind", ""), meta.get("namespace", "")).inc()
        uid = meta.get("uid", "")
        self.expectations.forget(uid)
        with self._written_lock:
            self._written.pop(uid, None)
            self._echoes.pop(uid, None)
        with self._deferred_lock:
            self._deferred.discard(uid)

    def on_child(self, group: str, event: str) -> Callable[[dict[str, Any]], None]:
        def handle(obj: dict[str, Any]) -> None:
            owner, before = self.children.apply(group, event, obj)
            if owner is None:
                return
            meta, uid = obj["metadata"], owner["uid"]
            seen = ("uid", meta.get("uid", "")) if event == DELETED else (group, meta["name"])
            awaited_all = self.expectations.observe(uid, seen)
            if not self._listed.is_set():
                return
            after = None if event == DELETED else obj
            urgent = changes_state(
                owner["kind"], group, before, after, lambda: self.children.observed(uid).pods
            )
            key = JobKey(owner["kind"], meta.get("namespace", ""), owner["name"])
            self._schedule(key, uid, urgent, awaited_all)

        return handle

    def _schedule(self, key: JobKey, uid: str, urgent: bool, awaited_all: bool) -> None:
        """A pass now for an urgent change (or once the changes of the last
        pass have all shown, as a pass before would only wait); else batched."""
        with self._deferred_lock:
            if urgent and self.expectations.wait_left(uid):
                self._deferred.add(uid)
                urgent = False
            elif awaited_all and uid in self._deferred:
                self._deferred.discard(uid)
                urgent = True
        if urgent:
            self.queue.add(key)
        else:
            self.queue.add_after(key, self.child_event_batch)

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start the watches, wait until every cache holds a full list, then
        the workers. Once stop() is called it starts nothing more and returns:
        a leader that loses its lease or is told to stop while its caches
        sync must not start workers after the shutdown has passed them."""
        with self._lifecycle:
            if self._stopping.is_set():
                return
            for informer in self._informers:
                informer.start()
        for informer in self._informers:
            while not informer.wait_synced(timeout=1):
                if self._stopping.is_set():
                    return
                log.info("waiting for caches to sync", extra={"target": informer.name})
        with self._lifecycle:
            if self._stopping.is_set():
                return
            self._listed.set()
            for i in range(self.workers):
                thread = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
                thread.start()
                self._threads.append(thread)
            self._started.set()
        log.info("controller started", extra={"action": f"{self.workers} workers"})

    @property
    def synced(self) -> bool:
        return self._started.is_set()

    @property
    def informers(self) -> Sequence[Informer]:
        """What fills the caches (children first, then the jobs)."""
        return self._informers

    def problems(self) -> list[str]:
        """Why the controller can no longer do its work ([] when it can): an
        informer or worker thread that died, a pass that has run far too long.
        /healthz fails on any, so the liveness probe restarts the operator."""
        found = [f"the informer of {i.name} has stopped" for i in self._informers if not i.alive]
        if not self._stopping.is_set():
            found += [f"{t.name} has exited" for t in self._threads if not t.is_alive()]
        now = time.monotonic()
        with self._passes_lock:
            passes = list(self._passes.values())
        found += [
            f"a pass of {key} has run for {now - since:.0f}s"
            for key, since in passes
            if now - since > self.stuck_after
        ]
        return found

    def stop(self, timeout: float = 10) -> None:
        with self._lifecycle:
            self._stopping.set()
            threads = list(self._threads)
        self.queue.shut_down()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(seconds_left(deadline))
        for informer in self._informers:
            informer.stop(seconds_left(deadline))
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the loop ------------------------------------------------------------------

    def _work(self) -> None:
        while self.process_next():
            pass

    def process_next(self, timeout: float | None = None) -> bool:
        """Take one key through sync; False once the queue is shut down.

        The retry contract, in one place: success forgets the key's failures;
        a requeue-after schedules it; an error or a bug in reconcile retries
        it with the rate limiter; a TerminalError forgets it for good.
        """
        try:
            key = self.queue.get(timeout)
        except ShutDownError:
            return False
        worker = threading.get_ident()
        with self._passes_lock:
            self._passes[worker] = (key, time.monotonic())
        try:
            result = self._process(key)
        finally:
            with self._passes_lock:
                del self._passes[worker]
            self.queue.done(key)
        metrics.RECONCILES.labels(key.kind, result).inc()
        return True

    def _process(self, key: JobKey) -> str:
        """One pass of `key`; the result label of dlk8s_reconcile_total."""
        try:
            requeue_after = self.sync(key)
        except TerminalError as err:
            self.queue.forget(key)
            log.warning(
                "reconcile failed; not retrying", extra={"job": str(key), "error": str(err)}
            )
            return "terminal"
        except ReconcileBugError as bug:
            self._report_bug(key, bug)
            self.queue.add_rate_limited(key)
            return "bug"
        except Exception as err:
            metrics.RECONCILE_ERRORS.labels(key.kind).inc()
            # An API server out of reach fails every retry of every job alike:
            # a key's first failure says so, its retries until it succeeds
            # would only fill the log of an outage (the informers log it too).
            repeat = isinstance(err, TransportError) and self.queue.failures(key) > 0
            log.log(
                logging.DEBUG if repeat else logging.WARNING,
                "reconcile failed; retrying",
                extra={"job": str(key), "error": repr(err)},
                exc_info=not isinstance(err, _EXPECTED_FAILURES),
            )
            self.queue.add_rate_limited(key)
            return "error"
        self.queue.forget(key)
        if requeue_after is None:
            return "success"
        self.queue.add_after(key, requeue_after)
        return "requeue_after"

    def _report_bug(self, key: JobKey, bug: ReconcileBugError) -> None:
        metrics.RECONCILE_ERRORS.labels(key.kind).inc()
        log.error(
            "bug in reconcile; retrying with back-off",
            extra={"job": str(key), "error": str(bug)},
            exc_info=bug.__cause__,
        )
        message = (
            f"Reconcile failed with a bug in dlk8s ({bug}); retrying with back-off."
            " Please report it with the operator's log."
        )
        self.executor.send_event(bug.job, Event(EventType.WARNING, Reason.INTERNAL_ERROR, message))

    def job(self, key: JobKey) -> dict[str, Any] | None:
        """The job from the cache, or the status we wrote if the cache is behind it."""
        cached: dict[str, Any] | None = self._jobs[key.kind].get_by_key(
            f"{key.namespace}/{key.name}"
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
        """One pass of one job; seconds until it needs another, if a timer is due."""
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
        observed, now = self.children.observed(uid), self.clock()
        try:
            result = reconcile(job, observed, self.config, now)
        except Exception as err:
            raise ReconcileBugError(job, err) from err
        outcome = self.executor.execute(job, result.actions)
        status = result.status
        if outcome.refusals:
            status = self._refused(job, observed, status, outcome, now)
        elif outcome.failures:
            # Not written: it would count as created what was not (see
            # job.reconcile.status.replica_statuses); the retry writes it.
            raise outcome.failures[0]
        if status != job.get("status"):
            self._write_status(job, status)
        metrics.RECONCILE_SECONDS.labels(key.kind).observe(time.monotonic() - started)
        if outcome.failures and status.get("state") != State.FAILED:
            raise outcome.failures[0]  # retried with back-off: a quota may free up
        return result.requeue_after

    def _refused(
        self,
        job: dict[str, Any],
        observed: Observed,
        status: dict[str, Any],
        outcome: Outcome,
        now: datetime,
    ) -> dict[str, Any]:
        """The status that names what the API server refused, and its events;
        a pod with a field it does not know fails the job as InvalidSpec."""
        try:
            fixed = after_refusals(
                job, observed, status, outcome.not_created, outcome.refusals, now
            )
        except Exception as err:
            raise ReconcileBugError(job, err) from err
        self.executor.send_events(job, [a for a in fixed.actions if isinstance(a, Event)])
        return fixed.status

    def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        updated = self.kube.replace_status({**job, "status": status})
        metrics.count_transition(
            job["kind"], job["metadata"]["namespace"], job.get("status") or {}, status
        )
        with self._written_lock:
            self._written[job["metadata"]["uid"]] = kept_job(updated)
            self._echoes[job["metadata"]["uid"]] = updated["metadata"].get("resourceVersion", "")
        log.info(
            "status updated",
            extra={
                "job": job_str(job),
                "kind": job["kind"],
                "runtimeId": status.get("runtimeId"),
                "action": f"{status.get('phase')}/{status.get('state')}",
            },
        )

    # -- introspection -------------------------------------------------------------------

    def jobs(self, kind: str) -> list[dict[str, Any]]:
        """The jobs of one kind in the cache (the autoscaler reads PaddleJobs here)."""
        cache = self._jobs.get(kind)
        return cache.list() if cache is not None else []

    def count_jobs(self) -> dict[tuple[str, str], int]:
        counts: Counter[tuple[str, str]] = Counter()
        for kind, cache in self._jobs.items():
            for job in cache.list():
                state = (job.get("status") or {}).get("state") or "Pending"
                counts[(kind, state)] += 1
        return dict(counts)


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether a's resourceVersion is at least b's (they are etcd revisions here)."""
    try:
        return int(a["metadata"]["resourceVersion"]) >= int(b["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return True
