"""The dispatched path: a job on a MultiKueue manager cluster, its
spec.managedBy kueue.x-k8s.io/multikueue (docs/multicluster.md).

Kueue's MultiKueue runs the job on a worker cluster: it copies the job
there once a worker reserves quota for its Workload, and copies the copy's
whole status back here. Left to dlk8s is the Workload (Kueue admits the
job here through it; its MultiKueue admission check picks the worker) and
the status while no worker holds the job: queued, evicted, suspended.
From the moment Kueue reserves quota for it here until that reservation
ends, the status is the worker's, and a write of ours would fight the copy.
No pod, Service or other child is made on the manager. Once the copied
status says the job has finished, only its TTL is left here.
"""

from __future__ import annotations

import copy

from dlk8s.job.actions import Action, Patch
from dlk8s.job.jobmodel import JobContext
from dlk8s.job.kueue.workload import Stage, WorkloadView
from dlk8s.job.objects import dig
from dlk8s.job.reconcile.changes import first_pods
from dlk8s.job.reconcile.finished import ttl
from dlk8s.job.reconcile.queued import Admission, Wait, decide, deletes, waiting
from dlk8s.job.reconcile.suspended import suspended
from dlk8s.job.reconcile.view import Result, with_pod_totals
from dlk8s.job.vocabulary import MANAGED_BY_MULTIKUEUE, Reason

NO_QUEUE = (
    f"spec.managedBy is {MANAGED_BY_MULTIKUEUE}, but the job names no LocalQueue"
    " (label kueue.x-k8s.io/queue-name): MultiKueue dispatches only the jobs Kueue admits"
)
NO_DISPATCH = (
    "Workload {} has quota here but no admission check: its ClusterQueue has no"
    " MultiKueue admission check, so no worker cluster runs the job, and spec.managedBy"
    f" {MANAGED_BY_MULTIKUEUE} keeps it from running here"
)
# How soon a pass looks again for the final status MultiKueue copies
# before it finishes the Workload (that status's event brings it sooner).
FINISHED_WAIT = 5.0


def dispatched(ctx: JobContext) -> Result:
    job = ctx.job
    if job.outcome is not None:
        # The worker's verdict, copied: nothing here to clean up.
        actions, requeue = ttl(job, job.completed_at or job.now)
        return Result(actions, copy.deepcopy(job.prev), requeue)
    if job.policy.suspend:
        # Its Workload goes, and with it (MultiKueue's doing) the worker's copy.
        return with_pod_totals(suspended(ctx, []), job)
    if job.queue is None:
        wait = Wait(Reason.QUEUE_UNAVAILABLE, NO_QUEUE, queued=False)
        return with_pod_totals(waiting(ctx, [], wait), job)
    decided = decide(ctx, lambda: first_pods(ctx))
    if isinstance(decided, Admission):
        return _held(ctx, decided.workload, decided.actions, None)
    q = decided.q
    if q is not None and q.stage == Stage.FINISHED:
        # MultiKueue finishes the Workload once it has copied the worker's
        # final status, which this pass may not see yet: nothing to redo.
        return Result([], copy.deepcopy(job.prev), FINISHED_WAIT)
    if q is None or not _on_a_worker(decided):
        return with_pod_totals(waiting(ctx, [], decided), job)
    actions = [*deletes(decided.doomed), *decided.actions]
    return _held(ctx, q.current, actions, decided.requeue_after)


def _held(
    ctx: JobContext, workload: WorkloadView | None, actions: list[Action], requeue: float | None
) -> Result:
    """Kueue holds quota for the job here: MultiKueue runs it on a worker,
    and the status is the worker's. Unless the ClusterQueue has no
    admission check: then there is no MultiKueue, nothing runs the job, and
    its status says so."""
    job = ctx.job
    if workload is None or not dig(workload.obj, "status", "admissionChecks"):
        name = workload.name if workload is not None else ""
        wait = Wait(Reason.QUEUE_UNAVAILABLE, NO_DISPATCH.format(name), queued=False)
        return with_pod_totals(waiting(ctx, [], wait), job)
    return Result(_here(ctx, actions), copy.deepcopy(job.prev), requeue)


def _on_a_worker(wait: Wait) -> bool:
    """Whether Kueue holds quota for the job here and has not taken it back:
    then a worker may hold its copy, and the status is that copy's."""
    return wait.q is not None and wait.q.reserved and wait.q.evicted is None


def _here(ctx: JobContext, actions: list[Action]) -> list[Action]:
    """What a pass does while a worker may run the job: its Workloads only.
    The job itself is not patched (an elastic role's admitted count is the
    worker's to write on its copy)."""
    return [a for a in actions if not (isinstance(a, Patch) and a.kind == ctx.kind.name)]
