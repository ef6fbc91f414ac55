"""Caffe2Job: the Caffe2 operators' semantics (both of them).

An optional MASTER and WORKER shards, each with a headless Service. The
shards find each other through a rendezvous backend (spec.backendSpecs):
- redis on an existing server (redisHost, redisPort);
- redis without a host: the operator adds a `redis` server to the MASTER
  pod, as a native sidecar (an init container with restartPolicy Always),
  and a Service `{job}-redis` in front of it, and points every shard at
  that Service; the server asks for a password, made for the job in a
  Secret `{job}-redis` that every shard reads as REDIS_PASSWORD;
- nfs: a directory every shard shares (nfsPath); with nfsServer and
  nfsServerPath the operator mounts that export there in every shard,
  otherwise the pod templates must mount something at nfsPath.

Shards are numbered over MASTER and WORKER together, the MASTER first: the
seeds' task_index, here SHARD_ID. The MASTER's container `caffe2` decides
the job; without a MASTER, all the workers do (the job succeeds when every
one of them has).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dlk8s.job.childnames import child_name, label_value
from dlk8s.job.children import (
    containers_named,
    headless_service,
    restricted_security_context,
    secret,
    service_dns,
)
from dlk8s.job.env import cluster_config, secret_refs, set_env
from dlk8s.job.jobmodel import JobContext, PodSecret, Slot
from dlk8s.job.kinds.replicaspecs import replica_specs_kind
from dlk8s.job.objects import Container, Obj, as_dict, as_int, as_list, as_str, dig
from dlk8s.job.validation import (
    ReplicaRules,
    optional_object,
    optional_string_problems,
    port_problems,
)
from dlk8s.job.vocabulary import GROUP

MASTER, WORKER = "MASTER", "WORKER"
CONTAINER: Final = "caffe2"
# The MASTER decides the job, or without one the workers do. There is no
# port field: the shards rendezvous through redis or files, and 2222 (the
# seed's) is only the port of the addresses in CAFFE2_CONFIG.
RULES: Final = ReplicaRules(
    role_field="replicaType",
    roles=(MASTER, WORKER),
    deciding_roles=(MASTER, WORKER),
    port=(None, 2222),
    container=CONTAINER,
    default_role=WORKER,
)

REDIS: Final = "redis"
NFS: Final = "nfs"
BACKEND_TYPES: Final = (REDIS, NFS)
DEFAULT_REDIS_PORT: Final = 6379
# The server the operator adds to the MASTER pod. A MASTER template with a
# container (or init container) named `redis` keeps its own instead
# (another image, resources).
REDIS_CONTAINER: Final = "redis"
REDIS_USER: Final = 999  # redis in the official images
# The password of the redis the operator adds: a key of the Secret
# `{job}-redis`, which the shards and the server read as this variable.
PASSWORD_KEY: Final = "password"
PASSWORD_ENV: Final = "REDIS_PASSWORD"
NFS_VOLUME: Final = "dlk8s-caffe2-rendezvous"
BACKEND_PATH: Final = "spec.backendSpecs"


@dataclass(frozen=True)
class Backend:
    """spec.backendSpecs, with the CRD's defaults."""

    type: str = REDIS
    redis_host: str = ""
    redis_port: int = DEFAULT_REDIS_PORT
    nfs_path: str = ""
    nfs_server: str = ""
    nfs_server_path: str = ""

    @property
    def redis_in_master(self) -> bool:
        return self.type == REDIS and not self.redis_host


def backend(job: Obj) -> Backend:
    raw = as_dict(dig(job, "spec", "backendSpecs"))
    return Backend(
        type=as_str(raw.get("backendType"), REDIS),
        redis_host=as_str(raw.get("redisHost")),
        redis_port=as_int(raw.get("redisPort"), DEFAULT_REDIS_PORT),
        nfs_path=as_str(raw.get("nfsPath")),
        nfs_server=as_str(raw.get("nfsServer")),
        nfs_server_path=as_str(raw.get("nfsServerPath")),
    )


# --- validation --------------------------------------------------------------


def checks(job: Obj) -> list[str]:
    """Problems beyond those of spec.replicaSpecs (which the shared rules find)."""
    problems = optional_object(BACKEND_PATH, dig(job, "spec", "backendSpecs"), _backend_problems)
    if problems:
        return problems
    settings = backend(job)
    specs = as_list(dig(job, "spec", "replicaSpecs"))
    if settings.redis_in_master and not any(
        isinstance(entry, dict) and RULES.role(entry) == MASTER for entry in specs
    ):
        problems.append(
            "spec.replicaSpecs: needs a MASTER to run the redis server, since "
            f"{BACKEND_PATH}.redisHost is unset"
        )
    if settings.type == NFS and not settings.nfs_server:
        problems += _unmounted_nfs_path(specs, settings.nfs_path)
    return problems


def _backend_problems(path: str, raw: Obj) -> list[str]:
    kind = raw.get("backendType", REDIS)
    problems = []
    if kind not in BACKEND_TYPES:
        problems.append(f"{path}.backendType: must be one of {', '.join(BACKEND_TYPES)}")
    for key in ("redisHost", "nfsServer"):
        problems += optional_string_problems(f"{path}.{key}", raw.get(key))
    for key in ("nfsPath", "nfsServerPath"):
        value = raw.get(key)
        if value is not None and not (isinstance(value, str) and value.startswith("/")):
            problems.append(f"{path}.{key}: must be an absolute path")
    problems += port_problems(f"{path}.redisPort", raw.get("redisPort"))
    if kind == NFS and raw.get("nfsPath") is None:
        problems.append(f"{path}.nfsPath: is required when backendType is nfs")
    if kind == NFS and raw.get("redisHost") is not None:
        problems.append(f"{path}.redisHost: only applies to backendType redis")
    if kind != NFS and (raw.get("nfsPath") is not None or raw.get("nfsServer") is not None):
        problems.append(f"{path}: nfsPath and nfsServer only apply to backendType nfs")
    if (raw.get("nfsServer") is None) != (raw.get("nfsServerPath") is None):
        problems.append(f"{path}.nfsServer: must be set together with nfsServerPath")
    return problems


def _unmounted_nfs_path(specs: list[object], nfs_path: str) -> list[str]:
    """Without nfsServer the templates mount the shared directory themselves:
    a shard without it would wait forever for peers it cannot see."""
    problems = []
    for index, entry in enumerate(specs):
        spec = as_dict(dig(entry, "template", "spec"))
        if not all(_mounts(c, nfs_path) for c in containers_named(spec, CONTAINER)):
            problems.append(
                f"spec.replicaSpecs[{index}].template.spec.containers: the {CONTAINER} "
                f"container mounts nothing at {BACKEND_PATH}.nfsPath ({nfs_path}); mount "
                "the shared volume there, or set nfsServer and nfsServerPath"
            )
    return problems


def _mounts(container: Obj, path: str, above: bool = True) -> bool:
    """Whether something is mounted at `path` (or, with `above`, at a
    directory above it)."""
    path = path.rstrip("/")
    for mount in as_list(container.get("volumeMounts")):
        where = (as_str(dig(mount, "mountPath")) or "").rstrip("/")
        if where and (path == where or (above and path.startswith(where + "/"))):
            return True
    return False


# --- pods ----------------------------------------------------------------------


def shard_id(ctx: JobContext, slot: Slot) -> int:
    """The MASTER is shard 0; workers follow it."""
    return slot.index if slot.role == MASTER else ctx.pod_count(MASTER) + slot.index


def redis_service_name(ctx: JobContext) -> str:
    return child_name(ctx.job.name, "redis")


def redis_secret_name(ctx: JobContext) -> str:
    return child_name(ctx.job.name, "redis")


def own_redis(ctx: JobContext) -> bool:
    """Whether the operator adds the redis server, and so its password: not
    when the MASTER template brings its own `redis` (its settings, its auth)."""

    def decide() -> bool:
        master = next((slot for slot in ctx.slots if slot.role == MASTER), None)
        spec = as_dict(master.replica.template.get("spec")) if master else {}
        return _backend(ctx).redis_in_master and not _has_container(spec, REDIS_CONTAINER)

    return bool(ctx.remember("caffe2_own_redis", decide))


def password_env(ctx: JobContext) -> dict[str, tuple[str, str]]:
    return {PASSWORD_ENV: (redis_secret_name(ctx), PASSWORD_KEY)} if own_redis(ctx) else {}


def backend_env(ctx: JobContext, settings: Backend) -> dict[str, str]:
    if settings.type == NFS:
        return {"FILE_STORE_PATH": settings.nfs_path}
    host = settings.redis_host or service_dns(ctx, redis_service_name(ctx))
    return {"REDIS_HOST": host, "REDIS_PORT": str(settings.redis_port)}


def caffe2_env(ctx: JobContext, slot: Slot) -> dict[str, str]:
    """In the seed's order: SHARD_ID, NUM_SHARDS, RUN_ID, CAFFE2_CONFIG, then
    the backend's REDIS_HOST and REDIS_PORT, or FILE_STORE_PATH."""
    values = {
        "SHARD_ID": str(shard_id(ctx, slot)),
        "NUM_SHARDS": str(ctx.pod_count(MASTER, WORKER)),
        "RUN_ID": ctx.job.runtime_id,
        "CAFFE2_CONFIG": cluster_config(ctx, slot),
    }
    return values | ctx.remember("caffe2_backend_env", lambda: backend_env(ctx, _backend(ctx)))


def seed_labels(ctx: JobContext, slot: Slot) -> dict[str, str]:
    """The labels the Caffe2 operators put on their pods."""
    return {
        "caffe2_job_key": label_value(f"{ctx.job.namespace}-{ctx.job.name}"),
        "caffe2_replica_index": str(slot.index),
        "caffe2_replica_type": slot.role.lower(),
        "group_name": GROUP,
        "runtime_id": ctx.job.runtime_id,
        "job_type": slot.role,
        "task_index": str(shard_id(ctx, slot)),
    }


def decorate_pod(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    settings = _backend(ctx)
    spec = pod["spec"]
    pod["metadata"]["labels"] |= seed_labels(ctx, slot)
    values = caffe2_env(ctx, slot)
    mains = containers_named(spec, CONTAINER)
    for container in mains:
        set_env(container, values, secrets=password_env(ctx))
    if slot.role == MASTER and own_redis(ctx):
        redis = _redis(settings.redis_port, ctx.config.redis_image, password_env(ctx))
        spec["initContainers"] = [*as_list(spec.get("initContainers")), redis]
    if settings.type == NFS and settings.nfs_server:
        _mount_nfs(spec, mains, settings)
    return pod


def _mount_nfs(spec: Obj, containers: list[Obj], settings: Backend) -> None:
    """The export as a volume, mounted at nfsPath unless the container mounts
    something there itself. A mount above nfsPath does not count: the shards
    would meet in that volume, not in the export the job names."""
    nfs = {"server": settings.nfs_server, "path": settings.nfs_server_path}
    spec["volumes"] = [*as_list(spec.get("volumes")), {"name": NFS_VOLUME, "nfs": nfs}]
    for container in containers:
        if not _mounts(container, settings.nfs_path, above=False):
            mount = {"name": NFS_VOLUME, "mountPath": settings.nfs_path}
            container["volumeMounts"] = [*as_list(container.get("volumeMounts")), mount]


def _has_container(spec: Obj, name: str) -> bool:
    return any(
        isinstance(c, dict) and c.get("name") == name
        for key in ("containers", "initContainers")
        for c in as_list(spec.get(key))
    )


def _redis(port: int, image: str, password: dict[str, tuple[str, str]]) -> Container:
    """The redis server beside the MASTER; its image is the controller
    config's images.redis (the chart's config.images.redis).

    A native sidecar (Kubernetes 1.29+, the chart's minimum): it starts
    before the MASTER's containers, so the shards never find the rendezvous
    down while the MASTER runs, and the kubelet stops it once they have
    exited. As a plain container it kept the pod Running after `caffe2` had
    ended, so cleanPodPolicy Running deleted the MASTER pod, and its log
    with it, while every other finished pod is kept for its log.
    """
    return {
        "name": REDIS_CONTAINER,
        "image": image,
        # The password from the environment (the kubelet expands $(...));
        # redis shows its command line as "redis-server *:port" once started.
        # --save "": a rendezvous needs no snapshot, and with the default
        # save points redis 7 snapshots on SIGTERM, and where it may not
        # write (a read-only root, an image whose working directory is not
        # its user's) refuses to stop until it is killed a grace period later.
        "command": [
            "redis-server",
            "--port",
            str(port),
            "--requirepass",
            f"$({PASSWORD_ENV})",
            "--save",
            "",
        ],
        "env": secret_refs(password),
        "restartPolicy": "Always",
        "ports": [{"name": REDIS, "containerPort": port, "protocol": "TCP"}],
        # The image's own redis user, which owns its working directory /data.
        "securityContext": restricted_security_context(REDIS_USER),
    }


def _backend(ctx: JobContext) -> Backend:
    return ctx.remember("caffe2_backend", lambda: backend(ctx.job.raw))


def secrets(ctx: JobContext) -> list[PodSecret]:
    """The redis password, made as the Secret is created."""
    if not own_redis(ctx):
        return []
    return [PodSecret(secret(ctx, redis_secret_name(ctx), REDIS), (PASSWORD_KEY,))]


def extras(ctx: JobContext) -> list[Obj]:
    """The redis Service in front of the MASTER pod. It carries the MASTER's
    labels, so cleanPodPolicy Running removes it with the replicas' Services."""
    settings = _backend(ctx)
    master = next((slot for slot in ctx.slots if slot.role == MASTER), None)
    if master is None or not settings.redis_in_master:
        return []
    name = redis_service_name(ctx)
    return [headless_service(ctx, master, REDIS, name=name, port=settings.redis_port)]


CAFFE2JOB: Final = replica_specs_kind(
    "Caffe2Job",
    RULES,
    "caffe2-port",
    checks,
    decorate_pod=decorate_pod,
    extras=extras,
    secrets=secrets,
)
