"""MXJob: the MXNet fork of the TfJob operator.

One SCHEDULER, whose container `mxnet` decides the job exactly as a TFJob's
MASTER does, plus SERVERs and WORKERs that are recreated when they fail.
Every replica gets a headless Service, and every `mxnet` container the
variables of MXNet's parameter-server launcher (ps-lite): its role, where
the scheduler listens, how many servers and workers there are and, for a
worker, its index.
"""

from __future__ import annotations

from typing import Final

from dlk8s.job.children import containers_named, service_host
from dlk8s.job.env import set_env
from dlk8s.job.jobmodel import JobContext, Slot
from dlk8s.job.kinds.replicaspecs import replica_specs_kind
from dlk8s.job.objects import Obj
from dlk8s.job.validation import ReplicaRules

SCHEDULER, SERVER, WORKER = "SCHEDULER", "SERVER", "WORKER"
# The SCHEDULER, listed first, decides the job through its container mxnet.
RULES: Final = ReplicaRules(
    role_field="mxReplicaType",
    roles=(SCHEDULER, SERVER, WORKER),
    port=("psRootPort", 9091),
    container="mxnet",
)


def dmlc_env(ctx: JobContext, slot: Slot) -> dict[str, str]:
    """The DMLC_* variables of one replica, e.g. for worker 1 of job j in ns:
    DMLC_ROLE=worker, DMLC_PS_ROOT_URI=j-scheduler-0.ns.svc,
    DMLC_PS_ROOT_PORT=9091, DMLC_NUM_SERVER=.., DMLC_NUM_WORKER=..,
    DMLC_USE_KUBERNETES=1, DMLC_WORKER_ID=1."""
    shared = ctx.remember("dmlc_env", lambda: _shared_env(ctx))
    values = {"DMLC_ROLE": slot.role.lower(), **shared}
    if slot.role == WORKER:
        values["DMLC_WORKER_ID"] = str(slot.index)
    return values


def _shared_env(ctx: JobContext) -> dict[str, str]:
    scheduler = next(slot for slot in ctx.slots if slot.role == SCHEDULER)
    return {
        "DMLC_PS_ROOT_URI": service_host(ctx, scheduler),
        "DMLC_PS_ROOT_PORT": str(scheduler.replica.port),
        "DMLC_NUM_SERVER": str(ctx.pod_count(SERVER)),
        "DMLC_NUM_WORKER": str(ctx.pod_count(WORKER)),
        "DMLC_USE_KUBERNETES": "1",
    }


def decorate_pod(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    values = dmlc_env(ctx, slot)
    for container in containers_named(pod["spec"], RULES.container):
        set_env(container, values)
    return pod


MXJOB: Final = replica_specs_kind("MXJob", RULES, "mxnet-port", decorate_pod=decorate_pod)
