"""The controller loop: watch caches feed a work queue; workers reconcile jobs.

Event handlers only maintain an index of children by owning job and enqueue
the job's key; all decisions are made by the pure ``reconcile`` on what the
caches hold, ``runtime.executor`` carries out the actions it returns, and
``process_next`` holds the whole retry contract in one place. What the loop
keeps between passes lives in collaborators of one lock at most, each in its
module: ``childindex``, ``childevents``, ``ownwrites``, ``passes``, ``lifecycle``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor as Pool
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from dlk8s.job.actions import Event
from dlk8s.job.config import ControllerConfig
from dlk8s.job.jobmodel import QueueFacts
from dlk8s.job.objects import Obj, job_str
from dlk8s.job.reconcile import Result, reconcile
from dlk8s.job.reconcile.refused import after_refusals
from dlk8s.job.vocabulary import LABEL_JOB_NAME, EventType, Reason, State
from dlk8s.runtime import logs, metrics
from dlk8s.runtime.apiresources import (
    CHILD_RESOURCES,
    JOB_RESOURCES,
    KUEUE_CHILD_RESOURCES,
    NETWORK_CHILD_RESOURCES,
    Resource,
)
from dlk8s.runtime.childevents import ChildEvents
from dlk8s.runtime.childindex import ChildIndex
from dlk8s.runtime.client import Kube, Selectors
from dlk8s.runtime.errors import ApiError, TerminalError, TransportError
from dlk8s.runtime.executor import Api, ChildNotCreatedError, Executor, Outcome
from dlk8s.runtime.expectations import Expectations
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Cache, Informer
from dlk8s.runtime.kept import kept_child, kept_job
from dlk8s.runtime.lifecycle import Lifecycle
from dlk8s.runtime.orphans import Orphans
from dlk8s.runtime.ownwrites import OwnWrites
from dlk8s.runtime.passes import STUCK_PASS_SECONDS, RunningPasses
from dlk8s.runtime.queueing import MISSING, KueueWatch, kueue_served, with_prebuilt
from dlk8s.runtime.urgency import Urgency
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
# second later. Events of the job itself are handled at once (the echo of
# our own status write is no event to us), and every pass writes its status
# whole.
CHILD_EVENT_BATCH_SECONDS = 1.0
# When a pass created pods that were there already (its caches were behind),
# the pass again after this, its status not written meanwhile.
STALE_RETRY_SECONDS = 1.0

# How long a job whose deciding pods are up waits for its other pods before
# its pass writes Running (job.urgency's SOON): a status write then says
# Running with every pod's count, instead of two writes a batch apart. The
# last of those pods coming up ends the wait at once.
SIBLINGS_WAIT_SECONDS = 0.25

# Jobs reconciled at once, one job never on two workers (also the default of
# `dlk8s-operator run --workers`): a pass waits on the API server, not the CPU.
WORKERS = 8

# API calls of all passes in flight at once (also `--api-parallelism`'s
# default): a job's creates go out together, and the API server, not this
# pool, should be what limits a burst.
API_PARALLELISM = 32

# Failures that say what went wrong without a traceback.
_EXPECTED_FAILURES = (ApiError, TransportError, ChildNotCreatedError)


class JobKey(NamedTuple):
    """What the work queue holds: which job is due a pass."""

    kind: str  # which job cache holds it
    namespace: str
    name: str  # unique in its namespace among jobs of its kind

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


class StatusApi(Api, Protocol):
    """What the controller needs of runtime.client.Kube: the executor's calls
    and the status write."""

    def replace_status(self, obj: Obj) -> Obj: ...


class ReconcileBugError(Exception):
    """reconcile raised: a bug in dlk8s, never the user's (see job.reconcile)."""

    def __init__(self, job: Obj, cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.job = job  # the job to send the InternalError event about


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
        workers: int = WORKERS,
        api_parallelism: int = API_PARALLELISM,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        child_event_batch: float = CHILD_EVENT_BATCH_SECONDS,
        siblings_wait: float = SIBLINGS_WAIT_SECONDS,
        pool: Pool | None = None,
        stuck_after: float = STUCK_PASS_SECONDS,
        queue_facts: Callable[[], QueueFacts | None] = lambda: None,
        workloads: Cache | None = None,
    ) -> None:
        self.kube = kube  # the status writes (the executor makes the other calls)
        self.config = config  # what reconcile knows of the cluster (drivers, images)
        self.clock = clock  # `now` for reconcile and event timestamps
        self.child_event_batch = child_event_batch  # how long a count-only change waits
        self.siblings_wait = siblings_wait  # how long Running waits for the job's other pods
        # The keys of jobs due a pass; one key is never on two workers.
        self.queue: WorkQueue[JobKey] = WorkQueue(observer=metrics.QueueMetrics())
        metrics.QUEUE_LONGEST.set_function(self.queue.longest_running)
        self._jobs = jobs  # the job caches by kind
        self.own_writes = OwnWrites()  # status we wrote that the job caches do not show yet
        self.children = ChildIndex()  # what a pass observes of its job's children
        self.expectations = Expectations()  # the changes of each job's last pass not seen yet
        # The API calls of a pass, in parallel; a test passes one it can drain.
        self._pool = pool or ThreadPoolExecutor(api_parallelism, thread_name_prefix="api")
        self.executor = Executor(kube, self.expectations, self._pool, clock)  # the actions
        # The pods of jobs that are gone: their tracking finalizers come off.
        self.orphans = Orphans(self.children, jobs, self.executor, self._pool)
        # The informers and the workers: started, stopped, checked on.
        self.lifecycle = Lifecycle(informers, workers, self._work, self.queue.shut_down)
        # When a child's event runs its job's pass (an urgent one may be deferred).
        self.child_events = ChildEvents(self.children, self.expectations, self.lifecycle.listed)
        self.passes = RunningPasses(stuck_after)  # the passes running, for /healthz
        # What Kueue's objects say, for queued jobs (None: run without --kueue).
        self.queue_facts = queue_facts
        # Kueue's Workloads, for those MultiKueue made for jobs it copied here.
        self._workloads = workloads

    @classmethod
    def watching(
        cls,
        kube: Kube,
        config: ControllerConfig,
        namespace: str | None = None,
        kueue: bool = False,
        **options: Any,
    ) -> Controller:
        """A controller fed by watches of the jobs and their children (all
        namespaces when `namespace` is None); with `kueue`, of their
        Workloads and Kueue's objects too (runtime.queueing); with the
        config's network_policies, of their NetworkPolicies."""
        job_informers, child_informers = _informers(kube, namespace)
        if config.network_policies:
            child_informers |= _child_informers(kube, namespace, NETWORK_CHILD_RESOURCES)
        jobs = {kind: informer.cache for kind, informer in job_informers.items()}
        extra: list[Informer] = []
        if kueue and kueue_served(kube):
            watch = KueueWatch(kube, namespace)
            extra = list(watch.informers)
            child_informers |= _workload_informers(kube, namespace)
            options["queue_facts"] = watch.facts
            options["workloads"] = child_informers["workloads"].cache
        elif kueue:
            options["queue_facts"] = lambda: QueueFacts(problem=MISSING)
        # Children first: a job handled before its children are known would
        # look as if it had lost them.
        informers = [*extra, *child_informers.values(), *job_informers.values()]
        options.setdefault("clock", kube.server_clock.now)
        controller = cls(kube, config, jobs, informers, **options)
        for kind, informer in job_informers.items():
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, controller.on_job(kind))
            # (items of a list carry no kind; a relist's deletes come from there)
            informer.add_event_handler(DELETED, controller.on_job_deleted(kind))
        for group, informer in child_informers.items():
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, controller.on_child(group, event))
        return controller

    # -- event handlers ----------------------------------------------------------

    def on_job(self, kind: str) -> Callable[[Obj], None]:
        def handle(obj: Obj) -> None:
            meta = obj.get("metadata", {})
            key = JobKey(kind, meta.get("namespace", ""), meta.get("name", ""))
            # The echo of our own status write needs no pass: the pass that
            # wrote it decided on everything the echo holds, and whatever
            # changed since (a child, a timer) queues the job on its own.
            if not self.own_writes.is_echo(meta):
                self.queue.add(key)

        return handle

    def on_job_deleted(self, kind: str) -> Callable[[Obj], None]:
        def handle(obj: Obj) -> None:
            meta = obj.get("metadata", {})
            metrics.JOBS_DELETED.labels(kind, meta.get("namespace", "")).inc()
            uid = meta.get("uid", "")
            self.orphans.release(uid)
            self.expectations.forget(uid)
            self.own_writes.forget(uid)
            self.child_events.forget(uid)
            self.children.forget(uid)

        return handle

    def on_child(self, group: str, event: str) -> Callable[[Obj], None]:
        def handle(obj: Obj) -> None:
            due = self.child_events.apply(group, event, obj)
            if group == "pods" and event != DELETED:
                # Filed first: the job's deletion, on another thread, lets
                # go of the pods filed by then, and this of any after.
                self.orphans.seen(obj, self.synced)
            if due is None:
                return
            namespace = obj["metadata"].get("namespace", "")
            key = JobKey(due.owner["kind"], namespace, due.owner["name"])
            if due.when is Urgency.NOW:
                # Kueue's admission lets a job create its pods: that pass
                # goes before the others. Other urgent passes keep their
                # place: in a burst, served first they delay the first
                # passes of the jobs behind them (make bench-kueue's burst).
                self.queue.add(key, urgent=group in KUEUE_CHILD_RESOURCES)
            elif due.when is Urgency.SOON:
                self.queue.add_after(key, min(self.siblings_wait, self.child_event_batch))
            else:
                self.queue.add_after(key, self.child_event_batch)

        return handle

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start the watches, then the workers once every cache is listed;
        nothing once stop() was called (see runtime.lifecycle)."""
        if self.lifecycle.start():
            log.info("controller started", extra={"action": f"{self.lifecycle.workers} workers"})
            if gone := self.orphans.release_gone():
                log.info("pods of deleted jobs released", extra={"action": f"{gone} job(s)"})

    @property
    def synced(self) -> bool:
        return self.lifecycle.started.is_set()

    @property
    def informers(self) -> Sequence[Informer]:
        """What fills the caches (children first, then the jobs)."""
        return self.lifecycle.informers

    def checks(self) -> dict[str, list[str]]:
        """Why the controller can no longer do its work, by check ([] where
        it can): an informer or worker thread that died, a pass that has run
        far too long. /healthz fails on any, so the liveness probe restarts
        the operator."""
        return {
            "informers": self.lifecycle.dead_informers(),
            "workers": self.lifecycle.exited_workers(),
            "passes": self.passes.stuck(),
        }

    def stop(self, timeout: float = 10) -> None:
        self.lifecycle.stop(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the loop ------------------------------------------------------------------

    def _work(self) -> None:
        while self.process_next():
            pass

    def process_next(self, timeout: float | None = None) -> bool:
        """Take one key through sync; False once the queue is shut down.

        The retry contract, in one place: success forgets the key's failures;
        a requeue-after schedules it; an error or a bug in reconcile retries
        it with the rate limiter; a TerminalError forgets it for good. Every
        line logged in the pass carries its reconcile id (runtime.logs).
        """
        try:
            key = self.queue.get(timeout)
        except ShutDownError:
            return False
        try:
            with self.passes.running(key), logs.reconcile_id():
                result = self._process(key)
        finally:
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

    def sync(self, key: JobKey) -> float | None:
        """One pass of one job; seconds until it needs another, if a timer is due."""
        job = self.job(key)
        if job is None:
            return None
        started = time.monotonic()
        uid = job["metadata"]["uid"]
        wait = self.child_events.hold(uid)
        if wait:
            # The last event that shows our last changes requeues the job;
            # the timer only matters if one of them never comes.
            return wait
        observed = replace(self.children.observed(uid), queueing=self.queue_facts())
        observed = with_prebuilt(job, observed, self._workloads)
        now = self.clock()
        try:
            result = reconcile(job, observed, self.config, now)
        except Exception as err:
            raise ReconcileBugError(job, err) from err
        outcome = self.executor.execute(job, result.actions)
        self.orphans.release_if_namespace_goes(uid, outcome.failures)
        status = result.status
        if outcome.refusals:
            status = self._refused(job, result, outcome)
        elif outcome.not_created:
            # Not written: it would count as created what was not (see
            # job.reconcile.slots.replica_statuses); the retry writes it.
            # Other failures (a delete, a Workload's status while Kueue's
            # webhook is away) do not hold back what the job's status says.
            raise outcome.failures[0]
        elif outcome.existed and not outcome.failures:
            # Decided on caches behind the API server: the status could
            # count a pod that is there as lost (a restart that never
            # happened). Not written; the pass again once the caches show it.
            log.info(
                "pods already there; the caches were behind",
                extra={"job": str(key), "target": ", ".join(sorted(outcome.existed)[:5])},
            )
            return STALE_RETRY_SECONDS
        if status != job.get("status"):
            self._write_status(job, status)
        if result.after_status:  # what waited for the status (job.reconcile.tracking)
            outcome.failures += self.executor.execute(job, result.after_status).failures
        metrics.RECONCILE_SECONDS.labels(key.kind).observe(time.monotonic() - started)
        if outcome.failures and status.get("state") != State.FAILED:
            raise outcome.failures[0]  # retried with back-off: a quota may free up
        return result.requeue_after

    def job(self, key: JobKey) -> Obj | None:
        """The job from its cache, or with the status we wrote if the cache is behind it."""
        cached = self._jobs[key.kind].get_by_key(f"{key.namespace}/{key.name}")
        return None if cached is None else self.own_writes.current(cached)

    def _refused(self, job: Obj, result: Result, outcome: Outcome) -> Obj:
        """The status that names what the API server refused, and its events;
        a pod with a field it does not know fails the job as InvalidSpec."""
        try:
            fixed = after_refusals(result, outcome.not_created, outcome.refusals)
        except Exception as err:
            raise ReconcileBugError(job, err) from err
        self.executor.send_events(job, [a for a in fixed.actions if isinstance(a, Event)])
        return fixed.status

    def _write_status(self, job: Obj, status: Obj) -> None:
        """Write the status, remember it (runtime.ownwrites), and count and
        log it: the lifecycle metrics, one line."""
        updated = self.kube.replace_status({**job, "status": status})
        self.own_writes.wrote(job["metadata"]["uid"], kept_job(updated))
        metrics.count_transition(
            job["kind"], job["metadata"]["namespace"], job.get("status") or {}, status
        )
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

    def jobs(self, kind: str) -> list[Obj]:
        """The jobs of one kind in the cache (the autoscaler reads PaddleJobs here)."""
        cache = self._jobs.get(kind)
        return cache.list() if cache is not None else []

    def count_jobs(self) -> dict[tuple[str, str], int]:
        """The jobs in the caches by (kind, state), for the dlk8s_jobs gauge."""
        return _count_by_state(self._jobs)


def _count_by_state(caches: Mapping[str, Cache]) -> dict[tuple[str, str], int]:
    counts: Counter[tuple[str, str]] = Counter()
    for kind, cache in caches.items():
        for job in cache.list():
            counts[(kind, (job.get("status") or {}).get("state") or "Pending")] += 1
    return dict(counts)


def _informers(
    kube: Kube, namespace: str | None
) -> tuple[dict[str, Informer], dict[str, Informer]]:
    """The informers of the jobs by kind and of their children by group. The
    caches keep what reconcile reads (job.kept), and the child index the same
    copy."""
    jobs = {
        kind: Informer(kube, res, namespace, transform=kept_job)
        for kind, res in JOB_RESOURCES.items()
    }
    return jobs, _child_informers(kube, namespace, CHILD_RESOURCES)


def _child_informers(
    kube: Kube, namespace: str | None, resources: Mapping[str, Resource]
) -> dict[str, Informer]:
    selectors = Selectors(CHILD_SELECTOR)
    return {
        group: Informer(kube, res, namespace, selectors, kept_child, handlers_get_kept=True)
        for group, res in resources.items()
    }


def _workload_informers(kube: Kube, namespace: str | None) -> dict[str, Informer]:
    """The jobs' Workloads, kept whole but for managedFields: a status
    write puts back the whole status, so nothing of it may be dropped."""
    return {
        group: Informer(
            kube, res, namespace, Selectors(CHILD_SELECTOR), kept_job, handlers_get_kept=True
        )
        for group, res in KUEUE_CHILD_RESOURCES.items()
    }
