"""The reconcile engine shared by every kind.

reconcile(job, observed, config, now) is a pure function from a job and its
observed children to the actions that move the world towards the job's spec
and the complete status that describes it (metacontroller's
sync(parent, children) -> (status, children), as plain data). The I/O side
executes the actions and writes the status only when it differs from the
job's, so a job at rest costs no API call: reconciling an unchanged world
returns no actions and an identical status.

A job goes through one of four paths, one module each:
- finished (its status says Succeeded or Failed): only cleanup per
  cleanPodPolicy and the TTL. A finished job never gets a pod created again.
- invalid spec: marked Failed with reason InvalidSpec, then as finished.
- suspended: every pod deleted (Services and extras kept); see suspended.py.
- active: recreate what failed or vanished, create what is missing, decide
  the outcome from the deciding replica, deadline and backoffLimit.

What every path shares lives in view.py (the job as read, the result),
status.py (building the status) and restarts.py (counting restarts).

after_refusals(job, observed, status, not_created, refusals, now) is the
status of a pass whose creates or deletes the API server refused, and the
events that quote it (refused.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import datetime

from dlk8s.job import naming
from dlk8s.job.actions import Action, Event
from dlk8s.job.api import (
    EventType,
    JobContext,
    Kind,
    Obj,
    Observed,
    Slot,
    as_dict,
    dig,
    to_utc,
)
from dlk8s.job.children import controlled_by
from dlk8s.job.config import ControllerConfig
from dlk8s.job.reconcile.active import active
from dlk8s.job.reconcile.finished import finish, is_finished
from dlk8s.job.reconcile.invalid import invalid_verdict, spec_problems
from dlk8s.job.reconcile.refused import (
    Refusal,
    refusal_events,
    refused_status,
    unknown_field_problems,
)
from dlk8s.job.reconcile.status import with_pod_totals
from dlk8s.job.reconcile.view import JobView, Result, read_job

__all__ = ["Observed", "Refusal", "Result", "after_refusals", "reconcile"]


def reconcile(job: Obj, observed: Observed, config: ControllerConfig, now: datetime) -> Result:
    """Any input gives a Result: a spec the kinds cannot use fails the job as
    InvalidSpec. An exception from here is a bug in dlk8s, never the user's;
    the controller retries it with back-off and reports it (event, metric)."""
    return _reconcile(as_dict(job), observed, config, to_utc(now))


def _reconcile(raw: Obj, observed: Observed, config: ControllerConfig, now: datetime) -> Result:
    job = read_job(raw, now)
    if dig(raw, "metadata", "deletionTimestamp") is not None:
        return Result([], copy.deepcopy(job.prev), None)  # the garbage collector takes over
    return with_pod_totals(_path(job, observed, config))


def _path(job: JobView, observed: Observed, config: ControllerConfig) -> Result:
    """The one path the job is on (see the module docstring)."""
    owned = _owned(observed, job.uid)
    if is_finished(job):
        return finish(job, owned, None)
    problems = spec_problems(job)
    if problems or job.kind is None:
        return finish(job, owned, invalid_verdict(problems))
    return active(_context(job, job.kind, config), job, owned)


def after_refusals(
    job: Obj,
    observed: Observed,
    status: Obj,
    not_created: Sequence[Obj],
    refusals: Sequence[Refusal],
    now: datetime,
) -> Result:
    """The status and events of a pass that `reconcile` planned as `status`
    but whose `refusals` the API server refused, leaving `not_created`
    uncreated (refused or failed otherwise). Its actions are Events only:
    what else is to do, the next pass decides. Pure, like reconcile."""
    view = read_job(as_dict(job), to_utc(now))
    events: list[Action] = list(refusal_events(refusals))
    problems = unknown_field_problems(view, refusals)
    if not problems:
        return Result(events, refused_status(status, not_created, refusals, view.stamp), None)
    # The status says Failed at once; the finished path cleans up on the
    # pass that the status write brings.
    verdict = invalid_verdict(problems)
    failed = finish(view, _owned(observed, view.uid), verdict)
    events.append(Event(EventType.WARNING, verdict.reason, verdict.message))
    return Result(events, failed.status, None)


def _owned(observed: Observed, uid: str) -> Observed:
    def keep(items: Iterable[object] | None) -> tuple[Obj, ...]:
        return tuple(o for o in items or () if isinstance(o, dict) and controlled_by(o, uid))

    return Observed(
        pods=keep(getattr(observed, "pods", None)),
        services=keep(getattr(observed, "services", None)),
        configmaps=keep(getattr(observed, "configmaps", None)),
        deployments=keep(getattr(observed, "deployments", None)),
    )


def _context(job: JobView, kind: Kind, config: ControllerConfig) -> JobContext:
    replicas = kind.replicas(job.raw)
    slots = tuple(
        Slot(replica, index, naming.pod_name(job.name, replica.role, index))
        for replica in replicas
        for index in range(replica.replicas)
    )
    return JobContext(
        job=job.raw,
        kind=kind,
        name=job.name,
        namespace=job.namespace,
        uid=job.uid,
        runtime_id=job.runtime_id,
        generation=job.generation,
        run_policy=job.policy,
        replicas=replicas,
        slots=slots,
        config=config,
        deciding_role=kind.deciding_role(replicas),
    )
