"""TfJob of the TensorFlow operator (`tensorflow.org/v1alpha1`), including the
README's `replica_specs` spelling and objects exported with `kubectl get -o yaml`."""

from __future__ import annotations

from typing import Final

from dlk8s.cli.convert.edits import drop, drop_unknown
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.replicas import ReplicaList
from dlk8s.job.objects import Obj

_TENSORBOARD_FIELDS: Final = ("logDir", "volumes", "volumeMounts", "serviceType")


class TfJob(ReplicaList):
    renames = (
        (
            "replica_specs",
            "replicaSpecs",
            "the TfJob README's spelling; its operator read replicaSpecs",
        ),
    )
    server_fields = ("RuntimeId", "runtimeId")
    replica_fields = ("replicas", "tfReplicaType", "tfPort", "template", "restartPolicy")
    spec_fields = ("replicaSpecs", "tfImage", "tensorboard", "runPolicy")
    decides = "MASTER"

    def replica(self, entry: Obj, path: str, note: Notes) -> None:
        if "IsDefaultPS" not in entry:
            return
        default_ps = entry.pop("IsDefaultPS")
        if default_ps is True and entry.get("tfReplicaType") == "PS" and "template" in entry:
            del entry["template"]
            note(
                f"{path}.template",
                "dropped: the old operator generated it for a PS without a template;"
                " dlk8s gives such a PS the standard gRPC server itself",
            )
        note(f"{path}.IsDefaultPS", "dropped: written by the old operator")

    def policies(self, spec: Obj, note: Notes) -> None:
        super().policies(spec, note)
        board = spec.get("tensorboard")
        if isinstance(board, dict):
            for key in ("volumes", "volumeMounts", "serviceType"):
                if key in board and board[key] in (None, "", []):
                    drop(board, key, f"spec.tensorboard.{key}", note, "empty (the old default)")
            drop_unknown(board, _TENSORBOARD_FIELDS, "spec.tensorboard", note)
