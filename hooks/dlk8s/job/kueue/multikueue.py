"""Who runs a job, and the Workload MultiKueue made for it (docs/multicluster.md).

On a manager cluster, a job whose spec.managedBy is MultiKueue's is
dispatched by Kueue to a worker cluster: Kueue copies it there (without
managedBy, labelled with the Workload it made there) and copies that
copy's whole status back. On the worker, the copy runs under MultiKueue's
Workload, named by its label, and never makes one of its own.
"""

from __future__ import annotations

from dlk8s.job.objects import Obj, OwnerReference, as_dict, as_list, dig
from dlk8s.job.vocabulary import (
    LABEL_PREBUILT_WORKLOAD,
    MANAGED_BY_MULTIKUEUE,
    MANAGED_BY_OPERATOR,
    Handling,
)


def manager_of(job: object) -> str:
    """spec.managedBy, with its default (the operator) when unset or empty."""
    value = dig(job, "spec", "managedBy")
    return value if isinstance(value, str) and value else MANAGED_BY_OPERATOR


def handling(job: object) -> str:
    """What a pass does with the job (vocabulary.Handling)."""
    manager = manager_of(job)
    if manager == MANAGED_BY_OPERATOR:
        return Handling.OURS
    return Handling.DISPATCHED if manager == MANAGED_BY_MULTIKUEUE else Handling.FOREIGN


def prebuilt_workload(meta: Obj) -> str | None:
    """The Workload a job must run under instead of making its own, if its
    kueue.x-k8s.io/prebuilt-workload-name label names one."""
    name = dig(meta, "labels", LABEL_PREBUILT_WORKLOAD)
    return name if isinstance(name, str) and name else None


def adoption(workload: Obj, owner: OwnerReference) -> tuple[Obj | None, str]:
    """The patch that makes the job (`owner`) the controller of its prebuilt
    Workload, None when it already is; or why it cannot be (another object
    controls it). Adopted, the Workload goes with the job's copy, and its
    changes reach the job's passes as any child's do. The resourceVersion
    makes the patch fail rather than take a Workload changed meanwhile."""
    meta = as_dict(workload.get("metadata"))
    refs = [r for r in as_list(meta.get("ownerReferences")) if isinstance(r, dict)]
    controller = next((r for r in refs if r.get("controller") is True), None)
    if controller is None:
        patch = {
            "ownerReferences": [*refs, dict(owner)],
            "resourceVersion": meta.get("resourceVersion"),
        }
        return {"metadata": patch}, ""
    if controller.get("uid") == owner["uid"]:
        return None, ""
    return None, f"{controller.get('kind')} {controller.get('name')} controls it"
