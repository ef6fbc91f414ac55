"""A world whose deleted pods leave tombstones, and pods that Kubernetes disrupts.

The runtime's ChildIndex keeps the last state of a job's pod deleted lately
(Observed.gone) until a pod of that name shows again; this world does the
same, so that a pod evicted between two passes can be told from a lost one.
`amnesia` plays an operator restarted in between: no tombstone survives it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from dlk8s.job.actions import Delete
from dlk8s.job.failurepolicy import worth_remembering
from dlk8s.job.jobmodel import Observed

from .worlds import STAMP, World

EVICTED = ("EvictionByEvictionAPI", "Eviction API: evicting")
TAINTED = ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")


@dataclass
class Graveyard(World):
    # pod name -> its last state, while no pod of that name exists again
    gone: dict[str, dict[str, Any]] = field(default_factory=dict)

    def observed(self) -> Observed:
        graves = [copy.deepcopy(pod) for _, pod in sorted(self.gone.items())]
        return replace(super().observed(), gone=graves)

    def amnesia(self) -> None:
        """An operator restart: the tombstones are lost."""
        self.gone.clear()

    def _create(self, obj: dict[str, Any]) -> None:
        if obj["kind"] == "Pod":
            self.gone.pop(obj["metadata"]["name"], None)
        super()._create(obj)

    def _delete(self, action: Delete, graceful: bool) -> None:
        before = self.children.get((action.kind, action.name))
        super()._delete(action, graceful)
        if action.kind == "Pod" and ("Pod", action.name) not in self.children:
            self._bury(before)

    def vanish(self, name: str) -> None:
        self._bury(self.pod(name))
        super().vanish(name)

    def _bury(self, pod: dict[str, Any] | None) -> None:
        if pod is not None and worth_remembering(pod):
            self.gone[pod["metadata"]["name"]] = copy.deepcopy(pod)

    def disrupt(self, name: str, why: tuple[str, str] = EVICTED, then: str = "vanish") -> None:
        """Kubernetes marks the pod DisruptionTarget, then deletes it: `then`
        is vanish (gone before the next pass, as on kwok), terminate (still
        there, being deleted, as a kubelet's grace period) or fail (the
        kubelet killed it and left it Failed, as its own eviction does)."""
        pod = self.pod(name)
        status = pod.setdefault("status", {})
        condition = {"type": "DisruptionTarget", "status": "True"}
        status["conditions"] = [
            *status.get("conditions", []),
            condition | {"reason": why[0], "message": why[1]},
        ]
        if then == "vanish":
            self.vanish(name)
        elif then == "terminate":
            pod["metadata"]["deletionTimestamp"] = STAMP
        else:
            status["phase"] = "Failed"


def failure_rule(action: str, **match: Any) -> dict[str, Any]:
    """One rule of spec.runPolicy.podFailurePolicy: `codes=[42]` (In),
    `not_in=[...]`, `conditions=["DisruptionTarget"]`, `roles=[...]`."""
    rule: dict[str, Any] = {"action": action}
    if "codes" in match:
        rule["onExitCodes"] = {"operator": "In", "values": match["codes"]}
    if "not_in" in match:
        rule["onExitCodes"] = {"operator": "NotIn", "values": match["not_in"]}
    if "container" in match:
        rule["onExitCodes"]["containerName"] = match["container"]
    if "conditions" in match:
        rule["onPodConditions"] = [{"type": t, "status": "True"} for t in match["conditions"]]
    if "roles" in match:
        rule["replicaTypes"] = match["roles"]
    return rule


def rules(*items: dict[str, Any]) -> dict[str, Any]:
    return {"podFailurePolicy": {"rules": list(items)}}
