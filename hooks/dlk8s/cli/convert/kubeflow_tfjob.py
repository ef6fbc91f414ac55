"""Kubeflow training-operator's TFJob (`kubeflow.org/v1`): its `tfReplicaSpecs`
map (`Chief`, `Master`, `Worker`, `PS`, `Evaluator`) and `successPolicy`."""

from __future__ import annotations

import copy
from typing import Final

from dlk8s.cli.convert.edits import Drop, drop_all
from dlk8s.cli.convert.kubeflow import ReplicaMap
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.replicas import replica_list
from dlk8s.job.kinds.tfjob import MASTER, PS, RULES, WORKER
from dlk8s.job.objects import Obj
from dlk8s.job.vocabulary import SuccessPolicy

_SPEC_DROPS: Final[tuple[Drop, ...]] = (
    (
        "successPolicy",
        "Kubeflow's default: the MASTER decides the job, if no replica failed for good",
    ),
    ("enableDynamicWorker", "dlk8s writes TF_CONFIG once per pod, with every replica in it"),
)
_CHIEF_FIRST: Final = (
    "dlk8s needs a MASTER: worker 0 became it, named chief in TF_CONFIG (masterTaskType:"
    " chief), and the other workers are numbered from 0; TensorFlow's strategies treat a"
    " chief as Kubeflow's worker 0, but a program that looks for worker 0 by name must look"
    " for the chief"
)


class KubeflowTFJob(ReplicaMap):
    prefix = "tf"
    rules = RULES
    # Kubeflow's Chief and Master are both the MASTER here: TensorFlow names the
    # first chief and the second master, which masterTaskType keeps.
    role_map = (("Chief", MASTER), ("Master", MASTER), ("Worker", WORKER), ("PS", PS))
    dropped_roles = (
        (
            "Evaluator",
            "dlk8s's TFJob has no evaluator (Kubeflow kept it out of TF_CONFIG's cluster);"
            " run it as a job of its own",
        ),
    )
    default_restart_policy = "Never"
    spec_fields = ("replicaSpecs", "tfConfig", "runPolicy", "managedBy")

    def reshape(self, spec: Obj, note: Notes) -> None:
        roles = spec.get(self.map_field)
        keys = {str(k).lower(): str(k) for k in roles} if isinstance(roles, dict) else {}
        super().reshape(spec, note)
        entries = replica_list(spec)
        masters = [i for i, e in enumerate(entries) if e.get(self.role_field) == MASTER]
        path = f"spec.{self.map_field}"
        for index in reversed(masters[1:]):
            del entries[index]
            note(f"{path}.{keys['master']}", "dropped: the Chief is the job's MASTER")
        if "chief" in keys:
            spec["tfConfig"] = {"masterTaskType": "chief"}
            note(f"{path}.{keys['chief']}", "now the MASTER, named chief in TF_CONFIG")
        elif not masters and "worker" in keys:
            self.chief_from_worker_0(spec, f"{path}.{keys['worker']}", note)

    def chief_from_worker_0(self, spec: Obj, path: str, note: Notes) -> None:
        worker = self.role_entry(spec, WORKER)
        replicas = worker.get("replicas", 1) if worker is not None else 0
        if worker is None or not isinstance(replicas, int) or replicas < 1:
            return
        master = copy.deepcopy(worker) | {self.role_field: MASTER, "replicas": 1}
        entries = replica_list(spec)
        entries.insert(0, master)
        if replicas == 1:
            entries.remove(worker)
        else:
            worker["replicas"] = replicas - 1
        spec["tfConfig"] = {"masterTaskType": "chief"}
        note(path, _CHIEF_FIRST)

    def policies(self, spec: Obj, note: Notes) -> None:
        super().policies(spec, note)
        policy = spec.get("runPolicy")
        if spec.get("successPolicy") == SuccessPolicy.ALL_WORKERS and isinstance(policy, dict):
            policy["successPolicy"] = spec.pop("successPolicy")
            note("spec.successPolicy", "moved to spec.runPolicy.successPolicy")
        drop_all(spec, _SPEC_DROPS, "spec", note)
