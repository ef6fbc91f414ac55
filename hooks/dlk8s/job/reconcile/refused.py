"""A pass whose creates or deletes the API server refused: what to tell.

reconcile builds the status of a pass as if every create in it succeeds
(the pods it creates count as Pending, see status.replica_statuses). When
the API server refuses some (Pod Security admission, a quota, a LimitRange,
a webhook, an invalid pod), that status would lie, and writing none leaves
a new job with no status at all. So the status of such a pass:

- counts none of the pods that were not created, so the next pass does not
  take them for lost ones;
- sets the condition Created to False with reason FailedCreate and the API
  server's own words, which `kubectl describe` shows next to the Warning
  event of the same reason;
- keeps everything else; the controller retries the job with back-off (a
  quota may free up), and the first pass that creates every pod sets
  Created back to True.

A pod refused for a field the API server does not know (children are sent
with strict field validation) is a spec no retry can fix: the job fails as
InvalidSpec, naming the field as the job spells it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from dlk8s.job.actions import Action, Event
from dlk8s.job.conditions import set_condition
from dlk8s.job.jobmodel import JobView
from dlk8s.job.objects import Obj, as_dict, as_int, as_list, as_str, dig, is_int
from dlk8s.job.outcomes import PENDING
from dlk8s.job.reconcile.finished import finish
from dlk8s.job.reconcile.invalid import invalid_verdict
from dlk8s.job.reconcile.view import Result
from dlk8s.job.vocabulary import LABEL_REPLICA_TYPE, ConditionType, EventType, Reason

CREATE: Final = "create"
DELETE: Final = "delete"
# A condition message quotes this much of the API server's words at most.
MAX_MESSAGE: Final = 1024
_UNKNOWN_FIELD: Final = re.compile(r'unknown field "([^"]+)"')


@dataclass(frozen=True)
class Refusal:
    """A create or delete the API server refused, in its own words."""

    verb: str  # CREATE or DELETE
    obj: Obj  # the manifest (create) or the observed object (delete)
    message: str  # the Status message, e.g. 'pods "j-master-0" is forbidden: ...'

    @property
    def unknown_fields(self) -> list[str]:
        """Fields strict field validation did not know, as the child spells them."""
        if self.verb != CREATE or "strict decoding error" not in self.message:
            return []
        return _UNKNOWN_FIELD.findall(self.message)


def after_refusals(
    result: Result, not_created: Sequence[Obj], refusals: Sequence[Refusal]
) -> Result:
    """The status and events of a pass that `reconcile` planned as `result`
    but whose `refusals` the API server refused, leaving `not_created`
    uncreated (refused or failed otherwise). Its actions are Events only:
    what else is to do, the next pass decides. Pure, like reconcile."""
    job = result.job
    if job is None:
        raise ValueError("after_refusals needs the Result of reconcile (Result.job)")
    events: list[Action] = list(refusal_events(refusals))
    problems = unknown_field_problems(job, refusals)
    if not problems:
        return Result(events, refused_status(result.status, not_created, refusals, job.stamp), None)
    # The status says Failed at once; the finished path cleans up on the
    # pass that the status write brings. The spec itself was usable: the
    # pass built the refused pods from it.
    verdict = invalid_verdict(problems)
    failed = finish(job, verdict, True)
    events.append(Event(EventType.WARNING, verdict.reason, verdict.message))
    return Result(events, failed.status, None)


def refusal_events(refusals: Sequence[Refusal]) -> list[Event]:
    """One Warning per refusal quoting the API server (merged per pass later)."""
    reasons = {CREATE: Reason.FAILED_CREATE, DELETE: Reason.FAILED_DELETE}
    return [Event(EventType.WARNING, reasons[r.verb], r.message) for r in refusals]


def refused_status(
    status: Obj, not_created: Sequence[Obj], refusals: Sequence[Refusal], now: str
) -> Obj:
    """The pass's status without the pods that were not created, and with
    Created=False naming the refusals (see the module docstring)."""
    fixed = dict(status)
    fixed["replicaStatuses"] = _uncounted(as_list(status.get("replicaStatuses")), not_created)
    pending = status.get("pendingPods")
    if is_int(pending):  # the sum over replicaStatuses, where the status has it
        pods = sum(1 for obj in not_created if obj.get("kind") == "Pod")
        fixed["pendingPods"] = max(0, pending - pods)
    creates = [r for r in refusals if r.verb == CREATE]
    if creates:
        message = _summary(creates)
        conditions = as_list(status.get("conditions"))
        fixed["conditions"] = set_condition(
            conditions, ConditionType.CREATED, False, Reason.FAILED_CREATE, message, now
        )
        fixed["reason"] = Reason.FAILED_CREATE
    return fixed


def unknown_field_problems(job: JobView, refusals: Sequence[Refusal]) -> list[str]:
    """What InvalidSpec says of pods refused for unknown fields."""
    problems = []
    templates = _templates(job) if any(r.unknown_fields for r in refusals) else {}
    for refusal in refusals:
        fields = refusal.unknown_fields
        if not fields:
            continue
        where = templates.get(_role(refusal.obj), "")
        named = ", ".join(f"{where}.{field}" if where else field for field in fields)
        problems.append(
            f"unknown field {named} (the API server refused the pod: {refusal.message})"
        )
    return problems


def _summary(refusals: Sequence[Refusal]) -> str:
    first = refusals[0].message
    if len(refusals) == 1:
        return first[:MAX_MESSAGE]
    others = ", ".join(as_str(dig(r.obj, "metadata", "name")) for r in refusals[1:])
    more = f"; {len(refusals) - 1} more refused: {others}"
    return (first + more)[:MAX_MESSAGE]


def _role(obj: Obj) -> str:
    return as_str(dig(obj, "metadata", "labels", LABEL_REPLICA_TYPE))


def _uncounted(entries: list[object], not_created: Sequence[Obj]) -> list[Obj]:
    """replicaStatuses with each pod that was not created taken off Pending."""
    missing: dict[str, int] = {}
    for obj in not_created:
        if obj.get("kind") == "Pod":
            missing[_role(obj)] = missing.get(_role(obj), 0) + 1
    fixed = []
    for entry in entries:
        entry = dict(as_dict(entry))
        gone = missing.get(as_str(entry.get("replicaType")).lower(), 0)
        if gone:
            # Pending pods never decide a replica's state, so it stays as it is.
            states = dict(as_dict(entry.get("replicasStates")))
            left = max(0, as_int(states.pop(PENDING, 0), 0) - gone)
            entry["replicasStates"] = states | ({PENDING: left} if left else {})
        fixed.append(entry)
    return fixed


def _templates(job: JobView) -> dict[str, str]:
    """Where the template of each role (lower-case) is in the job, for kinds
    with replicaSpecs; none for the others."""
    spec = as_dict(job.raw.get("spec"))
    if job.kind is None or not isinstance(spec.get("replicaSpecs"), list):
        return {}
    templates: dict[str, str] = {}
    for index, replica in enumerate(job.kind.replicas(job.raw)):
        templates.setdefault(replica.role.lower(), f"spec.replicaSpecs[{index}].template")
    return templates
