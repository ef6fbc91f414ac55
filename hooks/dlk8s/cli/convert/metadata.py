"""What an exported object carries that a new one must not: the API server's
fields and the old operator's references."""

from __future__ import annotations

from typing import Final

from dlk8s.cli.convert.edits import unshared
from dlk8s.cli.convert.notes import Notes
from dlk8s.job.objects import Obj

# Fields the API server sets on an object; an exported manifest carries them,
# a new object must not.
SERVER_METADATA: Final = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "clusterName",
    "managedFields",
)
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


def metadata(raw: object, note: Notes) -> Obj:
    if not isinstance(raw, dict):
        if raw is not None:
            note("metadata", "not an object; dropped")
        return {}
    meta: Obj = unshared(raw)
    for key in SERVER_METADATA:
        if key in meta:
            del meta[key]
            note(f"metadata.{key}", "dropped: the API server sets it for the new object")
    for key in ("ownerReferences", "finalizers"):
        if key in meta:
            del meta[key]
            note(f"metadata.{key}", "dropped: it referred to the old operator's objects")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
        note(f"metadata.annotations[{LAST_APPLIED}]", "dropped: it held the old manifest")
        if not annotations:
            del meta["annotations"]
    return meta


def clean_template(template: Obj, path: str, note: Notes) -> None:
    """`kubectl get -o yaml` writes `creationTimestamp: null` into templates."""
    meta = template.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k in SERVER_METADATA if k in meta]:
            del meta[key]
            note(f"{path}.metadata.{key}", "dropped: the API server sets it")
        if not meta:
            del template["metadata"]
