"""The finalizer that keeps a pod's end until its job's status holds it.

Without it, a pod that fails or is disrupted and is then deleted (by a
person, by pod GC, by a drain) while no operator runs is gone with its last
state: the operator, back, counts it as a pod that vanished and never reads
why it ended (a podFailurePolicy rule that fails the job, a disruption that
counts nothing). So every pod is created with TRACKING_FINALIZER (the batch
Job controller keeps batch.kubernetes.io/job-tracking on its pods for the
same reason), and a pod being deleted keeps it until a pass that saw it so
has written its job's status (Result.after_status): what its end means is
in the status by then, and the pod goes. A job being deleted has its pods'
finalizers removed at once; the runtime does the same for the pods of a
job that is gone (runtime.controller).
"""

from __future__ import annotations

from collections.abc import Iterable

from dlk8s.job.actions import Patch
from dlk8s.job.jobmodel import ChildView
from dlk8s.job.objects import Obj, as_dict, as_list, as_str, dig
from dlk8s.job.vocabulary import TRACKING_FINALIZER


def tracked(pod: Obj) -> bool:
    return TRACKING_FINALIZER in as_list(dig(pod, "metadata", "finalizers"))


def releases(pods: Iterable[ChildView], every: bool = False) -> list[Patch]:
    """The finalizer off the pods being deleted (`every`: off all of them)."""
    return [release(p.obj) for p in pods if (every or p.terminating) and tracked(p.obj)]


def release(pod: Obj) -> Patch:
    """A merge patch of the pod's finalizers without ours. Its resourceVersion
    makes it fail (Conflict) if another writer changed them meanwhile: the
    pod's event runs the pass again, which patches the newer list."""
    meta = as_dict(pod.get("metadata"))
    rest = [f for f in as_list(meta.get("finalizers")) if f != TRACKING_FINALIZER]
    patch: Obj = {"finalizers": rest or None}
    if isinstance(meta.get("resourceVersion"), str):
        patch["resourceVersion"] = meta["resourceVersion"]
    return Patch(
        "v1", "Pod", as_str(meta.get("namespace")), as_str(meta.get("name")), {"metadata": patch}
    )
