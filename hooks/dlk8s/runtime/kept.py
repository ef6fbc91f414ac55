"""What the operator's caches keep of its jobs and of their children.

A pod as the API server sends it costs tens of kB as Python objects (49 kB
for a PaddleJob trainer: bench/results/elastic.md), most of it managedFields
and a spec nobody reads again; a job carries managedFields too. Thousands of
finished jobs keep their pods and Services (make bench-scale measures the
memory per thousand jobs), so the caches keep only what is read:

- of a child, what reconcile, the kinds and the executor read of a child
  they did not build: its identity, labels, annotations, owners, deletion,
  and of a pod its scheduling gates (a PaddleJob trainer's admission), its
  node (named when it is stuck terminating there), its
  phase, failure reason, the end of each container (or, while one cannot
  start, the kubelet's reason and message for that) and the conditions
  podFailurePolicy reads (DisruptionTarget always, the others once the pod
  has failed or a container has ended: a rule reads them only then): the
  fields of objects.Child, which this module keeps and nothing else. A new read of
  any other field must be added there: tests/unit/runtime/test_kept.py runs
  reconcile on whole and on kept children alike.
- of a job, everything but managedFields: the spec is validated on every
  pass, and a status write that leaves managedFields out keeps the server's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, cast

from dlk8s.job.objects import (
    Child,
    ChildSpec,
    ContainerStatus,
    Obj,
    ObjectMeta,
    PodCondition,
    PodStatus,
    as_dict,
    as_list,
    dig,
)
from dlk8s.job.outcomes import ON_ITS_WAY
from dlk8s.job.vocabulary import DISRUPTION_TARGET

# The fields kept are those the types declare.
_CHILD_METADATA: Final = tuple(ObjectMeta.__annotations__)
_POD_LISTS: Final = ("containerStatuses", "initContainerStatuses", "conditions")
_POD_STATUS: Final = tuple(k for k in PodStatus.__annotations__ if k not in _POD_LISTS)
_CONDITION: Final = tuple(PodCondition.__annotations__)


def kept_child(obj: Obj) -> Child:
    kept = cast(Child, _pick(obj, ("apiVersion", "kind")))
    kept["metadata"] = cast(ObjectMeta, _pick(as_dict(obj.get("metadata")), _CHILD_METADATA))
    spec = as_dict(obj.get("spec"))
    kept_spec = cast(ChildSpec, _pick(spec, ("nodeName",)))  # only a pod's has one
    if spec.get("schedulingGates"):
        kept_spec["schedulingGates"] = spec["schedulingGates"]
    if kept_spec:
        kept["spec"] = kept_spec
    status = obj.get("status")
    if isinstance(status, dict):  # only a pod's has anything read
        kept["status"] = _pod_status(status)
    return kept


def _pod_status(status: Obj) -> PodStatus:
    kept = cast(PodStatus, _pick(status, _POD_STATUS))
    containers = status.get("containerStatuses")
    if isinstance(containers, list):
        kept["containerStatuses"] = [_container(c) for c in containers if isinstance(c, dict)]
    # Of init containers only why one cannot start: how they ended is not read.
    waiting = [_waiting(c) for c in as_list(status.get("initContainerStatuses"))]
    if any("state" in c for c in waiting):
        kept["initContainerStatuses"] = waiting
    conditions = _conditions(status, kept.get("containerStatuses", []))
    if conditions:
        kept["conditions"] = conditions
    return kept


def _conditions(status: Obj, containers: list[ContainerStatus]) -> list[PodCondition]:
    """DisruptionTarget, and every condition of a pod that has failed or
    whose container has ended; without their times. A running pod's
    Ready and the like are most of a condition list and read by nothing."""
    ended = status.get("phase") == "Failed" or any(
        "terminated" in c.get("state", {}) for c in containers
    )
    return [
        cast(PodCondition, _pick(c, _CONDITION))
        for c in as_list(status.get("conditions"))
        if isinstance(c, dict) and (ended or c.get("type") == DISRUPTION_TARGET)
    ]


def _container(status: Obj) -> ContainerStatus:
    terminated = dig(status, "state", "terminated")
    if not isinstance(terminated, dict):
        return _waiting(status)
    kept = cast(ContainerStatus, _pick(status, ("name",)))
    kept["state"] = {"terminated": terminated}
    return kept


def _waiting(status: object) -> ContainerStatus:
    """A container's name, and why it cannot start while it cannot."""
    kept = cast(ContainerStatus, _pick(as_dict(status), ("name",)))
    waiting = as_dict(dig(status, "state", "waiting"))
    if waiting.get("reason") not in (None, *ON_ITS_WAY):
        kept["state"] = {"waiting": _pick(waiting, ("reason", "message"))}
    return kept


def _pick(obj: Obj, keys: Iterable[str]) -> Obj:
    return {k: obj[k] for k in keys if k in obj}


def kept_job(job: Obj) -> Obj:
    meta = job.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return job
    return job | {"metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
