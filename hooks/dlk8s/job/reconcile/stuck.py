"""Pods stuck terminating on a node that no longer answers.

A pod is named for its slot (`{job}-{role}-{index}`), and a name is held
until the pod object is gone. On a node that stopped answering (powered
off, or cut off from the API server) a pod deleted by the taint manager,
an eviction or a person stays Terminating: only its kubelet confirms that
its containers stopped, and the object goes once it has. Its replacement
could not take the name, and the job would wait until the node came back
or someone force-deleted the pod.

So a pod still there well past its deletion deadline (metadata.
deletionTimestamp, the end of its grace period, by which a kubelet that
answers has stopped it and said so: STUCK_AFTER when the taint manager
deleted it, its node found lost, else STUCK_ANY_AFTER) is taken out of its slot:
the operator removes its replica-index label. The slot's Service no longer
selects it (it publishes not-ready addresses, a terminating pod's too, so
the dead address would still resolve), the pod no longer fills the slot,
and the next pass creates the replacement under the first free name
(childnames.free_pod_name) with the slot's name as its hostname. The stuck
pod is left to its kubelet or to pod GC. A pod that has ended (its kubelet
answered) lingers only while a finalizer holds it: ours comes off after
the status write of the pass that sees it (reconcile.tracking), and one
held by someone else's is passed over too past the same wait, its event
saying why. Whether its going counts a restart is decided as for any pod
that goes (restarts.py): not for a disruption (the taint manager's
eviction, a drain), as one for a pod deleted by hand.

The Job controller creates the replacement as soon as the pod is
terminating (podReplacementPolicy TerminatingOrFailed, its default without
a podFailurePolicy); a StatefulSet waits for the node. The wait here is a
middle way: a kubelet that answers has confirmed long before, and a pod
whose containers stop slowly is never doubled. A node cut off from the API
server whose pods still run and reach their peers can run the old pod
beside its replacement until it rejoins (docs/troubleshooting.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from dlk8s.job.actions import Action, Event, Patch
from dlk8s.job.failurepolicy import pod_conditions
from dlk8s.job.jobmodel import ChildView
from dlk8s.job.objects import as_list, as_str, dig, later, parse_time
from dlk8s.job.reconcile.slots import SlotView
from dlk8s.job.vocabulary import (
    DISRUPTION_TARGET,
    LABEL_REPLICA_INDEX,
    TRACKING_FINALIZER,
    EventType,
    Reason,
)

# Seconds past a pod's deletion deadline after which it is taken for stuck
# when the taint manager deleted it (its DisruptionTarget says
# DeletionByTaintManager: the control plane has found its node unreachable
# or not ready), and after which any other pod is. A kubelet that answers
# confirms within seconds of the deadline, but a loaded one can take tens of
# seconds (make test's real node at a load of 19 on 2 cores): without the
# control plane's word, only a long wait tells a lost node from a slow one.
STUCK_AFTER: Final = 30.0
STUCK_ANY_AFTER: Final = 300.0


def stuck_pods(
    views: Sequence[SlotView], pods: Sequence[ChildView], now: datetime
) -> tuple[list[Action], list[float]]:
    """Take the slots' pods stuck terminating out of their slots, and the
    seconds until the job's other terminating `pods` would be stuck."""
    actions: list[Action] = []
    for view in views:
        if view.pod is not None and is_stuck(view.pod, now):
            actions += _detach(view, now)
    waits = []
    for pod in pods:
        due = stuck_at(pod)
        if due is not None and due > now:
            waits.append((due - now).total_seconds())
    return actions, waits


def is_stuck(pod: ChildView, now: datetime) -> bool:
    """Still there STUCK_AFTER seconds past its deletion deadline, and not
    only for our own finalizer on a pod that ended (its kubelet answered:
    the pass that lets it go is due, reconcile.tracking)."""
    due = stuck_at(pod)
    if due is None or due > now:
        return False
    return not _ended(pod) or bool(_held_by(pod))


def _ended(pod: ChildView) -> bool:
    return dig(pod.obj, "status", "phase") in ("Succeeded", "Failed")


def _held_by(pod: ChildView) -> list[str]:
    """The finalizers on the pod other than ours."""
    found = as_list(dig(pod.obj, "metadata", "finalizers"))
    return [str(f) for f in found if f != TRACKING_FINALIZER]


def stuck_at(pod: ChildView) -> datetime | None:
    """When a terminating pod will count as stuck; None if it is not terminating."""
    deadline = parse_time(dig(pod.obj, "metadata", "deletionTimestamp"))
    if deadline is None:
        return None
    return later(deadline, STUCK_AFTER if _node_lost(pod) else STUCK_ANY_AFTER)


def _node_lost(pod: ChildView) -> bool:
    """Deleted by the taint manager: its node is unreachable or not ready."""
    return any(
        c.get("type") == DISRUPTION_TARGET
        and c.get("status") == "True"
        and c.get("reason") == "DeletionByTaintManager"
        for c in pod_conditions(pod.obj)
    )


def _detach(view: SlotView, now: datetime) -> list[Action]:
    assert view.pod is not None
    obj = view.pod.obj
    node = as_str(dig(obj, "spec", "nodeName"))
    on = f" on node {node}" if node else ""
    deadline = parse_time(dig(obj, "metadata", "deletionTimestamp"))
    late = int((now - deadline).total_seconds()) if deadline else 0
    why = (
        f"has ended but is held by {', '.join(_held_by(view.pod))}"
        if _ended(view.pod)
        else "does not answer"
    )
    message = (
        f"{view.label}: pod {view.pod.name}{on} is still terminating {late} s after"
        f" its grace period ended; its node {why}. Taking it out of its slot"
        " and its Service: a replacement starts beside it"
    )
    # The uid makes the patch fail on a newer pod of that name (a Conflict),
    # which the executor takes as nothing left to do.
    meta = {"uid": as_str(dig(obj, "metadata", "uid")), "labels": {LABEL_REPLICA_INDEX: None}}
    namespace = as_str(dig(obj, "metadata", "namespace"))
    return [
        Patch("v1", "Pod", namespace, view.pod.name, {"metadata": meta}),
        Event(EventType.WARNING, Reason.POD_STUCK, message),
    ]
