"""Manifests of a job's children.

Every child carries the job's labels and a controller ownerReference with
blockOwnerDeletion, so the garbage collector removes it with the job and the
I/O side can group it by the owner's uid (runtime.childindex); its
labels give its role and index back (objects.replica_key).
"""

from __future__ import annotations

import copy
from typing import Final

from dlk8s.job.childnames import label_value
from dlk8s.job.jobmodel import JobContext, Slot
from dlk8s.job.objects import Obj, ObjectMeta, OwnerReference, as_dict, as_list
from dlk8s.job.vocabulary import (
    ANNOTATION_RESTART_COUNT,
    API_VERSION,
    LABEL_JOB_KIND,
    LABEL_JOB_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    LABEL_RUNTIME_ID,
    TRACKING_FINALIZER,
)

# (apiVersion, kind) of each child type.
POD: Final = ("v1", "Pod")
SERVICE: Final = ("v1", "Service")
CONFIG_MAP: Final = ("v1", "ConfigMap")
SECRET: Final = ("v1", "Secret")
DEPLOYMENT: Final = ("apps/v1", "Deployment")


# Users of the containers the operator adds: no root, and no image's USER
# relied upon (runAsNonRoot alone fails an image whose user is root).
NOBODY: Final = 65534


def restricted_security_context(user: int = NOBODY) -> Obj:
    """What the `restricted` Pod Security profile asks of a container.

    Every container the operator adds to a pod (the default PS's gRPC
    server, the Caffe2 MASTER's redis, the Paddle master's etcd, TensorBoard)
    carries it, so a job's pods pass `restricted` whenever the user's own
    template does: the operator never makes a compliant job non-compliant.
    """
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": user,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def owner_reference(ctx: JobContext) -> OwnerReference:
    return OwnerReference(
        apiVersion=API_VERSION,
        kind=ctx.kind.name,
        name=ctx.job.name,
        uid=ctx.job.uid,
        controller=True,
        blockOwnerDeletion=True,
    )


def job_labels(ctx: JobContext) -> dict[str, str]:
    labels = ctx.remember(
        "job_labels",
        lambda: {
            LABEL_JOB_NAME: label_value(ctx.job.name),
            LABEL_JOB_KIND: ctx.kind.name.lower(),
            LABEL_RUNTIME_ID: ctx.job.runtime_id,
        },
    )
    return dict(labels)


def slot_labels(ctx: JobContext, slot: Slot) -> dict[str, str]:
    return job_labels(ctx) | {
        LABEL_REPLICA_TYPE: slot.role.lower(),
        LABEL_REPLICA_INDEX: str(slot.index),
    }


def component_labels(ctx: JobContext, component: str) -> dict[str, str]:
    """Labels of a child that belongs to the whole job (e.g. TensorBoard)."""
    return job_labels(ctx) | {LABEL_REPLICA_TYPE: component, LABEL_REPLICA_INDEX: "0"}


def slot_selector(ctx: JobContext, slot: Slot) -> dict[str, str]:
    # The runtime id tells this job's pods from those of an earlier job with
    # the same name that the garbage collector has not removed yet.
    labels = slot_labels(ctx, slot)
    keys = (LABEL_JOB_NAME, LABEL_RUNTIME_ID, LABEL_REPLICA_TYPE, LABEL_REPLICA_INDEX)
    return {key: labels[key] for key in keys}


def manifest(
    api_kind: tuple[str, str],
    ctx: JobContext,
    name: str,
    labels: dict[str, str],
    body: Obj,
    annotations: dict[str, str] | None = None,
) -> Obj:
    metadata = ObjectMeta(
        name=name,
        namespace=ctx.job.namespace,
        labels=labels,
        ownerReferences=[owner_reference(ctx)],
    )
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": api_kind[0], "kind": api_kind[1], "metadata": metadata, **body}


def pod_for_slot(ctx: JobContext, slot: Slot, restart_count: int, name: str | None = None) -> Obj:
    """The pod of one slot, from its template (deep-copied, so the job's own
    spec is never modified).

    The pod's restartPolicy is always Never: the operator restarts replicas
    by recreating their pods, so it sees every exit code (a kubelet restart
    in place would hide the MASTER's, and the job could never fail) and
    counts every restart against backoffLimit. The seeds' templates say
    OnFailure; replicaSpecs[].restartPolicy is where that choice lives now.

    `name`: another name than the slot's, for a pod that replaces one stuck
    terminating under it (reconcile.stuck); its hostname stays the slot's
    name, which the programs may know themselves by (torchrun's host does).
    """
    template = slot.replica.template
    template_meta = as_dict(template.get("metadata"))
    labels = as_dict(template_meta.get("labels")) | slot_labels(ctx, slot)
    annotations = as_dict(template_meta.get("annotations")) | {
        ANNOTATION_RESTART_COUNT: str(restart_count)
    }
    spec = copy.deepcopy(as_dict(template.get("spec")))
    spec["restartPolicy"] = "Never"
    if spec.get("hostNetwork") is True and "dnsPolicy" not in spec:
        # On the host network a pod gets the node's resolver by default and
        # could not look up the other replicas' Services.
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if name is not None and name != slot.name:
        spec.setdefault("hostname", slot.name)
    pod = manifest(POD, ctx, name or slot.name, labels, {"spec": spec}, annotations)
    pod["metadata"]["finalizers"] = [TRACKING_FINALIZER]  # reconcile.tracking
    return pod


def headless_service(
    ctx: JobContext, slot: Slot, port_name: str, name: str | None = None, port: int | None = None
) -> Obj:
    """A Service that gives one replica the stable DNS name `service_host`
    (or, with `name` and `port`, another name for another port of its pod).

    publishNotReadyAddresses: replicas look each other up while starting,
    before any readiness probe could pass.
    """
    port = slot.replica.port if port is None else port
    spec: Obj = {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": slot_selector(ctx, slot),
        "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
    }
    return manifest(SERVICE, ctx, name or slot.name, slot_labels(ctx, slot), {"spec": spec})


def config_map(ctx: JobContext, name: str, component: str, data: dict[str, str]) -> Obj:
    return manifest(CONFIG_MAP, ctx, name, component_labels(ctx, component), {"data": data})


def secret(ctx: JobContext, name: str, component: str) -> Obj:
    """A Secret whose values the I/O side makes as it creates it (Create.fresh).
    Immutable: its pods read it once, and the kubelet need not watch it."""
    body: Obj = {"type": "Opaque", "immutable": True}
    return manifest(SECRET, ctx, name, component_labels(ctx, component), body)


def service_host(ctx: JobContext, slot: Slot) -> str:
    return service_dns(ctx, slot.name)


def service_dns(ctx: JobContext, service: str) -> str:
    """The DNS name of one of the job's Services, in the job's namespace."""
    return f"{service}.{ctx.job.namespace}.svc"


def service_address(ctx: JobContext, slot: Slot) -> str:
    return f"{service_host(ctx, slot)}:{slot.replica.port}"


def cluster_spec(ctx: JobContext) -> dict[str, list[str]]:
    """Role (lower case) -> service addresses by index; empty roles left out."""
    cluster: dict[str, list[str]] = {}
    for slot in ctx.slots:  # in spec order, then by index
        cluster.setdefault(slot.role.lower(), []).append(service_address(ctx, slot))
    return cluster


def containers_named(pod_spec: Obj, name: str) -> list[Obj]:
    return [
        c
        for c in as_list(pod_spec.get("containers"))
        if isinstance(c, dict) and c.get("name") == name
    ]
