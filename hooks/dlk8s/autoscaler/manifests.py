"""The planner's cluster read from API objects: nodes, pods and the elastic
jobs of both kinds the autoscaler sizes (PaddleJobs, elastic PyTorchJobs).

The adapter between the kinds and the kind-agnostic plan: each kind's job
becomes an ElasticJob (the role that scales, its bounds and count, the
scaled pod's requests and placement), and COUNTS names the annotations the
loop writes a kind's new count to.

Lenient: any object gives a value or None, never an exception, since the
informers call these on whatever the API server sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dlk8s.autoscaler.cluster import (
    ElasticJob,
    Node,
    Placement,
    Pod,
    Requirement,
    Taint,
    Toleration,
)
from dlk8s.job.computeresources import from_list, pod_requests
from dlk8s.job.kinds import pytorchjob
from dlk8s.job.kinds.elastic import CountAnnotations, is_admission_gate
from dlk8s.job.kinds.paddlejob import spec as paddle_spec
from dlk8s.job.kueue.multikueue import handling
from dlk8s.job.objects import as_dict, as_int, as_list, as_str, dig, string_map
from dlk8s.job.vocabulary import (
    LABEL_QUEUE_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    Handling,
    State,
)

# The annotations each kind's count is written to, by kind: the kinds the
# autoscaler sizes.
COUNTS: Final[Mapping[str, CountAnnotations]] = {
    paddle_spec.KIND: paddle_spec.TRAINERS,
    pytorchjob.KIND: pytorchjob.WORKERS,
}


def node_from_manifest(obj: object) -> Node | None:
    name = dig(obj, "metadata", "name")
    if not isinstance(name, str) or not name:
        return None
    taints = tuple(
        Taint(as_str(t.get("key")), as_str(t.get("value")), as_str(t.get("effect")))
        for t in as_list(dig(obj, "spec", "taints"))
        if isinstance(t, dict)
    )
    return Node(
        name=name,
        allocatable=from_list(dig(obj, "status", "allocatable")),
        labels=string_map(dig(obj, "metadata", "labels")),
        taints=taints,
        schedulable=dig(obj, "spec", "unschedulable") is not True,
    )


def pod_from_manifest(obj: object) -> Pod | None:
    """None for pods that have terminated (they hold no resources)."""
    meta = as_dict(dig(obj, "metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or dig(obj, "status", "phase") in ("Succeeded", "Failed"):
        return None
    spec = as_dict(dig(obj, "spec"))
    labels = as_dict(meta.get("labels"))
    index = as_str(labels.get(LABEL_REPLICA_INDEX))
    owner = next(
        (
            ref
            for ref in as_list(meta.get("ownerReferences"))
            if isinstance(ref, dict) and ref.get("controller") is True
        ),
        {},
    )
    return Pod(
        namespace=as_str(meta.get("namespace")),
        name=name,
        node=as_str(spec.get("nodeName")),
        requests=pod_requests(spec),
        terminating=meta.get("deletionTimestamp") is not None,
        owner_uid=as_str(owner.get("uid")),
        role=as_str(labels.get(LABEL_REPLICA_TYPE)),
        index=int(index) if index.isascii() and index.isdigit() and len(index) < 8 else -1,
        created=as_str(meta.get("creationTimestamp")),
        placement=placement_of(spec),
        gated=any(map(is_admission_gate, as_list(spec.get("schedulingGates")))),
    )


def placement_of(spec: Mapping[str, Any]) -> Placement:
    """The nodes a pod spec lets its pod go to (read leniently)."""
    return Placement(
        node_selector=string_map(spec.get("nodeSelector")),
        tolerations=_tolerations(spec),
        node_affinity=_required_node_affinity(spec),
    )


def _required_node_affinity(spec: Mapping[str, Any]) -> tuple[tuple[Requirement, ...], ...]:
    required = dig(
        spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return tuple(
        (*_requirements(term, "matchExpressions", False), *_requirements(term, "matchFields", True))
        for term in as_list(dig(required, "nodeSelectorTerms"))
    )


def _requirements(term: object, key: str, field: bool) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(
            as_str(r.get("key")),
            as_str(r.get("operator")),
            tuple(v for v in as_list(r.get("values")) if isinstance(v, str)),
            field,
        )
        for r in as_list(dig(term, key))
        if isinstance(r, dict)
    )


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            as_str(t.get("key")),
            as_str(t.get("operator"), "Equal"),
            as_str(t.get("value")),
            as_str(t.get("effect")),
        )
        for t in as_list(spec.get("tolerations"))
        if isinstance(t, dict)
    )


def job_from_manifest(obj: object) -> ElasticJob | None:
    """An elastic job the autoscaler may move; None for anything else (not
    elastic, unusable spec, finished or finishing, suspended or being
    deleted), and a job in a Kueue queue, which Kueue sizes when it admits
    it (docs/kueue.md), or a job dlk8s does not run here (spec.managedBy:
    docs/multicluster.md)."""
    if dig(obj, "metadata", "labels", LABEL_QUEUE_NAME) or handling(obj) != Handling.OURS:
        return None
    kind = dig(obj, "kind")
    if kind == paddle_spec.KIND and paddle_spec.is_elastic(obj):
        if dig(obj, "spec", "faultTolerant") is not True:
            return None
        bounds, count = paddle_spec.trainer_bounds(obj), paddle_spec.trainer_count(obj)
        # The trainer pod as the operator builds it: its template's placement and
        # sidecars, the main container sized by spec.trainer.resources.
        spec = paddle_spec.sizing_spec(obj, paddle_spec.TRAINER)
        role = paddle_spec.TRAINER
    elif kind == pytorchjob.KIND and pytorchjob.is_autoscaled(obj):
        bounds, count = pytorchjob.worker_bounds(obj), pytorchjob.worker_count(obj)
        spec, role = pytorchjob.worker_pod_spec(obj), pytorchjob.WORKER
    else:
        return None
    meta = as_dict(dig(obj, "metadata"))
    status = as_dict(dig(obj, "status"))
    uid, name = meta.get("uid"), meta.get("name")
    if (
        bounds is None
        or count is None
        or not isinstance(uid, str)
        or not isinstance(name, str)
        or meta.get("deletionTimestamp") is not None
        or status.get("state") in ("Succeeded", "Failed")
        or _finishing(status, role)
        or dig(obj, "spec", "runPolicy", "suspend") is True
    ):
        return None
    return ElasticJob(
        uid=uid,
        key=f"{as_str(meta.get('namespace'))}/{name}",
        min=bounds[0],
        max=bounds[1],
        trainers=count,
        trainer=pod_requests(spec),
        running=status.get("state") == "Running" and status.get("phase") == "Running",
        created=as_str(meta.get("creationTimestamp")),
        admitted=COUNTS[kind].requested(obj) is not None,
        placement=placement_of(spec),
        role=role.lower(),
        kind=kind,
    )


def _finishing(status: Mapping[str, Any], role: str) -> bool:
    """Some pod of the scaled role has exited 0: the job is ending. A
    PaddleJob's trainer does once its master's task queue is empty; a
    PyTorchJob's WORKER once torchrun's group has finished (every agent
    exits with it). Scaling it now would cut pods short or add ones with
    nothing to do, and its finished pods (gone from the pods the plan sees)
    are not pods waiting for room."""
    for entry in as_list(status.get("replicaStatuses")):
        if isinstance(entry, dict) and entry.get("replicaType") == role:
            return as_int(as_dict(entry.get("replicasStates")).get(State.SUCCEEDED), 0) > 0
    return False
