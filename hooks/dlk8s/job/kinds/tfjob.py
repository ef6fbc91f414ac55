"""TFJob: the TfJob operator's semantics.

One MASTER, whose container `tensorflow` decides the job; optional WORKERs
and PSs. Every replica gets a headless Service and, in each `tensorflow`
container, TF_CONFIG describing the whole cluster. TensorFlow's name for the
MASTER's task is `master` (the seeds', read by tf.compat.v1 programs) or, with
`spec.tfConfig.masterTaskType: chief`, `chief` (the only one TensorFlow 2's
distribution strategies accept). A PS without a
`tensorflow` container gets the standard TensorFlow gRPC server, whose
script the operator ships in a per-job ConfigMap. `spec.tensorboard` adds a
TensorBoard Deployment and Service.
"""

from __future__ import annotations

import copy
from typing import Final

from dlk8s.job.childnames import grpc_server_configmap_name, tensorboard_name
from dlk8s.job.children import (
    DEPLOYMENT,
    SERVICE,
    cluster_spec,
    component_labels,
    config_map,
    containers_named,
    manifest,
    restricted_security_context,
)
from dlk8s.job.config import GRPC_SERVER_SCRIPT_KEY
from dlk8s.job.env import compact_json, set_env
from dlk8s.job.jobmodel import JobContext, Replica, Slot
from dlk8s.job.kinds.replicaspecs import replica_specs_kind
from dlk8s.job.network import policy_for_pods
from dlk8s.job.objects import Container, Obj, as_dict, as_list, dig
from dlk8s.job.validation import (
    ReplicaRules,
    objects_with_names_problems,
    one_of,
    optional_object,
    optional_string_problems,
    volume_mounts_problems,
)
from dlk8s.job.vocabulary import LABEL_JOB_KIND, LABEL_REPLICA_TYPE, LABEL_RUNTIME_ID

MASTER: Final = "MASTER"
WORKER: Final = "WORKER"
PS: Final = "PS"
CONTAINER: Final = "tensorflow"
PORT_NAME: Final = "tf-port"
DEFAULT_PORT: Final = 2222
RULES: Final = ReplicaRules(
    role_field="tfReplicaType",
    roles=(MASTER, WORKER, PS),
    port=("tfPort", DEFAULT_PORT),
    container=CONTAINER,
    defaultable_roles=(PS,),
)

PS_SERVER_DIR: Final = "/ps-server"
PS_SERVER_VOLUME: Final = "ps-grpc-server"
PS_SERVER_COMPONENT: Final = "ps-grpc-server"
TENSORBOARD: Final = "tensorboard"
TENSORBOARD_PORT: Final = 6006
SERVICE_TYPES: Final = ("ClusterIP", "NodePort", "LoadBalancer")
# TensorFlow's names for the MASTER's task: the seeds' (the default) and TF2's.
MASTER_TASK_TYPES: Final = ("master", "chief")


def _tf_problems(job: Obj) -> list[str]:
    spec = as_dict(job.get("spec"))
    return (
        optional_string_problems("spec.tfImage", spec.get("tfImage"))
        + optional_object("spec.tfConfig", spec.get("tfConfig"), _tf_config_problems)
        + optional_object("spec.tensorboard", spec.get("tensorboard"), _tensorboard_problems)
    )


def _tf_config_problems(path: str, value: Obj) -> list[str]:
    return one_of(f"{path}.masterTaskType", value.get("masterTaskType"), MASTER_TASK_TYPES)


def _tensorboard_problems(path: str, board: Obj) -> list[str]:
    problems = []
    if not isinstance(board.get("logDir"), str) or not board["logDir"]:
        problems.append(f"{path}.logDir: must be a non-empty string")
    if board.get("serviceType") not in (None, *SERVICE_TYPES):
        problems.append(f"{path}.serviceType: must be one of {', '.join(SERVICE_TYPES)}")
    problems += objects_with_names_problems(f"{path}.volumes", board.get("volumes"))
    return problems + volume_mounts_problems(f"{path}.volumeMounts", board.get("volumeMounts"))


def runs_default_server(replica: Replica) -> bool:
    """A PS without a `tensorflow` container runs the standard gRPC server."""
    spec = as_dict(replica.template.get("spec"))
    return replica.role == PS and not containers_named(spec, CONTAINER)


# --- TF_CONFIG ---------------------------------------------------------------


def master_task_type(job: Obj) -> str:
    """What TensorFlow calls the MASTER's task: `master` unless the job asks
    for `chief`. TF2's strategies (MultiWorkerMirroredStrategy,
    ParameterServerStrategy) refuse a cluster with a `master` job ("Disallowed
    task type"), while tf.compat.v1 programs written for the seeds look for
    `master`: the job says which kind of program it runs."""
    value = dig(job, "spec", "tfConfig", "masterTaskType")
    return value if value in MASTER_TASK_TYPES else MASTER_TASK_TYPES[0]


def task_type(ctx: JobContext, role: str) -> str:
    """TensorFlow's job name of a role: lower case, the MASTER's as chosen."""
    return master_task_type(ctx.job.raw) if role == MASTER else role.lower()


def tf_cluster(ctx: JobContext) -> dict[str, list[str]]:
    """TF_CONFIG's "cluster": task type -> addresses by index, empty roles left out."""
    return {task_type(ctx, role.upper()): hosts for role, hosts in cluster_spec(ctx).items()}


def tf_config(ctx: JobContext, slot: Slot) -> str:
    """{"cluster": ..., "environment": "cloud", "task": {"type", "index"}} as
    compact JSON with sorted keys, so a job always yields identical pods; the
    cluster is serialized once per pass (every pod repeats it)."""
    cluster = ctx.remember("tf_cluster", lambda: compact_json(tf_cluster(ctx)))
    task = compact_json({"type": task_type(ctx, slot.role), "index": slot.index})
    return f'{{"cluster":{cluster},"environment":"cloud","task":{task}}}'


def decorate_pod(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    spec = pod["spec"]
    if runs_default_server(slot.replica):
        spec["containers"] = [*as_list(spec.get("containers")), _grpc_server_container(ctx, slot)]
        volume = {
            "name": PS_SERVER_VOLUME,
            "configMap": {"name": grpc_server_configmap_name(ctx.job.name)},
        }
        spec["volumes"] = [*as_list(spec.get("volumes")), volume]
    value = tf_config(ctx, slot)
    for container in containers_named(spec, CONTAINER):
        set_env(container, {"TF_CONFIG": value})
    return pod


# --- the standard gRPC server of a PS ----------------------------------------


def grpc_server_args(ctx: JobContext, slot: Slot) -> list[str]:
    """Flags of charts/dlk8s/files/grpc_tensorflow_server.py (the seed's).

    --cluster_spec lists the jobs separated by ";", each as its name, "|" and
    its hosts separated by ",", e.g.
    master|j-master-0.ns.svc:2222;ps|j-ps-0.ns.svc:2222,j-ps-1.ns.svc:2222
    (the script also reads TF_CONFIG, which the container gets as well). The
    names are TF_CONFIG's, so the MASTER is `chief` there too when asked.
    """
    jobs = ctx.remember("grpc_cluster_spec", lambda: _cluster_flag(tf_cluster(ctx)))
    job_name = task_type(ctx, slot.role)
    return [f"--cluster_spec={jobs}", f"--job_name={job_name}", f"--task_id={slot.index}"]


def _cluster_flag(cluster: dict[str, list[str]]) -> str:
    return ";".join(f"{role}|{','.join(hosts)}" for role, hosts in sorted(cluster.items()))


def _grpc_server_container(ctx: JobContext, slot: Slot) -> Container:
    return {
        "name": CONTAINER,
        "image": _tf_image(ctx),
        "command": ["python", f"{PS_SERVER_DIR}/{GRPC_SERVER_SCRIPT_KEY}"],
        "args": grpc_server_args(ctx, slot),
        "ports": [{"name": PORT_NAME, "containerPort": slot.replica.port, "protocol": "TCP"}],
        "volumeMounts": [{"name": PS_SERVER_VOLUME, "mountPath": PS_SERVER_DIR, "readOnly": True}],
        "securityContext": restricted_security_context(),
    }


def _tf_image(ctx: JobContext) -> str:
    image = dig(ctx.job.raw, "spec", "tfImage")
    return image if isinstance(image, str) and image else ctx.config.tf_image


def _needs_grpc_server(ctx: JobContext) -> bool:
    return any(runs_default_server(r) and r.replicas > 0 for r in ctx.replicas)


def preflight(ctx: JobContext) -> list[str]:
    return _grpc_server_problems(ctx) + _exposure_problems(ctx)


def _grpc_server_problems(ctx: JobContext) -> list[str]:
    """The ConfigMap needs the script; once it exists the script is not needed."""
    name = grpc_server_configmap_name(ctx.job.name)
    if not _needs_grpc_server(ctx) or ctx.config.grpc_server_script:
        return []
    if any(cm.name == name for cm in ctx.job.children.configmaps):
        return []
    return [f"PS replicas need the standard gRPC server, but {ctx.config.grpc_server_error}"]


def _exposure_problems(ctx: JobContext) -> list[str]:
    """A TensorBoard Service type this cluster does not let jobs have (one
    outside the cluster, unless the operator is told it may)."""
    kind = dig(ctx.job.raw, "spec", "tensorboard", "serviceType")
    allowed = ctx.config.tensorboard_service_types
    if not isinstance(kind, str) or kind in allowed:
        return []
    return [
        f"spec.tensorboard.serviceType {kind} is not allowed on this cluster"
        f" (allowed: {', '.join(allowed)}; the chart's tensorboard.serviceTypes)"
    ]


# --- children of the whole job -------------------------------------------------


def extras(ctx: JobContext) -> list[Obj]:
    items = []
    if _needs_grpc_server(ctx):
        data = {GRPC_SERVER_SCRIPT_KEY: ctx.config.grpc_server_script}
        items.append(
            config_map(ctx, grpc_server_configmap_name(ctx.job.name), PS_SERVER_COMPONENT, data)
        )
    board = dig(ctx.job.raw, "spec", "tensorboard")
    if isinstance(board, dict):
        items += [tensorboard_deployment(ctx, board), tensorboard_service(ctx, board)]
        if ctx.config.network_policies:
            items.append(tensorboard_network_policy(ctx, board))
    return items


def _tensorboard_pod_labels(ctx: JobContext) -> dict[str, str]:
    # No dlk8s.io/job-name: TensorBoard's pods belong to its Deployment, and
    # leaving the label off keeps them out of the operator's pod watch.
    return {
        LABEL_RUNTIME_ID: ctx.job.runtime_id,
        LABEL_JOB_KIND: ctx.kind.name.lower(),
        LABEL_REPLICA_TYPE: TENSORBOARD,
    }


def tensorboard_deployment(ctx: JobContext, board: Obj) -> Obj:
    container: Container = {
        "name": TENSORBOARD,
        "image": _tf_image(ctx),
        # --host rather than --bind_all: TensorBoard 1.x images know only --host.
        "command": [
            "tensorboard",
            f"--logdir={board['logDir']}",
            "--host=0.0.0.0",
            f"--port={TENSORBOARD_PORT}",
        ],
        "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT, "protocol": "TCP"}],
        "securityContext": restricted_security_context(),
    }
    pod_spec: Obj = {"containers": [container]}
    if board.get("volumeMounts"):
        container["volumeMounts"] = copy.deepcopy(board["volumeMounts"])
    if board.get("volumes"):
        pod_spec["volumes"] = copy.deepcopy(board["volumes"])
    labels = _tensorboard_pod_labels(ctx)
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }
    name = tensorboard_name(ctx.job.name)
    return manifest(DEPLOYMENT, ctx, name, component_labels(ctx, TENSORBOARD), {"spec": spec})


def tensorboard_network_policy(ctx: JobContext, board: Obj) -> Obj:
    """TensorBoard's port to the job's namespace only (a LoadBalancer's
    callers come from outside the cluster: then to anyone)."""
    return policy_for_pods(
        ctx,
        tensorboard_name(ctx.job.name),
        component_labels(ctx, TENSORBOARD),
        _tensorboard_pod_labels(ctx),
        TENSORBOARD_PORT,
        anyone=board.get("serviceType") == "LoadBalancer",
    )


def tensorboard_service(ctx: JobContext, board: Obj) -> Obj:
    spec = {
        "type": board.get("serviceType") or "ClusterIP",
        "selector": _tensorboard_pod_labels(ctx),
        "ports": [{"name": "http", "port": 80, "targetPort": TENSORBOARD_PORT, "protocol": "TCP"}],
    }
    name = tensorboard_name(ctx.job.name)
    return manifest(SERVICE, ctx, name, component_labels(ctx, TENSORBOARD), {"spec": spec})


TFJOB: Final = replica_specs_kind(
    "TFJob",
    RULES,
    PORT_NAME,
    _tf_problems,
    decorate_pod=decorate_pod,
    extras=extras,
    preflight=preflight,
)
