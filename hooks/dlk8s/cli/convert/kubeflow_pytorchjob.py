"""Kubeflow training-operator's PyTorchJob (`kubeflow.org/v1`): its
`pytorchReplicaSpecs` map, `elasticPolicy` and `nprocPerNode`."""

from __future__ import annotations

from typing import Final

from dlk8s.cli.convert.edits import Drop, drop, drop_all, drop_unknown
from dlk8s.cli.convert.kubeflow import ReplicaMap
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.replicas import replica_list
from dlk8s.job.kinds.pytorchjob import MASTER, RULES, WORKER
from dlk8s.job.objects import Obj, as_dict, as_list

_ELASTIC: Final = "spec.elasticPolicy"
_ELASTIC_FIELDS: Final = ("minReplicas", "maxReplicas", "maxRestarts", "rdzvPort", "nProcPerNode")
_ELASTIC_DROPS: Final[tuple[Drop, ...]] = (
    ("rdzvHost", "dlk8s puts the rendezvous at the MASTER's pod, or WORKER 0's without one"),
    ("rdzvId", "dlk8s gives every agent the job's runtime id (PET_RDZV_ID)"),
    ("standalone", "a job of several pods cannot use a rendezvous local to one"),
    (
        "metrics",
        "dlk8s creates no HorizontalPodAutoscaler; change the WORKER replicas within"
        " minReplicas and maxReplicas to resize the job",
    ),
)
_RDZV_CONF: Final = "PET_RDZV_CONF"


class KubeflowPyTorchJob(ReplicaMap):
    prefix = "pytorch"
    rules = RULES
    role_map = (("Master", MASTER), ("Worker", WORKER))
    default_restart_policy = "OnFailure"
    spec_fields = ("replicaSpecs", "nprocPerNode", "elasticPolicy", "runPolicy", "managedBy")

    def policies(self, spec: Obj, note: Notes) -> None:
        super().policies(spec, note)
        policy = spec.get("elasticPolicy")
        if isinstance(policy, dict):
            self.elastic(spec, policy, note)
        self.processes(spec, note)

    def elastic(self, spec: Obj, policy: Obj, note: Notes) -> None:
        backend = policy.get("rdzvBackend")
        if "rdzvBackend" in policy:
            why = "dlk8s always uses c10d" + (
                "" if backend == "c10d" else f", not {backend}: the job no longer needs its store"
            )
            drop(policy, "rdzvBackend", f"{_ELASTIC}.rdzvBackend", note, why)
        if "rdzvConf" in policy:
            conf = drop(policy, "rdzvConf", f"{_ELASTIC}.rdzvConf", note, f"moved to {_RDZV_CONF}")
            self.rendezvous_conf(spec, conf, note)
        drop_all(policy, _ELASTIC_DROPS, _ELASTIC, note)
        if "nProcPerNode" in policy and "nprocPerNode" in spec:
            drop(policy, "nProcPerNode", f"{_ELASTIC}.nProcPerNode", note,
                 "spec.nprocPerNode is set as well and wins")  # fmt: skip
        self.bounds(spec, policy, note)
        drop_unknown(policy, _ELASTIC_FIELDS, _ELASTIC, note)
        if self.role_entry(spec, MASTER) is not None:
            note(
                _ELASTIC,
                "the MASTER now hosts the rendezvous (Kubeflow: WORKER 0) and counts as a"
                " node: PET_NNODES is minReplicas+1:maxReplicas+1",
            )
        else:
            note(
                _ELASTIC,
                "the job now succeeds once every WORKER has (Kubeflow: once any one had)",
            )

    def bounds(self, spec: Obj, policy: Obj, note: Notes) -> None:
        """Kubeflow's defaults for the bounds, written out: dlk8s needs both."""
        low, high = policy.get("minReplicas"), policy.get("maxReplicas")
        if low is not None and high is not None:
            return
        worker = self.role_entry(spec, WORKER) or {}
        count = worker.get("replicas", 1)
        value = low if low is not None else high if high is not None else count
        for key in ("minReplicas", "maxReplicas"):
            if key not in policy:
                policy[key] = value
                note(f"{_ELASTIC}.{key}", f"set to {value}, Kubeflow's default")

    def rendezvous_conf(self, spec: Obj, conf: object, note: Notes) -> None:
        """Kubeflow's rdzvConf list as torchrun's --rdzv-conf, in every pytorch container."""
        pairs = [as_dict(item) for item in as_list(conf)]
        value = ",".join(f"{p.get('key')}={p.get('value')}" for p in pairs if p.get("key"))
        if not value:
            return
        for index, entry in enumerate(replica_list(spec)):
            pod = as_dict(as_dict(as_dict(entry).get("template")).get("spec"))
            for container in as_list(pod.get("containers")):
                if isinstance(container, dict) and container.get("name") == self.rules.container:
                    env = container.setdefault("env", [])
                    if isinstance(env, list):
                        env.append({"name": _RDZV_CONF, "value": value})
                        note(
                            f"spec.replicaSpecs[{index}].template",
                            f"its {self.rules.container} container gets {_RDZV_CONF}={value}",
                        )

    def processes(self, spec: Obj, note: Notes) -> None:
        """Kubeflow set nprocPerNode to auto when neither place had it."""
        if "nprocPerNode" in spec or "nProcPerNode" in as_dict(spec.get("elasticPolicy")):
            return
        spec["nprocPerNode"] = "auto"
        note(
            "spec.nprocPerNode",
            "set to auto, Kubeflow's default: torchrun starts one process per GPU, or per CPU"
            " on a node without GPUs; set a number to choose",
        )
