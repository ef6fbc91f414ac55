"""MXJob of the MXNet fork (`fioravanzo.org/v1alpha1`), with its `mxPort`."""

from __future__ import annotations

from dlk8s.cli.convert.edits import drop_all
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.replicas import ReplicaList
from dlk8s.job.objects import Obj

_PS_ROOT_PORT = "the scheduler's port, DMLC_PS_ROOT_PORT"


class MXJob(ReplicaList):
    server_fields = ("RuntimeId", "runtimeId")
    replica_renames = (
        ("mxPort", "psRootPort", _PS_ROOT_PORT),
        ("PsRootPort", "psRootPort", _PS_ROOT_PORT),
    )
    replica_fields = ("replicas", "mxReplicaType", "psRootPort", "template", "restartPolicy")
    spec_fields = ("replicaSpecs", "runPolicy")
    decides = "SCHEDULER"

    def parts(self, spec: Obj, note: Notes) -> None:
        super().parts(spec, note)
        why = "dlk8s adds no default container; every replica's template needs an mxnet container"
        drop_all(spec, (("mxImage", why),), "spec", note)
