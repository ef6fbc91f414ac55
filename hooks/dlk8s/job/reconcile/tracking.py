"""The finalizer that keeps a pod's end until its job's status holds it.

Without it, a pod that fails or is disrupted and is then deleted (by a
person, by pod GC, by a drain) while no operator runs is gone with its last
state: the operator, back, counts it as a pod that vanished and never reads
why it ended (a podFailurePolicy rule that fails the job, a disruption that
counts nothing). So every pod is created with TRACKING_FINALIZER, as the
batch Job controller creates its pods with batch.kubernetes.io/job-tracking,
and it comes off
- just before the pass deletes the pod: that pass has acted on its end
  (actions.release_of; a restart it counts is also on the replacement's
  restart-count annotation, should the status write be lost);
- after the status write of a pass that saw the pod being deleted by
  someone else (Result.after_status): what its end means is in the status;
- off every pod once the job has ended (nothing more is counted) or is
  being deleted, and, by the runtime (runtime.orphans), off the pods of a
  job that is gone or whose namespace is being deleted.
Unlike the Job controller's, the finalizer stays on a pod that ended while
its job runs: a worker that succeeded and is deleted while no operator
runs would otherwise be taken for lost and run again. The price: pods of a
running job deleted while no operator runs stay Terminating until one
returns (docs/troubleshooting.md says how to let them go).
"""

from __future__ import annotations

from collections.abc import Iterable

from dlk8s.job.actions import Action, Delete, Patch, release_of, tracked
from dlk8s.job.jobmodel import ChildView


def deleted_pods(actions: Iterable[Action]) -> set[str]:
    """The pods the actions delete."""
    return {a.name for a in actions if isinstance(a, Delete) and a.kind == "Pod"}


def releases(pods: Iterable[ChildView], every: bool = False) -> list[Patch]:
    """The finalizer off the pods being deleted (`every`: off all of them)."""
    return [release_of(p.obj) for p in pods if (every or p.terminating) and tracked(p.obj)]
