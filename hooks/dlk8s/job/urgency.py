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
  a restart; the cleanup of a finished job ends);
- a pod that fails (a restart, or the job's failure);
- the deciding pods all up (Running or done: the job turns Running), all
  succeeded (the job succeeds), or one of them no longer up.
Anything else (a pod created, scheduled, or started while it is not the
last decider to) only moves the counts of replicaStatuses: those wait for
the batch, and the pass that follows writes them all at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dlk8s.job.kinds import lookup
from dlk8s.job.objects import Obj, is_terminating, replica_key
from dlk8s.job.policy import FAILED, RUNNING, SUCCEEDED, pod_outcome

UP = (RUNNING, SUCCEEDED)


def changes_state(
    job_kind: str,
    group: str,
    before: Obj | None,
    after: Obj | None,
    siblings: Callable[[], Iterable[Obj]],
) -> bool:
    """Whether a child's change from `before` to `after` (None: absent) may
    change its job's phase or state. `group`: the child's field of Observed
    ("pods", "services", ...); `siblings`: the job's pods as they are now,
    asked for only when a deciding pod comes up."""
    if after is None:
        return before is not None
    if is_terminating(after):
        return before is None or not is_terminating(before)
    if before is None:
        return False  # a new child (our create, or a list): its job's own pass follows
    if group == "workloads":
        return True  # Kueue admitted, evicted or finished the job: act on it at once
    if group != "pods":
        return False
    kind = lookup(job_kind)
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
        for pod in siblings()
        if _deciding_role(pod, (role,)) is not None
    )


def _deciding_role(pod: Obj, roles: tuple[str, ...]) -> str | None:
    """The pod's role if it is one of `roles` (labels hold roles in lower case)."""
    key = replica_key(pod)
    if key is None:
        return None
    return next((role for role in roles if role.lower() == key[0]), None)
