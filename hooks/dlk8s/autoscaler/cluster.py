"""The cluster as the planner sees it: nodes, the pods that hold or wait for
room, the elastic jobs it may move, and the summary a pass logs.

Plain frozen data: autoscaler.manifests builds it from API objects, the
tests and the benchmark build it directly. The planner knows no job kind:
"trainer" is its word for a pod of the role an elastic job scales (a
PaddleJob's TRAINER, an elastic PyTorchJob's WORKER; ElasticJob.role).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dlk8s.job.computeresources import Resources

# ElasticJob.role unless told otherwise: a PaddleJob's trainers.
TRAINER_ROLE: Final = "trainer"


# The taint effects that keep a pod without a toleration off a node.
BLOCKING_EFFECTS: Final = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str  # matched by a toleration's key
    value: str  # matched by an Equal toleration's value
    effect: str  # only NoSchedule and NoExecute keep pods off the node


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str  # "" with Exists: tolerates every taint
    operator: str  # Exists or Equal (the API's default)
    value: str  # compared by Equal only
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class Node:
    name: str  # where pods are bound (Pod.node)
    allocatable: Resources  # the room pods' requests share
    labels: Mapping[str, str] = field(default_factory=dict)  # matched by node selectors
    taints: tuple[Taint, ...] = ()  # keep pods without a toleration off
    schedulable: bool = True  # False when cordoned: the planner leaves it out


@dataclass(frozen=True, slots=True)
class Requirement:
    """One entry of a required node affinity term (a node selector requirement)."""

    key: str  # a node label; with `field`, a field of the node
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt or Lt
    values: tuple[str, ...]  # what In, NotIn, Gt and Lt compare with
    field: bool = False  # from matchFields, whose only key is metadata.name

    def matches(self, node: Node) -> bool:
        if self.field:
            value = node.name if self.key == "metadata.name" else None
        else:
            value = node.labels.get(self.key)
        match self.operator:
            case "In":
                return value is not None and value in self.values
            case "NotIn":  # as label selectors: a node without the label matches
                return value is None or value not in self.values
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None
            case "Gt" | "Lt":
                return _compare(value, self.values, self.operator)
        return False


def _compare(value: str | None, values: tuple[str, ...], operator: str) -> bool:
    if value is None or len(values) != 1:
        return False
    try:
        have, bound = int(value), int(values[0])
    except ValueError:
        return False
    return have > bound if operator == "Gt" else have < bound


@dataclass(frozen=True)
class Placement:
    """Which nodes a pod may go to, as far as the planner models it: its
    node selector, its tolerations of the nodes' taints, and its required
    node affinity (preferences and pod affinity are left to the scheduler:
    they never keep a pod off a node with room, or the plan cannot see them)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)  # labels it needs
    tolerations: tuple[Toleration, ...] = ()  # taints it may ignore
    # requiredDuringSchedulingIgnoredDuringExecution: any one term whose
    # requirements all match (a term without any matches no node); () when
    # the pod has none.
    node_affinity: tuple[tuple[Requirement, ...], ...] = ()

    def allows(self, node: Node) -> bool:
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.node_affinity and not any(
            term and all(r.matches(node) for r in term) for term in self.node_affinity
        ):
            return False
        return all(
            taint.effect not in BLOCKING_EFFECTS
            or any(t.tolerates(taint) for t in self.tolerations)
            for taint in node.taints
        )


ANYWHERE: Final = Placement()


@dataclass(frozen=True, slots=True)
class Pod:
    """What the planner needs of a pod that has not terminated."""

    namespace: str  # with name: the pod's key, and its job's
    name: str  # a trainer's reads {job}-trainer-{index}
    node: str  # "" while not bound
    requests: Resources  # the room it holds, or waits for
    terminating: bool = False  # being deleted: its room counts as free
    owner_uid: str = ""  # the controller's uid
    role: str = ""  # dlk8s.io/replica-type
    index: int = -1  # dlk8s.io/replica-index
    created: str = ""  # orders the pending groups, dates their wait
    placement: Placement = ANYWHERE  # the nodes it may go to
    gated: bool = False  # held back by our admission gate: the scheduler leaves it alone

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ElasticJob:
    uid: str  # the owner uid of its pods, and the patch's guard
    key: str  # namespace/name
    min: int  # never shrunk below
    max: int  # never grown above
    trainers: int  # the count the job asks for now
    trainer: Resources  # one trainer's requests
    running: bool  # started and not finishing: may grow
    created: str = ""  # breaks ties: the older grows first, shrinks last
    # It carries a trainer count (ours or a user's): trainers it creates
    # are never gated again (see config.Admission).
    admitted: bool = True
    # Where its trainer template lets trainers go: where a trainer not
    # created yet is placed when the job has no trainer pod to copy it from.
    placement: Placement = ANYWHERE
    # The dlk8s.io/replica-type of the pods it scales (Pod.role), also the
    # word its reasons use for them.
    role: str = TRAINER_ROLE
    # Its API kind, opaque to the plan: which annotations the loop writes.
    kind: str = ""

    def fulfillment(self, trainers: int) -> float:
        return (trainers - self.min) / (self.max - self.min)


@dataclass(frozen=True)
class ClusterSummary:
    """The cluster as observed (before the plan): usable nodes and bound pods."""

    nodes: int  # schedulable nodes
    total: Resources  # their allocatable, summed
    requested: Resources  # the requests of the pods bound to them
    pending_pods: int  # pods not bound and not being deleted
    elastic_jobs: int  # jobs the plan may move

    @property
    def free(self) -> Resources:
        return self.total - self.requested

    def as_log(self) -> dict[str, Any]:
        def block(unit: str, total: float, requested: float) -> dict[str, Any]:
            return {
                "total": round(total, 3),
                "requested": round(requested, 3),
                "free": round(total - requested, 3),
                "unit": unit,
            }

        gib = 2**30
        return {
            "nodes": self.nodes,
            "cpu": block("cores", self.total.cpu / 1000, self.requested.cpu / 1000),
            "memory": block("GiB", self.total.memory / gib, self.requested.memory / gib),
            "gpu": block("gpus", self.total.gpu, self.requested.gpu),
            "pendingPods": self.pending_pods,
            "elasticJobs": self.elastic_jobs,
        }
