"""A queued job's Workload: the LocalQueue it waits in, what it asks Kueue
for (one podSet per replica type), and where it stands (assess: the stage,
the admission's placements, whether the spec outgrew it)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeGuard

from dlk8s.job.childnames import child_name, short_hash
from dlk8s.job.children import job_labels, manifest
from dlk8s.job.jobmodel import Children, ChildView, JobContext, Placement, QueueFacts
from dlk8s.job.objects import Obj, as_dict, as_list, dig, is_int, string_map
from dlk8s.job.vocabulary import (
    DEFAULT_QUEUE,
    KUEUE_API_VERSION,
    KUEUE_GROUP,
    LABEL_KUEUE_JOB_UID,
    LABEL_PODSET,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
)

WORKLOAD: Final = (KUEUE_API_VERSION, "Workload")

# Workload conditions (apis/kueue/v1beta2/workload_types.go).
QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
EVICTED: Final = "Evicted"
REQUEUED: Final = "Requeued"
PODS_READY: Final = "PodsReady"
FINISHED: Final = "Finished"
# Eviction reasons after which Kueue requeues the Workload at once; after
# the others it waits (a back-off, a reactivation): jobframework's rule.
REQUEUED_AT_ONCE: Final = ("Preempted", "NodeFailures")
# What Kueue's template keeps of a container: what its quota counts.
_CONTAINER_FIELDS: Final = ("name", "image", "resources", "restartPolicy")
# What Kueue's template keeps of a pod spec: what its quota and its flavor
# assignment read (requests, overhead, where the pods may run, priority).
_POD_FIELDS: Final = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "priorityClassName",
    "runtimeClassName",
    "overhead",
)
MAX_MESSAGE: Final = 32768  # metav1.Condition's message limit


@dataclass(frozen=True)
class WorkloadView:
    """A job's Workload as one pass reads it."""

    obj: Obj
    name: str
    terminating: bool
    conditions: Mapping[str, Obj]  # by type
    admission: Obj  # status.admission, {} when none

    def true(self, type_: str) -> bool:
        return bool(self.conditions.get(type_, {}).get("status") == "True")

    def message(self, type_: str) -> str:
        return str(self.conditions.get(type_, {}).get("message") or "")

    def reason(self, type_: str) -> str:
        return str(self.conditions.get(type_, {}).get("reason") or "")

    @property
    def cluster_queue(self) -> str:
        return str(self.admission.get("clusterQueue") or "")

    @property
    def queue(self) -> str:
        """The LocalQueue it waits in (spec.queueName)."""
        queue = dig(self.obj, "spec", "queueName")
        return queue if isinstance(queue, str) else ""


class Stage:
    """Where a queued job's Workload stands, in the order a pass tests it."""

    NONE: Final = "none"  # none yet: to be created
    FINISHED: Final = "finished"  # Kueue finished it while the job runs on
    EVICTED: Final = "evicted"  # taken back: pods to delete, then the quota to free
    ADMITTED: Final = "admitted"  # the pods may run
    PENDING: Final = "pending"  # waiting for quota (or released after an eviction)


@dataclass(frozen=True)
class Queueing:
    """A queued job's Workloads as one pass sees them, read in one call
    (assess): what the queued path decides on, as plain fields."""

    name: str  # the job's Workload
    stage: str  # Stage
    current: WorkloadView | None  # the Workload of that name, not being deleted
    stale: tuple[Obj, ...]  # the job's other Workloads, to delete
    # The Workload the job asks for now: built while it may be created or
    # changed (none yet, or pending) and while admitted (to see it outgrown).
    wanted: Obj | None
    missing_priority: str | None  # a WorkloadPriorityClass named but not found
    differs: bool  # pending, and asking for other pods than `wanted`
    # Admitted, and the job now asks for other pods than it was admitted
    # with (its spec changed since): Kueue's own jobs are requeued then.
    outgrown: bool
    # How many pods of each role the admission lets in, and where; None
    # unless admitted, or while a flavor it names is not in the cache.
    places: Mapping[str, Placement] | None
    cluster_queue: str  # the admission's
    message: str  # Kueue's words at this stage
    evicted: tuple[str, str] | None  # Kueue's reason and message while Evicted is True
    reserved: bool  # QuotaReserved is True


def assess(
    ctx: JobContext, queue: str, pods: Callable[[], Mapping[str, Obj]], facts: QueueFacts
) -> Queueing:
    """Where the job's Workload stands; `pods` builds the first pod of each
    role, asked for only when the Workload may be created or changed."""
    name = ctx.job.prebuilt or workload_name(ctx)
    views = [read_workload(child) for child in ctx.job.children.workloads]
    current = next((w for w in views if w.name == name and not w.terminating), None)
    stale = tuple(w.obj for w in views if w is not current and not w.terminating)
    stage, message, places = Stage.NONE, "", None
    if current is not None:
        stage, message = _stage(current, bool(ctx.job.children.pods))
        if stage == Stage.ADMITTED:
            by_set = placements(current, facts)
            places = None if by_set is None else _by_role(ctx, by_set)
    building = (Stage.NONE, Stage.PENDING, Stage.ADMITTED)
    wanted = workload_for(ctx, queue, pods(), facts) if stage in building else None
    evicted = (
        (current.reason(EVICTED), current.message(EVICTED))
        if current is not None and current.true(EVICTED)
        else None
    )
    return Queueing(
        name=name,
        stage=stage,
        current=current,
        stale=stale,
        wanted=wanted,
        missing_priority=missing_priority(ctx, facts),
        differs=wanted is not None
        and _may_change(current, stage)
        and pod_sets_differ(current, wanted),
        outgrown=wanted is not None
        and current is not None
        and stage == Stage.ADMITTED
        and pod_sets_differ(current, wanted),
        places=places,
        cluster_queue=current.cluster_queue if current else "",
        message=message,
        evicted=evicted,
        reserved=current is not None and current.true(QUOTA_RESERVED),
    )


def _stage(workload: WorkloadView, has_pods: bool) -> tuple[str, str]:
    """The stage of an existing Workload, and Kueue's words for it. Evicted
    comes before Admitted: Kueue leaves both True until the integration
    has given the quota back (KUEUE.md, pitfall 1)."""
    if workload.true(FINISHED):
        return Stage.FINISHED, workload.message(FINISHED)
    if workload.true(EVICTED) and (workload.true(QUOTA_RESERVED) or has_pods):
        return Stage.EVICTED, workload.message(EVICTED)
    if workload.true(ADMITTED) and workload.true(QUOTA_RESERVED):
        return Stage.ADMITTED, workload.message(ADMITTED)
    return Stage.PENDING, workload.message(QUOTA_RESERVED)


def _may_change(workload: WorkloadView | None, stage: str) -> TypeGuard[WorkloadView]:
    """Kueue's webhook refuses a podSet change once quota is reserved."""
    return workload is not None and stage == Stage.PENDING and not workload.true(QUOTA_RESERVED)


def _by_role(ctx: JobContext, by_set: Mapping[str, Placement]) -> dict[str, Placement]:
    return {
        r.role: by_set[pod_set_name(r.role)] for r in ctx.replicas if pod_set_name(r.role) in by_set
    }


def read_workload(child: ChildView) -> WorkloadView:
    status = as_dict(child.obj.get("status"))
    conditions = {
        c["type"]: c
        for c in as_list(status.get("conditions"))
        if isinstance(c, dict) and isinstance(c.get("type"), str)
    }
    return WorkloadView(
        child.obj, child.name, child.terminating, conditions, as_dict(status.get("admission"))
    )


def held_queue(workloads: Sequence[ChildView], label: str | None, has_pods: bool) -> str | None:
    """The LocalQueue a job cannot leave, if any: its Workload's. A job that
    has a Workload stays in Kueue whatever its queue label says since: its
    label may move it to another queue only while Kueue holds no quota for
    it and it has no pod (Kueue's rule for its own jobs), and a label taken
    off never takes it out (that would run it, or leave its pods where
    Kueue's preemption cannot reach them)."""
    for child in workloads:
        workload = read_workload(child)
        if workload.terminating or workload.true(FINISHED) or not workload.queue:
            continue
        moved = label is not None and not has_pods and not workload.true(QUOTA_RESERVED)
        return label if moved else workload.queue
    return None


def workload_name(ctx: JobContext) -> str:
    """One name per job (its kind, name and uid): a namesake job made after
    this one was deleted gets a Workload of another name. (A job MultiKueue
    copied to a worker cluster runs under the one named by its label.)"""
    return child_name(f"{ctx.kind.name.lower()}-{ctx.job.name}", short_hash(ctx.job.uid, 5))


def pod_set_name(role: str) -> str:
    return role.lower()


def workload_for(ctx: JobContext, queue: str, pods: Mapping[str, Obj], facts: QueueFacts) -> Obj:
    """The Workload of a queued job: one podSet per replica type, each
    asking for what `pods` (the first pod of each role, as it will be
    created) asks for."""
    elastic = ctx.kind.elastic(ctx.job.raw)
    pod_sets = []
    for replica in ctx.replicas:
        if replica.replicas <= 0 or replica.role not in pods:
            continue
        pod_set: Obj = {
            "name": pod_set_name(replica.role),
            "count": replica.replicas,
            "template": pod_set_template(pods[replica.role]),
        }
        if elastic is not None and elastic.role == replica.role:
            # Kueue admits as many as its quota allows, down to the minimum.
            pod_set |= {"count": elastic.maximum, "minCount": elastic.minimum}
        pod_sets.append(pod_set)
    spec: Obj = {"queueName": queue, "podSets": pod_sets, "active": True}
    spec |= priority_of(ctx, pods, facts)
    labels = job_labels(ctx) | {LABEL_KUEUE_JOB_UID: ctx.job.uid}
    return manifest(WORKLOAD, ctx, workload_name(ctx), labels, {"spec": spec})


def pod_set_template(pod: Obj) -> Obj:
    """What Kueue reads of a pod: its containers' requests and limits (an
    init container's too; a sidecar's by its restartPolicy), and where and
    at what priority it may run. The rest (env, volumes, commands) is left
    out: Kueue ignores it, and a duplicate env name would fail the create."""
    spec = as_dict(pod.get("spec"))
    out: Obj = {}
    for group in ("initContainers", "containers"):
        containers = [
            {k: copy.deepcopy(c[k]) for k in _CONTAINER_FIELDS if k in c}
            for c in as_list(spec.get(group))
            if isinstance(c, dict)
        ]
        if containers:
            out[group] = containers
    out |= {k: copy.deepcopy(spec[k]) for k in _POD_FIELDS if spec.get(k)}
    labels = string_map(dig(pod, "metadata", "labels"))
    return {"metadata": {"labels": labels}, "spec": out}


def priority_of(ctx: JobContext, pods: Mapping[str, Obj], facts: QueueFacts) -> Obj:
    """The Workload's priority, found as Kueue finds a job's: the job's
    kueue.x-k8s.io/priority-class (a WorkloadPriorityClass), else its pods'
    PriorityClass, else the cluster's default PriorityClass, else none."""
    wanted = dig(ctx.job.raw, "metadata", "labels", LABEL_PRIORITY_CLASS)
    if isinstance(wanted, str) and wanted in facts.workload_priorities:
        ref = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": wanted}
        return {"priorityClassRef": ref, "priority": facts.workload_priorities[wanted]}
    names = [dig(pod, "spec", "priorityClassName") for pod in pods.values()]
    name = next((n for n in names if isinstance(n, str) and n), facts.default_pod_priority)
    if name and name in facts.pod_priorities:
        ref = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}
        return {"priorityClassRef": ref, "priority": facts.pod_priorities[name]}
    return {}


def missing_priority(ctx: JobContext, facts: QueueFacts) -> str | None:
    """The WorkloadPriorityClass the job names but the cluster lacks."""
    wanted = dig(ctx.job.raw, "metadata", "labels", LABEL_PRIORITY_CLASS)
    if isinstance(wanted, str) and wanted and wanted not in facts.workload_priorities:
        return wanted
    return None


def pod_sets_differ(workload: WorkloadView, wanted: Obj) -> bool:
    """Whether the Workload asks for other pods than the job would create:
    other counts or requests (what the API server defaults in a template
    does not count, or every pass would rewrite it)."""
    return _asks(dig(workload.obj, "spec", "podSets")) != _asks(dig(wanted, "spec", "podSets"))


def _asks(pod_sets: object) -> list[tuple[object, ...]]:
    return [
        (
            ps.get("name"),
            ps.get("count", 1),
            ps.get("minCount"),
            [
                (c.get("name"), c.get("resources") or {})
                for group in ("initContainers", "containers")
                for c in as_list(dig(ps, "template", "spec", group))
                if isinstance(c, dict)
            ],
        )
        for ps in as_list(pod_sets)
        if isinstance(ps, dict)
    ]


def placements(workload: WorkloadView, facts: QueueFacts) -> dict[str, Placement] | None:
    """Where and how many pods of each role the admission lets in, by pod
    set name; None while a flavor it names is not in the cache yet."""
    updates = _pod_set_updates(workload)
    out: dict[str, Placement] = {}
    for assignment in as_list(workload.admission.get("podSetAssignments")):
        if not isinstance(assignment, dict) or not isinstance(assignment.get("name"), str):
            continue
        selector: dict[str, str] = {}
        tolerations: list[Obj] = []
        for flavor_name in string_map(assignment.get("flavors")).values():
            flavor = facts.flavors.get(flavor_name)
            if flavor is None:
                return None
            selector |= string_map(dig(flavor, "spec", "nodeLabels"))
            tolerations += [
                t for t in as_list(dig(flavor, "spec", "tolerations")) if t not in tolerations
            ]
        name = assignment["name"]
        update = updates.get(name, {})
        selector |= string_map(update.get("nodeSelector"))
        tolerations += [t for t in as_list(update.get("tolerations")) if t not in tolerations]
        count = assignment.get("count")
        out[name] = Placement(
            count=count if is_int(count) and count >= 0 else 0,
            node_selector=selector,
            tolerations=tuple(tolerations),
            labels=string_map(update.get("labels")) | {LABEL_PODSET: name},
            annotations=string_map(update.get("annotations")),
        )
    return out


def _pod_set_updates(workload: WorkloadView) -> dict[str, Obj]:
    """What the admission checks add to each pod set's pods, merged."""
    merged: dict[str, Obj] = {}
    for check in as_list(dig(workload.obj, "status", "admissionChecks")):
        for update in as_list(dig(check, "podSetUpdates")):
            if isinstance(update, dict) and isinstance(update.get("name"), str):
                into = merged.setdefault(update["name"], {})
                for key in ("labels", "annotations", "nodeSelector"):
                    into[key] = string_map(into.get(key)) | string_map(update.get(key))
                into["tolerations"] = as_list(into.get("tolerations")) + as_list(
                    update.get("tolerations")
                )
    return merged


def place(pod: Obj, placement: Placement) -> Obj:
    """A pod of an admitted job where its admission puts it."""
    meta, spec = pod["metadata"], pod["spec"]
    meta["labels"] = dict(meta.get("labels") or {}) | dict(placement.labels)
    if placement.annotations:
        meta["annotations"] = dict(meta.get("annotations") or {}) | dict(placement.annotations)
    if placement.node_selector:
        spec["nodeSelector"] = dict(spec.get("nodeSelector") or {}) | dict(placement.node_selector)
    if placement.tolerations:
        have = as_list(spec.get("tolerations"))
        spec["tolerations"] = have + [t for t in placement.tolerations if t not in have]
    return pod


def queue_label(meta: Obj) -> str | None:
    """The queue its kueue.x-k8s.io/queue-name label names, if any."""
    label = dig(meta, "labels", LABEL_QUEUE_NAME)
    return label if isinstance(label, str) and label else None


def queue_of(meta: Obj, facts: QueueFacts | None, children: Children) -> str | None:
    """The LocalQueue a job waits in: the one its Workload holds it in
    (held_queue), else its label's, else "default" when its
    namespace has one and the operator integrates with Kueue."""
    label = queue_label(meta)
    held = held_queue(children.workloads, label, bool(children.pods))
    if held is not None:
        return held
    if label is not None:
        return label
    if facts is not None and not facts.problem and meta.get("namespace") in facts.default_queues:
        return DEFAULT_QUEUE
    return None
