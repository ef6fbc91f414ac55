"""Caffe2Job (`kubeflow.org/v1alpha1`) in both operators' shapes: one
`replicaSpecs` object with `backendSpecs`, and the list with `ReplicaType`
and `backend`."""

from __future__ import annotations

from typing import Any, Final

from dlk8s.cli.convert.edits import drop_unknown, replace_key
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.replicas import ReplicaList
from dlk8s.job.objects import Obj

_BACKEND_FIELDS: Final = (
    "backendType",
    "redisHost",
    "redisPort",
    "nfsPath",
    "nfsServer",
    "nfsServerPath",
)


class Caffe2Job(ReplicaList):
    server_fields = ("RuntimeID", "RuntimeId", "runtimeId")
    replica_renames = (("ReplicaType", "replicaType", ""), ("replica_type", "replicaType", ""))
    replica_fields = ("replicas", "replicaType", "template", "restartPolicy")
    spec_fields = ("backendSpecs", "replicaSpecs", "runPolicy")

    def reshape(self, spec: Obj, note: Notes) -> None:
        for old in ("backend", "Backend"):
            if old in spec:
                backend = spec[old]
                if "backendSpecs" in spec:
                    del spec[old]
                    note(f"spec.{old}", "dropped: spec.backendSpecs is set as well and wins")
                else:
                    replace_key(spec, old, "backendSpecs", {"backendType": backend})
                    note(f"spec.{old}", f"moved to spec.backendSpecs.backendType ({backend!r})")
        specs = spec.get("replicaSpecs")
        if isinstance(specs, dict):
            spec["replicaSpecs"] = [{"replicaType": "WORKER", **specs}]
            note(
                "spec.replicaSpecs",
                "one object made a one-entry list with replicaType WORKER (that shape had only"
                " workers; a CRD field cannot take both an object and a list)",
            )

    def parts(self, spec: Obj, note: Notes) -> None:
        super().parts(spec, note)
        backend = spec.get("backendSpecs")
        if isinstance(backend, dict):
            drop_unknown(backend, _BACKEND_FIELDS, "spec.backendSpecs", note)

    def decider(self, replica_specs: list[Any]) -> str:
        # A MASTER decides where there is one; the one-object shape had only workers.
        has_master = any(
            isinstance(e, dict) and e.get("replicaType") == "MASTER" for e in replica_specs
        )
        return "MASTER" if has_master else "WORKER"
