"""Carrying out what reconcile decided: creates, deletes, patches and events.

The API calls of one pass go out in parallel. Each create or delete of a
watched child is recorded in the expectations before its call, so the job
is not reconciled again until the caches show it (runtime.expectations).
Events are sent after the changes, merged into one per kind of event; the
event a create or delete carries is sent only if it succeeded. What failed
comes back as an Outcome, the refusals of the API server apart, for the
controller to write into the job's status (job.reconcile.refused.after_refusals).

Each call runs in a copy of the context of the pass that submitted it
(contextvars), so its log lines carry the pass's reconcile id (runtime.logs).
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Executor as Pool
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, ParamSpec, Protocol, TypeVar

from dlk8s.job.actions import (
    Action,
    Create,
    Delete,
    DeleteJob,
    Event,
    Patch,
    ReplaceStatus,
    merge_events,
)
from dlk8s.job.objects import as_list, dig
from dlk8s.job.reconcile.refused import CREATE, DELETE, Refusal
from dlk8s.job.vocabulary import EventType, Reason
from dlk8s.runtime.apiresources import OWNED_RESOURCES
from dlk8s.runtime.errors import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    NamespaceTerminatingError,
    NotFoundError,
    TerminalError,
    is_refusal,
)
from dlk8s.runtime.events import EventApi, EventRecorder
from dlk8s.runtime.expectations import Change, Expectations

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

GROUP_OF_KIND = {res.kind: group for group, res in OWNED_RESOURCES.items()}

# Jobs remembered as being in a namespace being deleted: far more than are
# torn down at once; one forgotten only tries one create again.
MAX_DOOMED: Final = 4096
# Random bytes of each value a Secret is created with (Create.fresh): 256 bits.
FRESH_BYTES: Final = 32


class NamespaceDeletedError(TerminalError):
    """A create refused, or not tried, because the job's namespace is being deleted."""


class ChildApi(Protocol):
    """What create_child needs of runtime.client.Kube."""

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any]: ...


class Api(ChildApi, EventApi, Protocol):
    """What carrying out actions needs of runtime.client.Kube."""

    def delete(
        self, api_version: str, kind: str, namespace: str | None, name: str, uid: str | None = None
    ) -> None: ...

    def patch(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]: ...

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]: ...


class ChildNotCreatedError(Exception):
    """A create that neither made the child nor found the job's own."""


class NameTakenError(ChildNotCreatedError):
    """A child's name is held by an object the job does not control."""


@dataclass
class Outcome:
    """What the changes of one pass came to."""

    # Everything that went wrong; the first fails the pass (retried with back-off).
    failures: list[Exception] = field(default_factory=list)
    # What the API server refused on its merits, in its words (runtime.errors.is_refusal).
    refusals: list[Refusal] = field(default_factory=list)
    # Manifests of creates that did not happen, refused or failed otherwise.
    not_created: list[dict[str, Any]] = field(default_factory=list)
    # Pods the pass created that were there already, the job's own: the
    # caches were behind the API server when the pass decided, and it may
    # have counted them as lost (list.append is atomic: no lock).
    existed: list[str] = field(default_factory=list)
    # Creates of any kind that found their object there: no "Created" event.
    found: list[Create] = field(default_factory=list)


class Executor:
    def __init__(
        self,
        api: Api,
        expectations: Expectations,
        pool: Pool,
        clock: Callable[[], datetime],
    ) -> None:
        self.api = api  # the API calls the actions come to
        self.expectations = expectations  # what the caches will show of each create and delete
        self._pool = InContext(pool)  # the calls of one pass in parallel, bounded
        self.events = EventRecorder(api, clock)  # posts events; counts a repeat on the first
        # Jobs (by uid) whose namespace refused a create as being deleted:
        # they create nothing more. Oldest first, at most MAX_DOOMED; the
        # lock because the workers pass different jobs at once.
        self._doomed: dict[str, None] = {}
        self._doomed_lock = threading.Lock()

    def execute(self, job: dict[str, Any], actions: list[Action]) -> Outcome:
        """Carry out one pass's actions; then post the events of what was
        done, merged into one per reason.

        Every delete, patch and status write is tried, all in parallel, and
        so is every create, but in batches that double (1, 2, 4, ...; the
        slow start of Kubernetes' Job and ReplicaSet controllers): a
        namespace being deleted refuses every create after the first, and
        its teardown deletes the job's pods one by one, each a new pass. So
        the first such refusal ends the creates of the pass, and the job
        creates nothing any more (the namespace never comes back; a new one
        of that name holds new jobs). One refusal per job, where a 300-pod
        job made hundreds. A create not tried counts as not created."""
        changes = [a for a in actions if not isinstance(a, Event)]
        uid = job["metadata"]["uid"]
        self.expectations.expect(uid, {c for a in changes if (c := expected_change(a))})
        outcome = Outcome()
        done: list[Event] = [a for a in actions if isinstance(a, Event)]
        creates = [a for a in changes if isinstance(a, Create)]
        others = [a for a in changes if not isinstance(a, Create)]
        apply = self._apply_safely(job, outcome)
        pending = [self._pool.submit(apply, a) for a in others]
        results: list[tuple[Action, Exception | None]] = []
        results += zip(creates, self._create_slowly(uid, apply, creates), strict=True)
        results += zip(others, (f.result() for f in pending), strict=True)
        for action, err in results:
            if err is not None:
                _note_failure(outcome, action, err)
            elif isinstance(action, (Create, Delete, ReplaceStatus)) and action.event is not None:
                done += [] if any(action is f for f in outcome.found) else [action.event]
        self.send_events(job, done)
        return outcome

    def _create_slowly(
        self, uid: str, apply: Callable[[Action], Exception | None], creates: list[Create]
    ) -> list[Exception | None]:
        """Each create's error (None: created), in batches that double until
        the namespace turns out to be going away; the rest are not tried."""
        errors: list[Exception | None] = []
        batch = 1
        while len(errors) < len(creates) and not self._is_doomed(uid):
            start = len(errors)
            errors += self._pool.map(apply, creates[start : start + batch])
            if any(isinstance(err, NamespaceDeletedError) for err in errors[start:]):
                self._doom(uid)
            batch *= 2
        skipped = creates[len(errors) :]
        for action in skipped:
            if change := expected_change(action):
                self.expectations.cancel(uid, change)
        return errors + [NamespaceDeletedError("its namespace is being deleted")] * len(skipped)

    def _is_doomed(self, uid: str) -> bool:
        with self._doomed_lock:
            return uid in self._doomed

    def _doom(self, uid: str) -> None:
        with self._doomed_lock:
            self._doomed[uid] = None
            while len(self._doomed) > MAX_DOOMED:
                del self._doomed[next(iter(self._doomed))]

    def send_events(self, job: dict[str, Any], events: list[Event]) -> None:
        """Post in the background, merged into one per (type, reason, object)."""
        for event in merge_events(events):
            self._pool.submit(self.send_event, job, event)

    def send_event(self, job: dict[str, Any], event: Event) -> None:
        self.events.record(job, event)  # best effort: it never raises

    def _apply_safely(
        self, job: dict[str, Any], outcome: Outcome
    ) -> Callable[[Action], Exception | None]:
        def apply(action: Action) -> Exception | None:
            change = expected_change(action)
            changed = False
            try:
                changed = self._apply(job, action)
                if isinstance(action, Create) and not changed:
                    outcome.found.append(action)
                    if action.obj["kind"] == "Pod":
                        outcome.existed.append(action.obj["metadata"]["name"])
            except NamespaceTerminatingError as err:
                # The namespace, and the job with it, are going away.
                namespace = job["metadata"]["namespace"]
                return NamespaceDeletedError(f"namespace {namespace} is being deleted: {err}")
            except Exception as err:
                return err
            finally:
                if change and not changed:
                    self.expectations.cancel(job["metadata"]["uid"], change)
            return None

        return apply

    def _apply(self, job: dict[str, Any], action: Action) -> bool:
        """Carry out one action; whether it changed something the caches will show."""
        if isinstance(action, Create):
            if action.fresh:
                return create_fresh_secret(self.api, action.obj, action.fresh)
            return self._create(job, action.obj)
        if isinstance(action, Delete):
            if action.first is not None:
                # Gone or changed since the pass read it, deleted all the same:
                # being deleted, the pod is let go by the pass its event runs.
                self._patch(action.first)
            return self._delete(
                action.api_version, action.kind, action.namespace, action.name, action.uid
            )
        if isinstance(action, Patch):
            self._patch(action)
        elif isinstance(action, ReplaceStatus):
            self.api.replace_status(action.obj)
            return True
        elif isinstance(action, DeleteJob):
            meta = job["metadata"]
            self._delete(
                job["apiVersion"], job["kind"], meta["namespace"], meta["name"], meta["uid"]
            )
        return False

    def _patch(self, action: Patch) -> None:
        """Not applied when the object is gone, or (a uid or resourceVersion
        in the patch) changed since, or a newer one of that name."""
        with suppress(NotFoundError, ConflictError):
            self.api.patch(
                action.api_version, action.kind, action.namespace, action.name, action.patch
            )

    def _create(self, job: dict[str, Any], obj: dict[str, Any]) -> bool:
        try:
            return create_child(self.api, job["metadata"]["uid"], obj)
        except NameTakenError as err:
            self.send_event(job, Event(EventType.WARNING, Reason.NAME_TAKEN, str(err)))
            raise

    def _delete(
        self, api_version: str, kind: str, namespace: str, name: str, uid: str | None
    ) -> bool:
        """Whether it was deleted now: not when gone already, or (Conflict on the
        uid precondition) when the name now belongs to a newer object."""
        try:
            self.api.delete(api_version, kind, namespace, name, uid)
        except (NotFoundError, ConflictError):
            return False
        return True


class InContext(Pool):
    """A pool whose calls run in a copy of the context they were submitted
    from (map submits each call: each gets a copy of its own)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool  # the threads; shut down by its owner

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        context = contextvars.copy_context()
        return self._pool.submit(lambda: context.run(fn, *args, **kwargs))


def create_child(api: ChildApi, job_uid: str, obj: dict[str, Any]) -> bool:
    """Create one child of a job: True if created now, False if the job's own
    child of that name already exists (a cache behind the API server).

    Anything else fails the pass: the status a pass writes counts the pods
    it created, and the next pass would count one that is not there as lost.
    """
    try:
        api.create(obj)
        return True
    except AlreadyExistsError:
        pass
    meta = obj["metadata"]
    what = f"{obj['kind']} {meta['name']}"
    try:
        found = api.get(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
    except NotFoundError:
        raise ChildNotCreatedError(
            f"{what} already existed but was deleted since; retrying"
        ) from None
    if not controlled_by(found, job_uid):
        raise NameTakenError(
            f"{what} already exists and is not controlled by this job; "
            "delete or rename it so the job can create its own"
        )
    return False


def create_fresh_secret(api: ChildApi, obj: dict[str, Any], keys: tuple[str, ...]) -> bool:
    """Create a Secret with a fresh random value under each of `keys`: True
    if created now, False if one of that name is there. That one is not read
    (the operator may create Secrets, not read them): its pods use it as it
    is, and only someone who may write Secrets in the namespace could have
    put it there."""
    made = {key: secrets.token_urlsafe(FRESH_BYTES) for key in keys}
    try:
        api.create(obj | {"stringData": made})
    except AlreadyExistsError:
        return False
    return True


def controlled_by(obj: object, uid: str) -> bool:
    """Whether `obj`'s controller ownerReference names `uid`: a child whose
    reference names another uid is never the job's, whatever its labels say."""
    return any(
        isinstance(ref, dict) and ref.get("controller") is True and ref.get("uid") == uid
        for ref in as_list(dig(obj, "metadata", "ownerReferences"))
    )


def expected_change(action: Action) -> Change | None:
    """How a create, a delete or a status write of a watched child will show
    up in the caches."""
    if isinstance(action, Create):
        group = GROUP_OF_KIND.get(action.obj.get("kind", ""))
        return (group, action.obj["metadata"]["name"]) if group else None
    if isinstance(action, Delete) and action.uid and action.kind in GROUP_OF_KIND:
        return ("uid", action.uid)
    if isinstance(action, ReplaceStatus):
        # A Workload's status we wrote: the next pass waits for its event,
        # or it would write the same again on the stale copy (a conflict).
        group = GROUP_OF_KIND.get(action.obj.get("kind", ""))
        return (group, action.obj["metadata"]["name"]) if group else None
    return None


def _note_failure(outcome: Outcome, action: Action, err: Exception) -> None:
    outcome.failures.append(err)
    if isinstance(action, Create):
        outcome.not_created.append(action.obj)
        if is_refusal(err):
            outcome.refusals.append(Refusal(CREATE, action.obj, _message(err)))
    elif isinstance(action, Delete) and is_refusal(err):
        what = {"kind": action.kind, "metadata": {"name": action.name}}
        outcome.refusals.append(Refusal(DELETE, what, _message(err)))


def _message(err: Exception) -> str:
    """The API server's own words, as users see them from kubectl."""
    if isinstance(err, ApiError) and err.body.get("message"):
        return str(err.body["message"])
    return str(err)
