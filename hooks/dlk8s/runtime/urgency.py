"""Which changes of a child may change its job's phase or state, not only its counts.

The controller runs a pass at once for these and batches the rest, as a
job's pods change one by one while they are created, scheduled and started:
a pass per event would write the status once per pod, and a pass a second
later made the job's state lag its pods by up to a second (bench/results/
latency/results.md). A pass run for nothing costs a reconcile and no write; a
change wrongly batched costs latency, never correctness, as the batched
pass follows anyway.

What changes a job's phase or state (reconcile.active, reconcile.finished):
- a child deleted or being deleted (a lost pod is recreated and counted as
  a restart; the cleanup of a finished job ends), or a pod taken out of
  its slot (one stuck terminating: its replacement is created);
- a pod that fails (a restart, or the job's failure);
- the deciding pods all up (Running or done: the job turns Running), all
  succeeded (the job succeeds), or one of them no longer up.
Anything else (a pod created, scheduled, or started while it is not the
last decider to) only moves the counts of replicaStatuses: those wait for
the batch, and the pass that follows writes them all at once.

Between the two, SOON: a pod given its address (the pass creates its
Service, and the replica's name resolves from then on: reconcile.changes),
and the deciders up (the job turns Running) while other pods of the job are
still starting. A job's pods usually come up within a few hundred
milliseconds of each other (make bench's burst: the last one 30 ms after
the MASTER at the median, 260 ms at p90), and a pass at once would write
Running and, a batch later, the counts of the rest: a short wait writes
both at once. The last pod of such a job coming up runs the pass at once
(NOW), so the wait is only as long as the slowest sibling or the short
delay, whichever ends first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import NamedTuple

from dlk8s.job.jobmodel import Kind
from dlk8s.job.kinds import lookup
from dlk8s.job.kinds.elastic import is_admission_gate
from dlk8s.job.objects import Obj, as_dict, as_list, dig, is_terminating, replica_key
from dlk8s.job.outcomes import FAILED, RUNNING, SUCCEEDED, pod_outcome

UP = (RUNNING, SUCCEEDED)


class Urgency(Enum):
    """When a child's change runs its job's pass (see the module docstring)."""

    NONE = "none"  # no pass: it changed nothing a pass reads
    LATER = "later"  # with the batch
    SOON = "soon"  # after a short wait for the job's other pods
    NOW = "now"


def changes_state(
    job_kind: str,
    group: str,
    before: Obj | None,
    after: Obj | None,
    siblings: Callable[[], Iterable[Obj]],
) -> bool:
    """Whether the change may move the job's phase or state (SOON or NOW)."""
    return when(job_kind, group, before, after, siblings) in (Urgency.SOON, Urgency.NOW)


def when(
    job_kind: str,
    group: str,
    before: Obj | None,
    after: Obj | None,
    siblings: Callable[[], Iterable[Obj]],
    own_create: bool = False,
) -> Urgency:
    """When a child's change from `before` to `after` (None: absent) runs its
    job's pass. `group`: the child's field of Observed ("pods", "services",
    ...); `siblings`: the job's pods as they are now, asked for only when a
    pod comes up; `own_create`: the change is the echo of a create of the
    job's last pass."""
    if _unseen(group, before, after, own_create):
        return Urgency.NONE
    change = _Change(lookup(job_kind), group, before, after, siblings)
    if not _may_change_state(change):
        later = _last_up(change)
        return Urgency.SOON if later is Urgency.LATER and _addressed(change) else later
    kind = change.kind
    if group != "pods" or after is None or is_terminating(after) or kind is None:
        return Urgency.NOW
    if pod_outcome(after, kind.container).phase != RUNNING:
        return Urgency.NOW
    if _deciding_role(after, kind.deciding_roles) is None:
        return Urgency.NOW
    # The deciders are all up now: the job turns Running.
    return Urgency.NOW if _all_up(siblings(), kind) else Urgency.SOON


class _Change(NamedTuple):
    """One child's change, as `when` was asked about it."""

    kind: Kind | None  # the job's kind, None if unknown
    group: str
    before: Obj | None
    after: Obj | None
    siblings: Callable[[], Iterable[Obj]]


def _last_up(change: _Change) -> Urgency:
    """NOW for the last pod of a job whose deciders are up coming up (its
    Running pass may wait for it), else LATER."""
    kind, before, after = change.kind, change.before, change.after
    if change.group != "pods" or before is None or after is None or kind is None:
        return Urgency.LATER
    was, now = pod_outcome(before, kind.container), pod_outcome(after, kind.container)
    if now.phase != RUNNING or was.phase in UP:
        return Urgency.LATER
    # All up first: it stops at the first pod still starting, which in a
    # job of many WORKERs coming up one by one is most of the time.
    pods = list(change.siblings())
    if not _all_up(pods, kind):
        return Urgency.LATER
    has_deciders = any(_deciding_role(p, kind.deciding_roles) is not None for p in pods)
    return Urgency.NOW if has_deciders else Urgency.LATER


def _unseen(group: str, before: Obj | None, after: Obj | None, own_create: bool) -> bool:
    """A change no pass would see (the module docstring's NONE). Not the
    echo of a Workload: Kueue's webhook may have changed it, and its pass
    says how the job waits."""
    if after is None or is_terminating(after):
        return False
    if before is None:
        gates = as_list(dig(after, "spec", "schedulingGates"))
        gated = any(map(is_admission_gate, gates))
        return own_create and group != "workloads" and not gated and _as_created(group, after)
    return _but_version(before) == _but_version(after)


def _as_created(group: str, child: Obj) -> bool:
    """Whether a pod is still as our create made it. A watch's echo of a
    create always is; a list after a watch expired may show the pod first
    when it already runs or ended, and the pass that created it has not
    seen that (chaos sigstop_compact: jobs left Creating with every pod up)."""
    if group != "pods":
        return True
    status = as_dict(child.get("status"))
    pending = status.get("phase") in (None, "Pending") and set(status) <= {"phase", "qosClass"}
    return pending and not dig(child, "spec", "nodeName")


def _but_version(child: Obj) -> Obj:
    meta = {k: v for k, v in as_dict(child.get("metadata")).items() if k != "resourceVersion"}
    return child | {"metadata": meta}


def _addressed(change: _Change) -> bool:
    """A pod given its address: its Service is created by the next pass."""
    if change.group != "pods" or change.before is None or change.after is None:
        return False
    return not dig(change.before, "status", "podIP") and bool(dig(change.after, "status", "podIP"))


def _all_up(pods: Iterable[Obj], kind: Kind) -> bool:
    return all(pod_outcome(pod, kind.container).phase in UP for pod in pods)


def _may_change_state(change: _Change) -> bool:
    """Whether the child's change may change its job's phase or state."""
    before, after, group = change.before, change.after, change.group
    if after is None:
        return before is not None
    if group == "pods" and before is not None and replica_key(before) != replica_key(after):
        return True  # it left its slot (reconcile.stuck): the replacement is due
    if is_terminating(after):
        return before is None or not is_terminating(before)
    if before is None:
        return False  # a new child (our create, or a list): its job's own pass follows
    if group == "workloads":
        return True  # Kueue admitted, evicted or finished the job: act on it at once
    if group != "pods":
        return False
    kind = change.kind
    if kind is None:
        return True
    was, now = pod_outcome(before, kind.container), pod_outcome(after, kind.container)
    if now.phase == was.phase:
        return False
    if now.phase == FAILED:
        return True
    role = _deciding_role(after, kind.deciding_roles)
    if role is None:
        return False
    if now.phase not in UP:
        return was.phase in UP
    wanted = (SUCCEEDED,) if now.phase == SUCCEEDED else UP
    return all(
        pod_outcome(pod, kind.container).phase in wanted
        for pod in change.siblings()
        if _deciding_role(pod, (role,)) is not None
    )


def _deciding_role(pod: Obj, roles: tuple[str, ...]) -> str | None:
    """The pod's role if it is one of `roles` (labels hold roles in lower case)."""
    key = replica_key(pod)
    if key is None:
        return None
    return next((role for role in roles if role.lower() == key[0]), None)
