"""What the kinds the autoscaler sizes share (PaddleJob's trainers, an
elastic PyTorchJob's workers): the count a job's annotations ask for and
why, the status fields and the event that show it, and the admission gate
new pods of the scaled role wait behind (docs/kinds.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dlk8s.job.actions import Action, Event, Patch
from dlk8s.job.jobmodel import JobContext
from dlk8s.job.objects import Obj, as_list, dig, is_int, show
from dlk8s.job.vocabulary import LABEL_QUEUE_NAME, MAX_REPLICAS, EventType

# How much of a reason the annotation keeps, and how much status and events show.
MAX_REASON: Final = 1000
SHOWN_REASON: Final = 300
# A pod of the scaled role created while the autoscaler keeps nodes for a
# starving job carries this scheduling gate until the autoscaler gives its
# job a count (its admission; a count written by anyone else is no
# admission): see config.Admission.
ADMISSION_GATE: Final = "dlk8s.io/admission"
SCALE_FIELDS: Final = ("lastScaleTime", "lastScaleReason")
_FINISHED: Final = ("Succeeded", "Failed")


@dataclass(frozen=True)
class CountAnnotations:
    """The pair of annotations that carries an elastic job's count and its
    reason: the count in `count`; the reason in `reason` as "<count>:
    <reason>", so that a reason is only ever shown next to the count it was
    given for (a later hand-set count makes a stale reason fall back to the
    plain explanation)."""

    count: str  # e.g. dlk8s.io/trainers
    reason: str  # e.g. dlk8s.io/trainers-reason
    noun: str  # what is counted, plural: "trainers"
    default: str  # where the count comes from without a usable annotation
    bounds: str  # what the count is kept within, as the spec names it

    def requested(self, job: object) -> int | None:
        """The count the annotation asks for, if it is a number."""
        value = dig(job, "metadata", "annotations", self.count)
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            text = value.strip()
            return int(text) if len(text) < 10 else MAX_REPLICAS
        return None

    def annotations(self, count: int, reason: str) -> dict[str, str]:
        """A decision (the autoscaler's, or a user's) as the job carries it."""
        return {self.count: str(count), self.reason: f"{count}: {reason}"[:MAX_REASON]}

    def reason_on(self, job: object, count: int) -> str | None:
        """The reason the job's annotation gives for `count`, if it gives one."""
        written = dig(job, "metadata", "annotations", self.reason)
        prefix = f"{count}: "
        if isinstance(written, str) and written.startswith(prefix) and len(written) > len(prefix):
            return written[len(prefix) :][:SHOWN_REASON]
        return None

    def explain(self, job: object, count: int) -> str:
        """Why the job runs `count`, for status and events."""
        given = self.reason_on(job, count)
        if given is not None:
            return given
        raw = dig(job, "metadata", "annotations", self.count)
        asked = self.requested(job)
        if raw is None:
            return f"no {self.count} annotation: {self.default}"
        if asked is None:
            return f"{self.count} is not a count ({show(raw)}): {self.default}"
        if asked != count:
            return f"{self.count} asks for {asked}, kept within {self.bounds}"
        return f"set by the {self.count} annotation"


def scale_status(
    job: Obj, previous: Obj, now: str, field: str, count: int | None, names: CountAnnotations
) -> Obj:
    """status.<field> (the count the job runs), lastScaleTime and
    lastScaleReason. A finished job keeps what it had; the first count is
    not a scaling."""
    carried: Obj = {k: previous[k] for k in (field, *SCALE_FIELDS) if k in previous}
    if previous.get("state") in _FINISHED or count is None:
        return carried
    old = previous.get(field)
    if is_int(old) and old != count:
        reason = f"Scaled from {old} to {count} {names.noun}: {names.explain(job, count)}"
        return {field: count, "lastScaleTime": now, "lastScaleReason": reason}
    return carried | {field: count}


def scaled_event(
    ctx: JobContext, field: str, count: int, reason: str, names: CountAnnotations
) -> list[Action]:
    """The event of a change of status.<field>, with its reason."""
    previous = ctx.job.prev.get(field)
    if not is_int(previous) or previous == count:
        return []
    why = names.explain(ctx.job.raw, count)
    message = f"Scaling {names.noun} from {previous} to {count}: {why}"
    return [Event(EventType.NORMAL, reason, message)]


def is_admission_gate(gate: object) -> bool:
    """One of a pod's spec.schedulingGates is ours."""
    return isinstance(gate, dict) and gate.get("name") == ADMISSION_GATE


def sized_by_autoscaler(job: Obj, elastic: bool) -> bool:
    """Whether the autoscaler sizes, and so admits, this job: an elastic one
    (as its kind says) outside Kueue's queues, where Kueue sizes it when it
    admits it (docs/kueue.md; autoscaler.manifests skips those too)."""
    return elastic and not dig(job, "metadata", "labels", LABEL_QUEUE_NAME)


def awaits_admission(ctx: JobContext, elastic: bool) -> bool:
    """New pods of the scaled role are to wait behind ADMISSION_GATE: the
    autoscaler keeps nodes for a starving job, and has given this job, one
    it sizes, no count (a count its annotation carries may be anyone's)."""
    admission = ctx.config.admission
    return (
        admission is not None
        and admission.closed
        and sized_by_autoscaler(ctx.job.raw, elastic)
        and not admission.admitted(ctx.job.uid)
    )


def add_gate(pod: Obj) -> None:
    pod["spec"]["schedulingGates"] = [
        *as_list(pod["spec"].get("schedulingGates")),
        {"name": ADMISSION_GATE},
    ]


def may_lift_gate(ctx: JobContext, elastic: bool) -> bool:
    """Once the autoscaler has given the job a count, its pods go to the
    scheduler. Where nothing would ever admit the job (no autoscaler, or a
    job it does not size, such as one Kueue now queues), a gate left goes."""
    admission = ctx.config.admission
    return (
        admission is None
        or not sized_by_autoscaler(ctx.job.raw, elastic)
        or admission.admitted(ctx.job.uid)
    )


def gates_left(pod: Obj) -> list[object] | None:
    """The pod's scheduling gates without ours, if ours is there (a merge
    patch replaces the whole list: gates others added, a webhook's, stay)."""
    gates = as_list(dig(pod, "spec", "schedulingGates"))
    kept = [g for g in gates if not is_admission_gate(g)]
    return kept if len(kept) < len(gates) else None


def lift_gates(ctx: JobContext, role: str) -> list[Action]:
    """A patch per live pod of `role` that still carries our gate."""
    wanted = {r.role.lower(): r.replicas for r in ctx.replicas}
    actions: list[Action] = []
    for pod in ctx.job.children.pods:
        if (
            pod.key is None
            or pod.key[0] != role.lower()
            or pod.key[1] >= wanted.get(pod.key[0], 0)  # about to be deleted by scaling down
            or pod.terminating
            or dig(pod.obj, "status", "phase") in _FINISHED
        ):
            continue
        kept = gates_left(pod.obj)
        if kept is not None:
            # The uid makes the patch fail rather than touch a newer pod of that name.
            patch: Obj = {
                "metadata": {"uid": dig(pod.obj, "metadata", "uid")},
                "spec": {"schedulingGates": kept},
            }
            actions.append(Patch("v1", "Pod", ctx.job.namespace, pod.name, patch))
    return actions
