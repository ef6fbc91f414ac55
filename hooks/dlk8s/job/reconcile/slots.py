"""The slots of a valid job and the pods that fill them.

match_pods pairs every slot of the spec with the pod that fills it (found by
its labels) and judges that pod (outcomes.pod_outcome; a failed or disrupted
one by podFailurePolicy, failurepolicy.judge); a pod of the job that fills
no slot is a stray. A slot no pod fills is judged by the last state of its
pod deleted lately, if the runtime kept one (Observed.gone). The active
and suspended paths read the job's pods through these SlotViews.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlk8s.job.failurepolicy import Action, Judgement, judge
from dlk8s.job.jobmodel import ChildView, JobContext, Slot
from dlk8s.job.objects import ReplicaStatus, as_str, dig
from dlk8s.job.outcomes import (
    FAILED,
    PENDING,
    Decision,
    PodOutcome,
    decide,
    pod_outcome,
    replica_status,
)


@dataclass(frozen=True)
class SlotView:
    """One slot and the pod that fills it, if any."""

    slot: Slot
    pod: ChildView | None  # None: no pod fills the slot (yet)
    outcome: PodOutcome | None  # where the pod stands, judged by the kind's main container
    decision: str  # what that means for the job (policy.Decision)
    # podFailurePolicy's word on the pod, or on the last state of the one
    # gone from an empty slot: None unless it failed or was disrupted.
    judgement: Judgement | None = None
    gone: ChildView | None = None  # the slot's pod deleted lately, when no pod fills it

    @property
    def terminating(self) -> bool:
        return self.pod is not None and self.pod.terminating

    @property
    def settled(self) -> bool:
        """Has a pod that needs nothing from us (pending, running or done)."""
        return (
            self.pod is not None
            and not self.terminating
            and self.decision not in (Decision.RESTART, Decision.REPLACE)
        )

    @property
    def subject(self) -> ChildView | None:
        """The pod judged: the one that fills the slot, or the one gone from it."""
        return self.pod or self.gone

    @property
    def uid(self) -> str:
        """The judged pod's uid ("" without one)."""
        return as_str(dig(self.subject.obj, "metadata", "uid")) if self.subject else ""

    @property
    def label(self) -> str:
        return f"{self.slot.role} {self.slot.index}"

    @property
    def pod_name(self) -> str:
        """The judged pod's name: the slot's, or another while a pod stuck
        terminating holds it (stuck.py)."""
        return self.subject.name if self.subject else self.slot.name

    @property
    def up(self) -> bool:
        """Running, or already done (a decider that waits for its peers)."""
        return self.outcome is not None and self.outcome.phase in ("Running", "Succeeded")

    @property
    def detail(self) -> str:
        return self.outcome.detail if self.outcome else "no pod"


def match_pods(ctx: JobContext) -> tuple[list[SlotView], list[ChildView]]:
    """Each slot's pod by the labels; everything else the job owns is a stray."""
    wanted = {(slot.role.lower(), slot.index) for slot in ctx.slots}
    groups: dict[tuple[str, int], list[ChildView]] = {}
    strays: list[ChildView] = []
    for pod in ctx.job.children.pods:
        if pod.key is not None and pod.key in wanted:
            groups.setdefault(pod.key, []).append(pod)
        else:
            strays.append(pod)
    # A slot's pod may have another name than the slot's (stuck.py): the
    # last states of deleted pods are found by their labels too.
    gone: dict[tuple[str, int], ChildView] = {}
    for pod in sorted(ctx.job.children.gone, key=lambda p: p.name):
        if pod.key is not None:
            gone.setdefault(pod.key, pod)
    views = []
    for slot in ctx.slots:
        key = (slot.role.lower(), slot.index)
        candidates = groups.get(key, [])
        # Prefer a pod not being deleted, then the one with the slot's name.
        candidates.sort(key=lambda p: (p.terminating, p.name != slot.name, p.name))
        strays += candidates[1:]
        if candidates:
            views.append(_view(ctx, slot, candidates[0]))
        else:
            views.append(_gone_view(ctx, slot, gone.get(key)))
    return views, strays


def _view(ctx: JobContext, slot: Slot, pod: ChildView) -> SlotView:
    outcome, judgement = _judged(ctx, slot, pod)
    if judgement is None:
        deciding = slot.role == ctx.deciding_role
        decision = decide(outcome, slot.replica.restart_policy, deciding)
    elif judgement.action == Action.COUNT:
        # A disrupted pod that still runs counts once it is gone (restarts.py).
        decision = Decision.RESTART if outcome.phase == FAILED else Decision.NONE
    else:
        decision = _UNCOUNTED[judgement.action]
    return SlotView(slot, pod, outcome, decision, judgement)


# What a judgement other than Count means for the slot's pod, present or gone.
_UNCOUNTED = {Action.FAIL_JOB: Decision.FAIL_JOB, Action.IGNORE: Decision.REPLACE}


def _gone_view(ctx: JobContext, slot: Slot, gone: ChildView | None) -> SlotView:
    """An empty slot, judged by the last state of its pod gone since the last
    pass: Count needs nothing here (restarts.py counts it as lost)."""
    if gone is None or gone.key != (slot.role.lower(), slot.index):
        return SlotView(slot, None, None, Decision.NONE)
    _, judgement = _judged(ctx, slot, gone)
    if judgement is None or judgement.action == Action.COUNT:
        return SlotView(slot, None, None, Decision.NONE, judgement, gone)
    return SlotView(slot, None, None, _UNCOUNTED[judgement.action], judgement, gone)


def _judged(ctx: JobContext, slot: Slot, pod: ChildView) -> tuple[PodOutcome, Judgement | None]:
    """Where `pod` stands, by the kind's main container, and podFailurePolicy's word on it."""
    outcome = pod_outcome(pod.obj, ctx.kind.container)
    deciding = slot.role == ctx.deciding_role
    rules = ctx.job.policy.failure_rules
    judgement = judge(
        pod.obj,
        outcome,
        rules,
        ctx.kind.container,
        slot.role,
        slot.replica.restart_policy,
        deciding,
    )
    return outcome, judgement


def replica_statuses(
    ctx: JobContext, views: Sequence[SlotView], creating: Sequence[SlotView] = ()
) -> list[ReplicaStatus]:
    """Pods by phase per replica. The pods this pass creates count as Pending:
    the status is written only once their creates succeeded, and the next
    pass finds lost pods by comparing with these totals. Left out, a
    replacement would stand in for a pod of its role seen gone next."""
    created = {v.slot.name for v in creating}
    # A pod that goes without counting a restart is left out: its end must
    # not count as a lost pod (restarts.py).
    counted = [
        (v.slot.replica, v.outcome or PodOutcome(PENDING))
        for v in views
        if (v.outcome is not None and v.decision != Decision.REPLACE) or v.slot.name in created
    ]
    return [
        replica_status(r.role, r.replicas, [o for replica, o in counted if replica is r])
        for r in ctx.replicas
    ]
