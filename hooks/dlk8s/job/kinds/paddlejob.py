"""PaddleJob: PaddlePaddle EDL's elastic TrainingJob (docs/kinds.md).

Its spec is read and checked in paddle_spec, its pods are built in
paddle_pods; here the Kind, and what keeps a running job's trainer count
current: the live count patched into its pods, and its status fields.
"""

from __future__ import annotations

from typing import Final

from dlk8s.job.actions import Action, Event, Patch
from dlk8s.job.kind import JobContext, Kind
from dlk8s.job.kinds.paddle_pods import decorate_pod, replicas
from dlk8s.job.kinds.paddle_spec import (
    ANNOTATION_TRAINERS,
    CONTAINER,
    KIND,
    MASTER,
    PORT_NAME,
    PSERVER,
    TRAINER,
    is_admission_gate,
    requested_trainers,
    scale_reason,
    trainer_count,
    validate,
)
from dlk8s.job.names import EventType
from dlk8s.job.objects import Obj, as_list, dig, is_int

REASON_SCALED: Final = "TrainersScaled"
STATUS_FIELDS: Final = ("trainers", "lastScaleTime", "lastScaleReason")
_FINISHED: Final = ("Succeeded", "Failed")


def update_children(ctx: JobContext) -> list[Action]:
    """Patch the live count into every pod that stays, and lift the
    admission gate once the job may start; an event per change."""
    count = ctx.pod_count(TRAINER)
    value = str(count)
    actions: list[Action] = []
    previous = ctx.job.prev.get("trainers")
    if is_int(previous) and previous != count:
        why = scale_reason(ctx.job.raw, count)
        message = f"Scaling trainers from {previous} to {count}: {why}"
        actions.append(Event(EventType.NORMAL, REASON_SCALED, message))
    wanted = {r.role.lower(): r.replicas for r in ctx.replicas}
    # Without the autoscaler nothing would ever admit the job: a gate left
    # from a run with it goes too.
    lift = ctx.config.admission is None or requested_trainers(ctx.job.raw) is not None
    for pod in ctx.job.children.pods:
        if (
            pod.key is None
            or pod.key[1] >= wanted.get(pod.key[0], 0)  # about to be deleted by scaling down
            or pod.terminating
            or dig(pod.obj, "status", "phase") in _FINISHED
        ):
            continue
        patch = _pod_patch(pod.obj, value, lift)
        if patch is not None:
            actions.append(Patch("v1", "Pod", ctx.job.namespace, pod.name, patch))
    return actions


def _pod_patch(pod: Obj, count: str, lift_gate: bool) -> Obj | None:
    """The live count, and our gate gone, if either is due. A merge patch
    replaces the whole list: gates others added (a webhook's) are kept in it."""
    # The uid makes the patch fail rather than touch a newer pod of that name.
    patch: Obj = {"metadata": {"uid": dig(pod, "metadata", "uid")}}
    if dig(pod, "metadata", "annotations", ANNOTATION_TRAINERS) != count:
        patch["metadata"]["annotations"] = {ANNOTATION_TRAINERS: count}
    gates = as_list(dig(pod, "spec", "schedulingGates"))
    kept = [g for g in gates if not is_admission_gate(g)]
    if lift_gate and len(kept) < len(gates):
        patch["spec"] = {"schedulingGates": kept}
    return patch if len(patch) > 1 or len(patch["metadata"]) > 1 else None


def status_fields(job: Obj, previous: Obj, now: str) -> Obj:
    """status.trainers, lastScaleTime and lastScaleReason.

    A finished job keeps what it had; the first count is not a scaling."""
    carried: Obj = {k: previous[k] for k in STATUS_FIELDS if k in previous}
    if previous.get("state") in _FINISHED:
        return carried
    count = trainer_count(job)
    if count is None:
        return carried
    old = previous.get("trainers")
    if is_int(old) and old != count:
        reason = f"Scaled from {old} to {count} trainers: {scale_reason(job, count)}"
        return {"trainers": count, "lastScaleTime": now, "lastScaleReason": reason}
    return carried | {"trainers": count}


PADDLEJOB: Final = Kind(
    name=KIND,
    roles=(MASTER, PSERVER, TRAINER),
    deciding_roles=(TRAINER,),
    container=CONTAINER,
    port_name=PORT_NAME,
    validate=validate,
    replicas=replicas,
    decorate_pod=decorate_pod,
    status_fields=status_fields,
    update_children=update_children,
)
