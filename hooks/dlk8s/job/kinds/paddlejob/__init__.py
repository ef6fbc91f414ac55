"""PaddleJob: PaddlePaddle EDL's elastic TrainingJob (docs/kinds.md).

One sub-package: its spec is read and checked in `spec`, its pods are
built in `pods`, from each role's template (`templates`) and the shell
that starts Paddle's launcher (`launch`); here the Kind, and what keeps a
running job's trainer count current: the live count patched into its pods,
and its status fields.
"""

from __future__ import annotations

from typing import Final

from dlk8s.job.actions import Action, Patch
from dlk8s.job.jobmodel import ElasticRole, JobContext, Kind
from dlk8s.job.kinds.elastic import gates_left, may_lift_gate, scale_status, scaled_event
from dlk8s.job.kinds.paddlejob.pods import decorate_pod, replicas
from dlk8s.job.kinds.paddlejob.spec import (
    ANNOTATION_TRAINERS,
    CONTAINER,
    KIND,
    MASTER,
    PORT_NAME,
    PSERVER,
    TRAINER,
    TRAINERS,
    fault_tolerant,
    is_elastic,
    trainer_bounds,
    trainer_count,
    validate,
)
from dlk8s.job.objects import Obj, dig

REASON_SCALED: Final = "TrainersScaled"
_FINISHED: Final = ("Succeeded", "Failed")


def update_children(ctx: JobContext) -> list[Action]:
    """Patch the live count into every pod that stays, and lift the
    admission gate once the job may start; an event per change."""
    count = ctx.pod_count(TRAINER)
    value = str(count)
    actions = scaled_event(ctx, "trainers", count, REASON_SCALED, TRAINERS)
    wanted = {r.role.lower(): r.replicas for r in ctx.replicas}
    lift = may_lift_gate(ctx, is_elastic(ctx.job.raw) and fault_tolerant(ctx.job.raw))
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
    kept = gates_left(pod)
    if lift_gate and kept is not None:
        patch["spec"] = {"schedulingGates": kept}
    return patch if len(patch) > 1 or len(patch["metadata"]) > 1 else None


def status_fields(job: Obj, previous: Obj, now: str) -> Obj:
    """status.trainers, lastScaleTime and lastScaleReason (elastic.scale_status)."""
    return scale_status(job, previous, now, "trainers", trainer_count(job), TRAINERS)


def elastic(job: Obj) -> ElasticRole | None:
    """An elastic job's trainers, minInstance..maxInstance."""
    bounds = trainer_bounds(job)
    if bounds is None or bounds[0] >= bounds[1]:
        return None
    return ElasticRole(TRAINER, *bounds, TRAINERS.annotations, TRAINERS.requested(job))


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
    elastic=elastic,
)
