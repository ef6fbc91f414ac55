"""What the reconcile engine and the kind modules share about a job.

- Kind: what makes one job kind different; everything else is shared.
- RunPolicy, Replica, Slot: the spec as the engine uses it.
- Observed: the children a job controls, as the caches show them;
  Children, the same read once (ChildView).
- JobView: the one view of a job in a pass, read once and leniently (any
  object gives one), so that no path digs in the object again; JobContext
  holds it with what a valid spec makes of it (replicas, slots), for the
  paths and the kinds that build children.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TypeVar, cast

from dlk8s.job.actions import Action
from dlk8s.job.config import ControllerConfig
from dlk8s.job.failurepolicy import Rule
from dlk8s.job.objects import Condition, Obj
from dlk8s.job.vocabulary import CleanPodPolicy, Handling, RestartPolicy, SuccessPolicy

T = TypeVar("T")


# spec.runPolicy.backoffLimit when unset (the CRDs default it): the Job
# controller's. A job recreates a failed pod at most this many times, so a
# container that can never start ends the job within ten minutes of back-off
# instead of being recreated for ever.
DEFAULT_BACKOFF_LIMIT: Final = 6


@dataclass(frozen=True)
class RunPolicy:
    """spec.runPolicy, each unusable field at its default (reconcile.view reads it)."""

    clean_pod_policy: str = CleanPodPolicy.RUNNING  # what goes once the job has finished
    ttl_seconds_after_finished: int | None = None  # None: the job is never deleted
    active_deadline_seconds: int | None = None  # None: no deadline
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    suspend: bool = False  # True: every pod is deleted until it is False again
    # When the deciding replica's success is the job's (vocabulary.SuccessPolicy).
    success_policy: str = SuccessPolicy.NO_FAILED_REPLICAS
    # podFailurePolicy's rules, tried before the defaults (failurepolicy.judge).
    failure_rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Replica:
    """One replica type of a job: `replicas` pods built from `template`."""

    role: str  # as written in the spec, e.g. "WORKER"
    replicas: int  # how many pods the spec asks for
    port: int  # of its Services and of its main container
    template: Obj  # the pod template as the spec writes it; never modified
    restart_policy: str = RestartPolicy.EXIT_CODE  # when a pod is recreated (outcomes.decide)


@dataclass(frozen=True)
class Slot:
    """One pod of a job: a replica type and an index, with its fixed name."""

    replica: Replica
    index: int  # 0 .. replica.replicas - 1
    name: str  # of its pod and of its Service (childnames.pod_name)

    @property
    def role(self) -> str:
        return self.replica.role


@dataclass(frozen=True)
class QueueFacts:
    """What the cluster says about Kueue that a queued job's pass reads
    (docs/kueue.md), from the runtime's caches of Kueue's objects.

    `problem` says why a job that names a queue cannot be queued here
    (the operator runs without --kueue, or Kueue's API is not served);
    "" when Kueue can admit it.
    """

    problem: str = ""
    # ResourceFlavors by name: their nodeLabels and tolerations go onto the
    # pods of an admitted job (the Workload names flavors only).
    flavors: Mapping[str, Obj] = field(default_factory=dict)
    # WorkloadPriorityClasses and PriorityClasses: name -> value.
    workload_priorities: Mapping[str, int] = field(default_factory=dict)
    pod_priorities: Mapping[str, int] = field(default_factory=dict)
    # The PriorityClass marked globalDefault, if there is one.
    default_pod_priority: str | None = None
    # Namespaces with a LocalQueue named "default": a job there is queued
    # even without the queue-name label, as Kueue queues its own kinds.
    default_queues: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Observed:
    """A job's existing children, as the I/O side found them.

    The contract with the caller: every one is a child the job controls
    (its controller ownerReference names the job's uid), as the runtime's
    ChildIndex files them; reconcile does not filter them again.
    """

    pods: Sequence[Obj] = ()
    services: Sequence[Obj] = ()
    configmaps: Sequence[Obj] = ()
    deployments: Sequence[Obj] = ()
    # The job's NetworkPolicies; always empty without --network-policies.
    networkpolicies: Sequence[Obj] = ()
    # The last state of pods deleted lately whose name no pod holds again
    # (the runtime's tombstones): a pod evicted between two passes is gone
    # before a pass sees it, and only its last state says it was disrupted.
    gone: Sequence[Obj] = ()
    # Kueue's Workloads the job controls (one, normally), and what the
    # cluster says of Kueue; None when the operator runs without --kueue.
    workloads: Sequence[Obj] = ()
    queueing: QueueFacts | None = None


@dataclass(frozen=True)
class Placement:
    """What Kueue's admission gives one replica type's pods: how many, and
    where (the assigned flavors' node labels and tolerations, and what
    admission checks add)."""

    count: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Obj, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChildView:
    """One child of a job, read once (reconcile.view.read_job)."""

    obj: Obj  # as the cache keeps it: what deletes and patches are made from
    name: str  # metadata.name, "" if unusable
    key: tuple[str, int] | None  # (role as labelled, index); None: the labels give none
    terminating: bool  # metadata.deletionTimestamp is set: it is going away


@dataclass(frozen=True)
class Children:
    """Observed, read: the children a job controls, each read once, by kind."""

    pods: tuple[ChildView, ...]
    services: tuple[ChildView, ...]
    configmaps: tuple[ChildView, ...]
    deployments: tuple[ChildView, ...]
    gone: tuple[ChildView, ...] = ()  # Observed.gone: pods deleted lately, their last state
    workloads: tuple[ChildView, ...] = ()  # Observed.workloads: Kueue's, for this job
    networkpolicies: tuple[ChildView, ...] = ()  # Observed.networkpolicies


@dataclass(frozen=True)
class JobView:
    """A job as one pass of reconcile reads it (reconcile.view.read_job):
    the object, the status it was last given and the children it controls.
    Any object gives one, so the invalid path reads it too."""

    raw: Obj  # the job as the cache holds it: the kinds read their spec from it
    kind: Kind | None  # None: a kind the operator does not know
    # metadata's, "" when unusable (validation fails such a job)
    name: str
    namespace: str
    uid: str  # what its children's controller ownerReference names
    # From the uid: tells this job's children from those of a namesake the
    # garbage collector has not removed yet.
    runtime_id: str
    generation: int | None  # metadata.generation, None if unusable
    deleting: bool  # metadata.deletionTimestamp is set: the garbage collector's now
    policy: RunPolicy  # spec.runPolicy, read leniently: an invalid job is cleaned up too
    children: Children  # what the job controls
    prev: Obj  # the status written last time, as read
    conditions: list[Condition]  # prev's usable conditions, one per type
    true_conditions: frozenset[str]  # the types of those whose status is True
    counted: Mapping[str, int]  # pods per role prev counted (replicaStatuses)
    restarts: int  # restarts counted so far (see reconcile.restarts)
    # Succeeded or Failed once the job has finished (prev's state, else its
    # conditions): then only cleanup remains. None while it has not.
    outcome: str | None
    # prev's startTime and completionTime, when they are times: as written
    # (a status carries them unchanged) and parsed (for the timers).
    start_time: str | None
    started_at: datetime | None
    completion_time: str | None
    completed_at: datetime | None
    deadline: datetime | None  # when activeDeadlineSeconds runs out, if it is set
    # The status fields every path keeps: runtimeId, restartCount (`restarts`),
    # observedGeneration, startTime and the kind's own (Kind.status_fields).
    carried: Obj
    now: datetime  # the pass's clock, in UTC
    stamp: str  # `now` as the status writes times
    # The LocalQueue the job waits in (its kueue.x-k8s.io/queue-name label,
    # or "default" when its namespace has one); None: it is not queued.
    queue: str | None = None
    # The queue its kueue.x-k8s.io/queue-name label names, if any: a job
    # queued by its namespace's default LocalQueue gets the label written.
    queue_label: str | None = None
    queueing: QueueFacts | None = None  # Observed.queueing
    # Who runs it (job.kueue.multikueue.handling): dlk8s, MultiKueue on a
    # worker cluster (this is the manager), or another controller.
    handling: str = Handling.OURS
    # The Workload MultiKueue made for this copy of a job (this is a worker
    # cluster): it runs under that one and never makes its own.
    prebuilt: str | None = None


@dataclass(frozen=True)
class JobContext:
    """A valid job, ready to have its children built: its view and what its
    spec makes of it."""

    job: JobView  # the job as read: name, uid, run policy, status, children
    kind: Kind  # job.kind, known here (a view's may be None)
    replicas: tuple[Replica, ...]  # the spec's replica types, in spec order
    slots: tuple[Slot, ...]  # one per pod the spec asks for, in spec order then index
    config: ControllerConfig  # the operator's own settings (images, accelerators, admission)
    # The role whose pods decide the job's outcome (Kind.deciding_role of
    # these replicas); None only when the spec has none of the deciding roles.
    deciding_role: str | None
    # Kueue's admission of a queued job, by role; None when not queued.
    placements: Mapping[str, Placement] | None = None
    # Values every child of one pass shares (labels, the cluster layout),
    # computed once: a job of a thousand replicas must not cost a million.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def remember(self, key: str, compute: Callable[[], T]) -> T:
        if key not in self.memo:
            self.memo[key] = compute()
        return cast(T, self.memo[key])

    def pod_count(self, *roles: str) -> int:
        """How many pods the spec asks for in these roles (all roles if none given)."""
        return sum(r.replicas for r in self.replicas if not roles or r.role in roles)


def _no_secrets(ctx: JobContext) -> list[PodSecret]:
    return []


def _no_extras(ctx: JobContext) -> list[Obj]:
    return []


def _no_problems(ctx: JobContext) -> list[str]:
    return []


def _unchanged(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    return pod


def _no_status_fields(job: Obj, previous: Obj, now: str) -> Obj:
    return {}


def _no_updates(ctx: JobContext) -> list[Action]:
    return []


@dataclass(frozen=True)
class PodSecret:
    """A Secret the job's pods read, and the keys of its stringData the I/O
    side fills with fresh random values as it creates it."""

    manifest: Obj
    fresh: tuple[str, ...]


@dataclass(frozen=True)
class ElasticRole:
    """The role of a job whose pod count may move, as Kueue admits it: a
    Workload podSet of `maximum` pods of which Kueue may admit as few as
    `minimum` (partial admission), and the job's annotations that set
    its count to what was admitted (the autoscaler's, when not queued)."""

    role: str
    minimum: int
    maximum: int
    annotations: Callable[[int, str], dict[str, str]]  # (count, why) -> the job's annotations
    requested: int | None  # the count the job's annotation asks for now, if any


def _not_elastic(job: Obj) -> ElasticRole | None:
    return None


@dataclass(frozen=True)
class Kind:
    """What makes one job kind different; everything else is shared.

    deciding_roles: how the job's outcome is decided. The first of these roles
                  the job has pods of decides it: the job succeeds once every
                  pod of that role has succeeded, and fails as soon as one of
                  them fails for good (outcomes.decide). TFJob: (MASTER,);
                  Caffe2Job: (MASTER, WORKER), i.e. the MASTER, or without
                  one all the workers. Other roles' pods end the job only by
                  failing under restartPolicy Never.
    validate:     problems of a job (field paths and what is wrong), [] if usable.
    replicas:     the replica types of a valid job, in spec order.
    decorate_pod: adds the kind's environment, default containers and volumes
                  to a pod the engine built from the template.
    extras:       children that belong to the job rather than to one replica
                  (ConfigMaps, TensorBoard), as complete manifests.
    secrets:      Secrets the pods read (the Caffe2 MASTER's redis password),
                  created with the pods, before them, each with the keys
                  the I/O side fills with fresh random values; never watched.
    preflight:    problems outside the job (controller configuration) that
                  must block creating children; the job waits, it is not failed.
    status_fields: the kind's own status fields (PaddleJob's trainers), from
                  the raw job, its previous status and the time; merged into
                  the status on every path, for invalid and finished jobs
                  too, so it must never raise.
    update_children: actions on children that exist (patches, the kind's own
                  events) for an active job; the engine creates and deletes.
    """

    name: str  # the custom resource's kind, e.g. "TFJob"
    roles: tuple[str, ...]  # every role its spec may name
    deciding_roles: tuple[str, ...]
    container: str  # the main container: its exit decides a pod's outcome
    port_name: str | None  # of each replica's headless Service; None: no Services
    validate: Callable[[Obj], list[str]]
    replicas: Callable[[Obj], tuple[Replica, ...]]
    decorate_pod: Callable[[JobContext, Slot, Obj], Obj] = _unchanged
    extras: Callable[[JobContext], list[Obj]] = _no_extras
    secrets: Callable[[JobContext], list[PodSecret]] = _no_secrets
    preflight: Callable[[JobContext], list[str]] = _no_problems
    status_fields: Callable[[Obj, Obj, str], Obj] = _no_status_fields
    update_children: Callable[[JobContext], list[Action]] = _no_updates
    # The role whose pod count may move, and its minimum: what Kueue may
    # admit in part (a Workload podSet's minCount). None: a fixed size.
    elastic: Callable[[Obj], ElasticRole | None] = _not_elastic
    # The deciding pods end as one group (torchrun's agents): once one has
    # succeeded, the training is done, and one that fails as the group
    # finishes (an agent that came to a finishing group) does not undo that
    # (reconcile.verdicts, GROUP_SETTLE_SECONDS).
    ends_as_group: bool = False

    def deciding_role(self, replicas: Sequence[Replica]) -> str | None:
        """The role that decides a job of these replicas (None: nothing can)."""
        present = {r.role for r in replicas if r.replicas > 0}
        return next((role for role in self.deciding_roles if role in present), None)
