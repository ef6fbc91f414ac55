"""Plain API objects (dicts exactly as the API server sends them) and lenient accessors.

An object we read is an `Obj`: nothing about its shape is trusted, and the
accessors below never raise on any input, so code that runs before
validation (or on objects we did not write) reads through them. The
TypedDicts name the shapes of what the operator itself writes (metadata,
owner references, conditions, replica statuses, containers), and what the
caches keep of a child (`Child`): the fields the pure layer reads.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, TypeGuard

from dlk8s.job.vocabulary import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE

# An API object as JSON decodes it.
Obj = dict[str, Any]


class OwnerReference(TypedDict):
    """The reference every child carries to the job that controls it."""

    apiVersion: str
    kind: str
    name: str
    uid: str  # what the garbage collector and the children's index go by
    controller: bool  # True: the job is the one controller of the child
    blockOwnerDeletion: bool  # the job's deletion waits for the child's


class ObjectMeta(TypedDict, total=False):
    """The metadata the operator writes on a child, and keeps of one it reads
    (job.kept keeps exactly these fields)."""

    name: str
    namespace: str
    uid: str  # a delete's precondition: never a newer object of the same name
    resourceVersion: str  # what the informer resumes a watch from
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    deletionTimestamp: str  # set: the object is going away
    finalizers: list[str]  # a pod's: ours comes off once its end is recorded


class ContainerStatus(TypedDict, total=False):
    name: str
    # `terminated` ({"exitCode": int, "finishedAt": str, ...}), and `waiting`
    # ({"reason": str, "message": str}) while it names why the container
    # cannot start (outcomes.waiting_cause).
    state: dict[str, Obj]


class PodCondition(TypedDict, total=False):
    """One of a pod's status.conditions, as the caches keep it (job.kept)."""

    type: str  # e.g. DisruptionTarget: the pod is being evicted, preempted or drained
    status: str  # "True", "False" or "Unknown"
    reason: str  # e.g. EvictionByEvictionAPI, PreemptionByScheduler, DeletionByTaintManager
    message: str  # who or what did it, in the words of that component


class PodStatus(TypedDict, total=False):
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    reason: str  # why a pod failed without an exit code, e.g. Evicted
    message: str  # the kubelet's words with `reason`
    podIP: str  # its address: the replica's Service is created once it has one
    # What podFailurePolicy's onPodConditions and the disruption defaults read.
    conditions: list[PodCondition]
    containerStatuses: list[ContainerStatus]
    # Read only for why a pending pod's init containers (sidecars among
    # them) cannot start.
    initContainerStatuses: list[ContainerStatus]


class ChildSpec(TypedDict, total=False):
    schedulingGates: list[dict[str, str]]  # a PaddleJob trainer's admission
    nodeName: str  # where a pod stuck terminating is (reconcile.stuck says so)


class Child(TypedDict, total=False):
    """What the caches keep of a job's child (job.kept): all the pure layer reads of it."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ChildSpec
    status: PodStatus  # pods only


class Condition(TypedDict, total=False):
    """One of a job's status.conditions; a read one is only sure of its type."""

    type: str
    status: str  # "True" or "False"
    reason: str
    message: str
    lastTransitionTime: str  # when status last flipped
    lastUpdateTime: str  # when anything of it last changed


class ReplicaStatus(TypedDict):
    replicaType: str  # the role, as the spec writes it
    state: str  # Running | Succeeded | Failed | Unknown
    replicasStates: dict[str, int]  # pods by phase; only phases that occur


class EnvVar(TypedDict, total=False):
    name: str
    value: str
    valueFrom: Obj  # a downward-API fieldRef, a Secret's key


class ContainerPort(TypedDict):
    name: str
    containerPort: int
    protocol: str


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    readOnly: bool


class Container(TypedDict, total=False):
    """A container the operator adds to a pod (a PS's gRPC server, redis, etcd, TensorBoard)."""

    name: str
    image: str
    command: list[str]
    args: list[str]
    env: list[EnvVar]
    ports: list[ContainerPort]
    volumeMounts: list[VolumeMount]
    resources: Obj
    restartPolicy: str  # Always: a native sidecar
    securityContext: Obj


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


def later(moment: datetime, seconds: float) -> datetime:
    """moment + seconds, saturating: a timer beyond year 9999 never fires."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return to_utc(datetime.fromisoformat(value))
    except ValueError:
        return None


# --- reading any object's metadata --------------------------------------------


def name_of(obj: object) -> str:
    name = dig(obj, "metadata", "name")
    return name if isinstance(name, str) else ""


def is_terminating(obj: object) -> bool:
    return dig(obj, "metadata", "deletionTimestamp") is not None


def replica_key(obj: object) -> tuple[str, int] | None:
    """(lower-case role, index) from the labels of a job's child, or None."""
    labels = as_dict(dig(obj, "metadata", "labels"))
    role, index = labels.get(LABEL_REPLICA_TYPE), labels.get(LABEL_REPLICA_INDEX)
    if (
        not isinstance(role, str)
        or not isinstance(index, str)
        or not (index.isascii() and index.isdigit())
    ):
        return None
    return role, int(index)


def job_str(job: Obj) -> str:
    """kind/namespace/name: how logs name a job."""
    return f"{job['kind']}/{job['metadata']['namespace']}/{job['metadata']['name']}"
