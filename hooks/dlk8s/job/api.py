"""The dlk8s.io API as the operator sees it.

Names and vocabulary shared by every kind, lenient accessors for plain API
objects (dicts exactly as the API server returns them), and the typed view of
a job that the reconcile engine and the kind modules share.

The typed views are built only from jobs that passed validation; the
accessors never raise on any input, so code that runs before validation (or
on objects we did not write) uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeGuard, TypeVar, cast

from dlk8s.job.config import ControllerConfig

Obj = dict[str, Any]
T = TypeVar("T")

GROUP: Final = "dlk8s.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

LABEL_JOB_NAME: Final = "dlk8s.io/job-name"
LABEL_JOB_KIND: Final = "dlk8s.io/job-kind"
LABEL_REPLICA_TYPE: Final = "dlk8s.io/replica-type"
LABEL_REPLICA_INDEX: Final = "dlk8s.io/replica-index"
LABEL_RUNTIME_ID: Final = "dlk8s.io/runtime-id"
# The job's restart count when the pod was created: lets a restart that was
# acted on but whose status write was lost be recovered from the pod itself.
ANNOTATION_RESTART_COUNT: Final = "dlk8s.io/restart-count"

MAX_REPLICAS: Final = 10_000


class Phase:
    CREATING: Final = "Creating"
    RUNNING: Final = "Running"
    CLEANUP: Final = "CleanUp"
    FAILED: Final = "Failed"
    DONE: Final = "Done"


class State:
    RUNNING: Final = "Running"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"


class ConditionType:
    CREATED: Final = "Created"
    RUNNING: Final = "Running"
    RESTARTING: Final = "Restarting"
    SUSPENDED: Final = "Suspended"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"


# The order conditions appear in, so an unchanged job keeps an identical list.
CONDITION_ORDER: Final = (
    ConditionType.CREATED,
    ConditionType.RUNNING,
    ConditionType.RESTARTING,
    ConditionType.SUSPENDED,
    ConditionType.SUCCEEDED,
    ConditionType.FAILED,
)


class Reason:
    CREATING: Final = "Creating"
    CREATED: Final = "PodsCreated"
    RUNNING: Final = "Running"
    RESTARTING: Final = "Restarting"
    RECOVERED: Final = "Recovered"
    SUSPENDED: Final = "Suspended"
    RESUMED: Final = "Resumed"
    SUCCEEDED: Final = "Succeeded"
    REPLICA_FAILED: Final = "ReplicaFailed"
    BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
    DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
    INVALID_SPEC: Final = "InvalidSpec"
    CONFIG_ERROR: Final = "ConfigError"
    RECREATING: Final = "Recreating"
    TTL_EXPIRED: Final = "TTLExpired"
    CREATE: Final = "SuccessfulCreate"
    DELETE: Final = "SuccessfulDelete"
    INTERNAL_ERROR: Final = "InternalError"
    NAME_TAKEN: Final = "NameTaken"
    # The API server refused a create or a delete (admission, quota, an
    # invalid object); client-go's controllers use the same two reasons.
    FAILED_CREATE: Final = "FailedCreate"
    FAILED_DELETE: Final = "FailedDelete"


class EventType:
    """The type of a Kubernetes Event: Warning for what a user must act on."""

    NORMAL: Final = "Normal"
    WARNING: Final = "Warning"


class CleanPodPolicy:
    RUNNING: Final = "Running"
    ALL: Final = "All"
    NONE: Final = "None"
    ALLOWED: Final = (RUNNING, ALL, NONE)


class RestartPolicy:
    """When the operator recreates a finished pod (see policy.decide)."""

    EXIT_CODE: Final = "ExitCode"
    ON_FAILURE: Final = "OnFailure"
    ALWAYS: Final = "Always"
    NEVER: Final = "Never"
    ALLOWED: Final = (EXIT_CODE, ON_FAILURE, ALWAYS, NEVER)


# --- lenient accessors -------------------------------------------------------


def dig(obj: object, *path: str) -> Any:
    """obj[path[0]][path[1]]..., or None as soon as a step is not a dict."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def as_dict(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass, but `replicas: true` is not a number of replicas.
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(value: object, default: int) -> int:
    if is_int(value):
        return value
    return default


def as_str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def is_text(value: object) -> TypeGuard[str]:
    """A non-empty string: what a name, a path or a host must be."""
    return isinstance(value, str) and value != ""


def string_map(value: object) -> dict[str, str]:
    """The string-to-string entries of a mapping (labels, annotations)."""
    return {k: v for k, v in as_dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def is_string_map(value: object) -> bool:
    return isinstance(value, dict) and len(string_map(value)) == len(value)


def show(value: object) -> str:
    """A value as a message quotes it: its repr, cut to 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def format_time(moment: datetime) -> str:
    return to_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_utc(moment: datetime) -> datetime:
    # A naive datetime is taken to be UTC, which is what the caller's clock is.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return to_utc(datetime.fromisoformat(value))
    except ValueError:
        return None


# --- the typed view of a job -------------------------------------------------


@dataclass(frozen=True)
class RunPolicy:
    clean_pod_policy: str = CleanPodPolicy.RUNNING
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None  # None: no limit, as the CRD documents
    suspend: bool = False


def run_policy(job: object) -> RunPolicy:
    """spec.runPolicy with every unusable field replaced by its default.

    Lenient on purpose: a job that failed validation still needs its cleanup
    policy and TTL honoured.
    """
    raw = as_dict(dig(job, "spec", "runPolicy"))
    clean = raw.get("cleanPodPolicy")
    return RunPolicy(
        clean_pod_policy=clean if clean in CleanPodPolicy.ALLOWED else CleanPodPolicy.RUNNING,
        ttl_seconds_after_finished=_non_negative(raw.get("ttlSecondsAfterFinished")),
        active_deadline_seconds=_positive(raw.get("activeDeadlineSeconds")),
        backoff_limit=_non_negative(raw.get("backoffLimit")),
        suspend=raw.get("suspend") is True,
    )


def _non_negative(value: object) -> int | None:
    number = as_int(value, -1)
    return number if number >= 0 else None


def _positive(value: object) -> int | None:
    number = as_int(value, 0)
    return number if number > 0 else None


@dataclass(frozen=True)
class Replica:
    """One replica type of a job: `replicas` pods built from `template`."""

    role: str  # as written in the spec, e.g. "WORKER"
    replicas: int
    port: int | None
    template: Obj
    restart_policy: str = RestartPolicy.EXIT_CODE


@dataclass(frozen=True)
class Slot:
    """One pod of a job: a replica type and an index, with its fixed name."""

    replica: Replica
    index: int
    name: str

    @property
    def role(self) -> str:
        return self.replica.role


def role_of(entry: Obj, role_field: str, default_role: str | None) -> Any:
    """An entry's role, or the default when it names none (as the CRD defaults it)."""
    role = entry.get(role_field)
    return default_role if role is None else role


def replicas_from_specs(
    job: Obj,
    role_field: str,
    port_field: str | None,
    default_port: int,
    default_role: str | None = None,
) -> tuple[Replica, ...]:
    """The spec.replicaSpecs[] shape shared by TFJob, MXJob and Caffe2Job.

    A kind without a port field gets default_port on every replica; an entry
    without the role field gets default_role (what the CRD defaults it to).
    """
    return tuple(
        Replica(
            role=role_of(entry, role_field, default_role),
            replicas=as_int(entry.get("replicas"), 1),
            port=as_int(entry.get(port_field), default_port) if port_field else default_port,
            template=as_dict(entry.get("template")),
            restart_policy=as_str(entry.get("restartPolicy"), RestartPolicy.EXIT_CODE),
        )
        for entry in job["spec"]["replicaSpecs"]
    )


@dataclass(frozen=True)
class JobContext:
    """Everything a kind needs to build a valid job's children."""

    job: Obj
    kind: Kind
    name: str
    namespace: str
    uid: str
    runtime_id: str
    generation: int | None
    run_policy: RunPolicy
    replicas: tuple[Replica, ...]
    slots: tuple[Slot, ...]
    config: ControllerConfig
    # The role whose pods decide the job's outcome (Kind.deciding_role of
    # these replicas); None only when the spec has none of the deciding roles.
    deciding_role: str | None
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


def _no_extras(ctx: JobContext) -> list[Obj]:
    return []


def _no_problems(ctx: JobContext, existing: Observed) -> list[str]:
    return []


def _unchanged(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    return pod


def _no_status_fields(job: Obj, previous: Obj, now: str) -> Obj:
    return {}


def _no_updates(ctx: JobContext, owned: Observed) -> list[Any]:
    return []


@dataclass(frozen=True)
class Observed:
    """A job's existing children, as the I/O side found them.

    All carry the label dlk8s.io/job-name in the job's namespace and a
    controller ownerReference to the job's uid; the engine checks the latter
    again and ignores whatever fails it.
    """

    pods: Sequence[Obj] = ()
    services: Sequence[Obj] = ()
    configmaps: Sequence[Obj] = ()
    deployments: Sequence[Obj] = ()


@dataclass(frozen=True)
class Kind:
    """What makes one job kind different; everything else is shared.

    deciding_roles: how the job's outcome is decided. The first of these roles
                  the job has pods of decides it: the job succeeds once every
                  pod of that role has succeeded, and fails as soon as one of
                  them fails for good (policy.decide). TFJob: (MASTER,);
                  Caffe2Job: (MASTER, WORKER), i.e. the MASTER, or without
                  one all the workers. Other roles' pods end the job only by
                  failing under restartPolicy Never.
    validate:     problems of a job (field paths and what is wrong), [] if usable.
    replicas:     the replica types of a valid job, in spec order.
    decorate_pod: adds the kind's environment, default containers and volumes
                  to a pod the engine built from the template.
    extras:       children that belong to the job rather than to one replica
                  (ConfigMaps, TensorBoard), as complete manifests.
    preflight:    problems outside the job (controller configuration) that
                  must block creating children; the job waits, it is not failed.
    status_fields: the kind's own status fields (PaddleJob's trainers), from
                  the raw job, its previous status and the time; merged into
                  the status on every path, for invalid and finished jobs
                  too, so it must never raise.
    update_children: actions on children that exist (patches, the kind's own
                  events) for an active job; the engine creates and deletes.
    """

    name: str
    roles: tuple[str, ...]
    deciding_roles: tuple[str, ...]
    container: str
    port_name: str | None
    validate: Callable[[Obj], list[str]]
    replicas: Callable[[Obj], tuple[Replica, ...]]
    decorate_pod: Callable[[JobContext, Slot, Obj], Obj] = _unchanged
    extras: Callable[[JobContext], list[Obj]] = _no_extras
    preflight: Callable[[JobContext, Observed], list[str]] = _no_problems
    status_fields: Callable[[Obj, Obj, str], Obj] = _no_status_fields
    # Returns actions (dlk8s.job.actions.Action); typed Any to keep api free of imports.
    update_children: Callable[[JobContext, Observed], list[Any]] = _no_updates

    def deciding_role(self, replicas: Sequence[Replica]) -> str | None:
        """The role that decides a job of these replicas (None: nothing can)."""
        present = {r.role for r in replicas if r.replicas > 0}
        return next((role for role in self.deciding_roles if role in present), None)
