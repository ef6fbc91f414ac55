"""PyTorchJob: torchrun jobs, static and elastic (docs/kinds.md).

An optional MASTER and WORKERs, each with a headless Service; every
`pytorch` container gets what `torch.distributed` and torchrun read. A
static job gets Kubeflow PyTorchJob v1's variables and rank order (the
MASTER is rank 0, WORKER i is rank i + 1), so programs written for it run
unchanged. An elastic job (spec.elasticPolicy) gets torchrun's c10d
rendezvous instead, and nothing that counts the nodes: torchrun tells every
process its rank and world size after each rendezvous, so the worker count
may move without any pod's environment going stale.

The MASTER's container decides the job; without a MASTER every WORKER's
does (the job succeeds when all of them have).

An elastic job whose minReplicas is below maxReplicas is sized by the
autoscaler, as a PaddleJob's trainers are (kinds.elastic): the annotation
dlk8s.io/workers asks for the WORKER count, new WORKERs wait behind the
admission gate while the autoscaler keeps nodes and has given the job no count,
and status.workers shows the count it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from dlk8s.job.actions import Action
from dlk8s.job.children import containers_named, service_host
from dlk8s.job.env import add_env_defaults, set_env
from dlk8s.job.jobmodel import ElasticRole, JobContext, Replica, Slot
from dlk8s.job.kinds.elastic import (
    CountAnnotations,
    add_gate,
    awaits_admission,
    lift_gates,
    may_lift_gate,
    scale_status,
    scaled_event,
)
from dlk8s.job.kinds.replicaspecs import replica_specs_kind
from dlk8s.job.objects import Obj, as_dict, as_int, as_list, dig, is_int, show
from dlk8s.job.validation import ReplicaRules, int_between, optional_object, port_problems
from dlk8s.job.vocabulary import MAX_REPLICAS

KIND: Final = "PyTorchJob"
MASTER, WORKER = "MASTER", "WORKER"
# Kubeflow's port name and port (23456), so its manifests' probes still match.
PORT_NAME: Final = "pytorchjob-port"
RULES: Final = ReplicaRules(
    role_field="pytorchReplicaType",
    roles=(MASTER, WORKER),
    deciding_roles=(MASTER, WORKER),
    port=("pytorchPort", 23456),
    container="pytorch",
)

ELASTIC: Final = "spec.elasticPolicy"
# torchrun's words for "as many processes as the node has devices or CPUs".
NPROC_WORDS: Final = ("auto", "cpu", "gpu")
MAX_NPROC: Final = 1024
MAX_RESTARTS: Final = 1000
# torchrun's rendezvous that needs nothing but its agents: the first to
# arrive at PET_RDZV_ENDPOINT hosts the store.
RDZV_BACKEND: Final = "c10d"

# The WORKER count of an elastic job, as the autoscaler (or a user) asks for it.
WORKERS: Final = CountAnnotations(
    count="dlk8s.io/workers",
    reason="dlk8s.io/workers-reason",
    noun="workers",
    default="the WORKER entry's replicas",
    bounds="elasticPolicy.minReplicas..maxReplicas",
)
REASON_SCALED: Final = "WorkersScaled"


@dataclass(frozen=True)
class ElasticPolicy:
    """spec.elasticPolicy of a job that has a usable one."""

    min_replicas: int  # the fewest WORKERs the job runs with
    max_replicas: int  # the most WORKERs it may grow to
    max_restarts: int | None  # torchrun's --max-restarts; None: torchrun's default (0)
    rdzv_port: int | None  # None: the port of the replica hosting the rendezvous


# --- reading the spec (lenient: also used before validation) -------------------


def elastic_policy(job: object) -> ElasticPolicy | None:
    policy = dig(job, "spec", "elasticPolicy")
    if not isinstance(policy, dict):
        return None
    low, high = policy.get("minReplicas"), policy.get("maxReplicas")
    if not (is_int(low) and is_int(high)):
        return None
    restarts, port = policy.get("maxRestarts"), policy.get("rdzvPort")
    return ElasticPolicy(
        min_replicas=low,
        max_replicas=high,
        max_restarts=restarts if is_int(restarts) else None,
        rdzv_port=port if is_int(port) else None,
    )


def worker_bounds(job: object) -> tuple[int, int] | None:
    """(minReplicas, maxReplicas) of an elastic job, or None if unusable."""
    policy = elastic_policy(job)
    if policy is None or not 1 <= policy.min_replicas <= policy.max_replicas <= MAX_REPLICAS:
        return None
    return policy.min_replicas, policy.max_replicas


def is_autoscaled(job: object) -> bool:
    """An elastic job whose WORKER count may move: the autoscaler's to size."""
    bounds = worker_bounds(job)
    return bounds is not None and bounds[0] < bounds[1]


def _worker_entry(job: object) -> Obj | None:
    return next(
        (
            entry
            for entry in as_list(dig(job, "spec", "replicaSpecs"))
            if isinstance(entry, dict) and RULES.role(entry) == WORKER
        ),
        None,
    )


def worker_replicas(job: object) -> int | None:
    """The WORKER entry's replicas (1 when unset), None without a usable entry."""
    entry = _worker_entry(job)
    replicas = None if entry is None else entry.get("replicas", 1)
    return replicas if is_int(replicas) and replicas >= 0 else None


def worker_pod_spec(job: object) -> Obj:
    """What the autoscaler sizes and places a WORKER by: its template's pod spec."""
    return as_dict(dig(_worker_entry(job), "template", "spec"))


def worker_count(job: object) -> int | None:
    """The WORKERs an elastic job runs: the annotation dlk8s.io/workers's
    count, else the WORKER entry's replicas, kept within [minReplicas,
    maxReplicas]. None for a static job, or one whose spec is unusable."""
    bounds = worker_bounds(job)
    asked = WORKERS.requested(job)
    if asked is None:
        asked = worker_replicas(job)
    if bounds is None or asked is None:
        return None
    return min(bounds[1], max(bounds[0], asked))


def nproc_per_node(job: object) -> str | None:
    """PET_NPROC_PER_NODE: spec.nprocPerNode, or elasticPolicy.nProcPerNode
    (Kubeflow's older place for it); None when neither is set."""
    for value in (
        dig(job, "spec", "nprocPerNode"),
        dig(job, "spec", "elasticPolicy", "nProcPerNode"),
    ):
        if is_int(value) or isinstance(value, str):
            return str(value)
    return None


def processes_per_pod(job: object) -> int:
    """What WORLD_SIZE multiplies the pods by: nprocPerNode when it is a
    number, else 1 (Kubeflow v1's rule: `auto`, `cpu` and `gpu` are only
    known to torchrun on the node)."""
    value = nproc_per_node(job)
    return int(value) if value is not None and value.isdigit() else 1


# --- validation ----------------------------------------------------------------


def checks(job: Obj) -> list[str]:
    """Problems beyond those of spec.replicaSpecs (which the shared rules find)."""
    spec = as_dict(job.get("spec"))
    problems = _nproc_problems("spec.nprocPerNode", spec.get("nprocPerNode"))
    problems += optional_object(ELASTIC, spec.get("elasticPolicy"), _elastic_problems)
    if problems or "elasticPolicy" not in spec:
        return problems
    if "nprocPerNode" in spec and "nProcPerNode" in spec["elasticPolicy"]:
        problems.append(f"{ELASTIC}.nProcPerNode: must not be set together with spec.nprocPerNode")
    policy = elastic_policy(job)
    workers = [
        as_int(entry.get("replicas"), 1)
        for entry in as_list(spec.get("replicaSpecs"))
        if isinstance(entry, dict) and RULES.role(entry) == WORKER
    ]
    if policy is not None and not any(
        policy.min_replicas <= count <= policy.max_replicas for count in workers
    ):
        problems.append(
            "spec.replicaSpecs: an elastic job needs a WORKER entry whose replicas lie"
            f" within {ELASTIC}.minReplicas and maxReplicas"
        )
    return problems


def _nproc_problems(path: str, value: object) -> list[str]:
    if value is None or value in NPROC_WORDS or _is_count(value):
        return []
    if is_int(value) and 1 <= value <= MAX_NPROC:
        return []
    words = ", ".join(NPROC_WORDS)
    return [f"{path}: must be 1 to {MAX_NPROC} or one of {words} (got {show(value)})"]


def _is_count(value: object) -> bool:
    """A number written as a string, as Kubeflow's string field holds it ("2")."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= 4
        and value.isascii()
        and value.isdigit()
        and value[0] != "0"
        and int(value) <= MAX_NPROC
    )


def _elastic_problems(path: str, policy: Obj) -> list[str]:
    problems = [
        f"{path}.{key}: is required"
        for key in ("minReplicas", "maxReplicas")
        if policy.get(key) is None
    ]
    problems += int_between(f"{path}.minReplicas", policy.get("minReplicas"), 1, MAX_REPLICAS)
    problems += int_between(f"{path}.maxReplicas", policy.get("maxReplicas"), 1, MAX_REPLICAS)
    low, high = policy.get("minReplicas"), policy.get("maxReplicas")
    if not problems and is_int(low) and is_int(high) and low > high:
        problems.append(f"{path}.minReplicas: must not exceed {path}.maxReplicas")
    problems += int_between(f"{path}.maxRestarts", policy.get("maxRestarts"), 0, MAX_RESTARTS)
    problems += port_problems(f"{path}.rdzvPort", policy.get("rdzvPort"))
    return problems + int_between(f"{path}.nProcPerNode", policy.get("nProcPerNode"), 1, MAX_NPROC)


# --- the variables ---------------------------------------------------------------


def host_slot(ctx: JobContext) -> Slot:
    """The pod the others meet at: the MASTER, or without one WORKER 0."""
    masters = [slot for slot in ctx.slots if slot.role == MASTER]
    return masters[0] if masters else next(slot for slot in ctx.slots if slot.role == WORKER)


def node_rank(ctx: JobContext, slot: Slot) -> int:
    """Kubeflow's order: the MASTER first, then the WORKERs by index."""
    if slot.role == MASTER:
        return 0
    return slot.index + (1 if ctx.pod_count(MASTER) else 0)


def static_env(ctx: JobContext) -> dict[str, str]:
    """The variables every pod of a static job shares (RANK and
    PET_NODE_RANK are each pod's own)."""
    host = host_slot(ctx)
    address, port = service_host(ctx, host), str(host.replica.port)
    values = {
        "MASTER_ADDR": address,
        "MASTER_PORT": port,
        "WORLD_SIZE": str(ctx.pod_count() * processes_per_pod(ctx.job.raw)),
        "PET_MASTER_ADDR": address,
        "PET_MASTER_PORT": port,
        "PET_NNODES": str(ctx.pod_count()),
    }
    return values | _nproc_env(ctx)


def elastic_env(ctx: JobContext, policy: ElasticPolicy) -> dict[str, str]:
    """The variables of every pod of an elastic job, the same in each: the
    MASTER, when there is one, takes part in the rendezvous as a node.

    The endpoint names the host's Service by its short name, which is also
    the host pod's hostname: torchrun's agent there knows by that name, before
    any DNS record of its pod exists, that it is the one to host the store.
    """
    host = host_slot(ctx)
    port = policy.rdzv_port or host.replica.port
    masters = ctx.pod_count(MASTER)
    values = {
        "PET_RDZV_BACKEND": RDZV_BACKEND,
        "PET_RDZV_ENDPOINT": f"{host.name}:{port}",
        "PET_RDZV_ID": ctx.job.runtime_id,
        "PET_NNODES": f"{policy.min_replicas + masters}:{policy.max_replicas + masters}",
    }
    if policy.max_restarts is not None:
        values["PET_MAX_RESTARTS"] = str(policy.max_restarts)
    return values | _nproc_env(ctx)


def _nproc_env(ctx: JobContext) -> dict[str, str]:
    value = nproc_per_node(ctx.job.raw)
    return {} if value is None else {"PET_NPROC_PER_NODE": value}


def torch_env(ctx: JobContext, slot: Slot) -> dict[str, str]:
    """The variables one pod's `pytorch` container gets; the shared ones are
    computed once per pass."""
    policy = ctx.remember("pytorch_elastic", lambda: elastic_policy(ctx.job.raw))
    if policy is not None:
        return ctx.remember("pytorch_env", lambda: elastic_env(ctx, policy))
    rank = str(node_rank(ctx, slot))
    return ctx.remember("pytorch_env", lambda: static_env(ctx)) | {
        "RANK": rank,
        "PET_NODE_RANK": rank,
    }


# An elastic agent is known in the rendezvous by its address and pid.
# torchrun is its container's first process (the same pid in every pod) and
# a recreated pod keeps its hostname, so without an address of its own the
# replacement passes for the agent it replaces, and the others wait for that
# one in vain. The pod's IP is new with each pod and reachable, as it must be:
# the rank-0 agent's address is where its worker processes meet.
ELASTIC_FIELDS: Final = {"PET_LOCAL_ADDR": "status.podIP"}

# torchrun since 2.4 (our image's 2.6 too) hosts its workers' store in the
# agent that had rank 0 in its first rendezvous round, and keeps that
# address for every later round: an agent that joins a grown or mended
# group asks the round for an address nobody gives it, and waits with the
# others until the join times out (pytorch#135712, pytorch#182375; seen on
# the real node and with torchrun alone). Without the sharing, each round's
# rank 0 gives its workers' address anew, and its first process hosts their
# store, which by default asks for libuv: a PyTorch built without it
# (Debian's) then fails at init_process_group, so the store's older
# backend, which every build has. Defaults: the template's own values win.
ELASTIC_DEFAULTS: Final = (("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"), ("USE_LIBUV", "0"))


def decorate_pod(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    values = torch_env(ctx, slot)
    elastic = ctx.remember("pytorch_elastic", lambda: elastic_policy(ctx.job.raw)) is not None
    for container in containers_named(pod["spec"], RULES.container):
        set_env(container, values, ELASTIC_FIELDS if elastic else None)
        # Kubeflow's too: `kubectl logs` shows a print when it is made.
        add_env_defaults(container, (("PYTHONUNBUFFERED", "1"),))
        if elastic:
            add_env_defaults(container, ELASTIC_DEFAULTS)
    if slot.role == WORKER and awaits_admission(ctx, is_autoscaled(ctx.job.raw)):
        add_gate(pod)
    return pod


# --- the worker count of an elastic job ---------------------------------------------


def status_fields(job: Obj, previous: Obj, now: str) -> Obj:
    """status.workers, the WORKERs the job runs (its printer column); an
    elastic job's also lastScaleTime and lastScaleReason."""
    if worker_bounds(job) is None:
        count = worker_replicas(job)
        return {} if count is None else {"workers": count}
    return scale_status(job, previous, now, "workers", worker_count(job), WORKERS)


def update_children(ctx: JobContext) -> list[Action]:
    """An event per change of the WORKER count; the admission gate lifted
    once the autoscaler has given the job a count."""
    if worker_bounds(ctx.job.raw) is None:
        return []
    actions = scaled_event(ctx, "workers", ctx.pod_count(WORKER), REASON_SCALED, WORKERS)
    if may_lift_gate(ctx, is_autoscaled(ctx.job.raw)):
        actions += lift_gates(ctx, WORKER)
    return actions


_SPEC_KIND: Final = replica_specs_kind(
    KIND,
    RULES,
    PORT_NAME,
    checks,
    decorate_pod=decorate_pod,
    status_fields=status_fields,
    update_children=update_children,
)


def replicas(job: Obj) -> tuple[Replica, ...]:
    """The spec's replicas; an elastic job's WORKERs as worker_count says."""
    count = worker_count(job)
    return tuple(
        replace(r, replicas=count) if r.role == WORKER and count is not None else r
        for r in _SPEC_KIND.replicas(job)
    )


def elastic(job: Obj) -> ElasticRole | None:
    """An autoscaled job's WORKERs, minReplicas..maxReplicas."""
    bounds = worker_bounds(job)
    if bounds is None or bounds[0] >= bounds[1]:
        return None
    return ElasticRole(WORKER, *bounds, WORKERS.annotations, WORKERS.requested(job))


PYTORCHJOB: Final = replace(_SPEC_KIND, replicas=replicas, ends_as_group=True, elastic=elastic)
