"""The reconcile engine shared by every kind.

reconcile(job, observed, config, now) is a pure function from a job and its
observed children to the actions that move the world towards the job's spec
and the complete status that describes it (metacontroller's
sync(parent, children) -> (status, children), as plain data). The I/O side
executes the actions and writes the status only when it differs from the
job's, so a job at rest costs no API call: reconciling an unchanged world
returns no actions and an identical status.

Who manages the job comes first (spec.managedBy, docs/multicluster.md):
another controller's job is left alone, and a job MultiKueue dispatches
from this cluster (the manager) to a worker takes the dispatched path
(dispatched.py): its Workload only, and its status while no worker holds
it. Every other job goes through one of four paths, one module each:
- finished (its status says Succeeded or Failed): only cleanup per
  cleanPodPolicy and the TTL. A finished job never gets a pod created again.
- invalid spec: marked Failed with reason InvalidSpec, then as finished.
- suspended: every pod deleted (Services and extras kept); see suspended.py.
- active: recreate what failed or vanished, create what is missing
  (changes.py), remember how pods ended (endings.py) and decide the outcome
  (verdicts.py: the success policy, podFailurePolicy, the deadline and
  backoffLimit).

What the paths share: view.py reads the job once (jobmodel.JobView, the
status fields every path carries included) and holds the Result, slots.py
pairs the spec's slots with their pods, restarts.py counts restarts. The
pods of every role by phase are summed last (view.with_pod_totals).

The children come in as the runtime's index files them (jobmodel.Observed):
only those the job controls, so they are not filtered again here.

after_refusals(result, not_created, refusals) is the status of a pass
whose creates or deletes the API server refused, and the events that quote
it (refused.py); it builds on the job as that pass read it (Result.job).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from dlk8s.job.config import ControllerConfig
from dlk8s.job.jobmodel import JobView, Observed
from dlk8s.job.objects import Obj, as_dict, to_utc
from dlk8s.job.reconcile.active import active, job_context
from dlk8s.job.reconcile.dispatched import dispatched
from dlk8s.job.reconcile.finished import finish
from dlk8s.job.reconcile.invalid import invalid_verdict, spec_problems
from dlk8s.job.reconcile.refused import Refusal
from dlk8s.job.reconcile.tracking import deleted_pods, releases
from dlk8s.job.reconcile.view import Result, read_job, with_pod_totals
from dlk8s.job.vocabulary import Handling, State

__all__ = ["Observed", "Refusal", "Result", "reconcile"]


def reconcile(job: Obj, observed: Observed, config: ControllerConfig, now: datetime) -> Result:
    """Any input gives a Result: a spec the kinds cannot use fails the job as
    InvalidSpec. An exception from here is a bug in dlk8s, never the user's;
    the controller retries it with back-off and reports it (event, metric)."""
    view = read_job(as_dict(job), observed, to_utc(now))
    if view.handling == Handling.FOREIGN:
        return Result([], copy.deepcopy(view.prev), None, view)  # another controller's
    if view.deleting:
        # The garbage collector takes over: nothing to keep the pods for.
        every = releases(view.children.pods, every=True)
        return Result(list(every), copy.deepcopy(view.prev), None, job=view)
    if view.handling == Handling.DISPATCHED and view.kind is not None and _dispatchable(view):
        result = replace(dispatched(job_context(view, view.kind, config)), job=view)
    else:
        result = with_pod_totals(_path(view, config), view)
    # The pass's status records how the pods being deleted ended: once it
    # is written, their finalizers come off; all of them once the job ended
    # (tracking.py).
    ended = as_dict(result.status).get("state") in (State.SUCCEEDED, State.FAILED)
    # A pod the pass deletes lets go just before (actions.release_of).
    deleted = deleted_pods(result.actions)
    kept = [p for p in view.children.pods if p.name not in deleted]
    return replace(result, after_status=[*result.after_status, *releases(kept, every=ended)])


def _dispatchable(job: JobView) -> bool:
    """A job MultiKueue runs on a worker cluster, unless its spec is unusable:
    that fails it here, before a worker sees it."""
    return job.outcome is not None or not spec_problems(job)


def _path(job: JobView, config: ControllerConfig) -> Result:
    """The one path the job is on (see the module docstring). The spec is
    validated on every pass, for a finished job too: its counts follow its
    replicas only while the spec is usable."""
    problems = spec_problems(job)
    if job.outcome is not None or problems or job.kind is None:
        # A finished job keeps its outcome; an unusable spec is this pass's verdict.
        verdict = None if job.outcome is not None else invalid_verdict(problems)
        return finish(job, verdict, not problems)
    return active(job_context(job, job.kind, config))
