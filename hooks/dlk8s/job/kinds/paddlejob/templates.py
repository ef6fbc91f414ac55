"""PaddleJob's pod templates: what a user adds to the pods the operator builds.

`spec.master.template`, `spec.pserver.template` and `spec.trainer.template`
are core/v1 PodTemplateSpecs. The operator builds each role's pod from the
spec as EDL did (pods) and merges the role's template into it: the
template gives everything the operator does not decide (placement, pull
secrets, priority, volumes, security contexts, sidecars), the operator
keeps what makes the job a PaddleJob. docs/kinds.md says what wins where.
"""

from __future__ import annotations

import copy
from typing import Final

from dlk8s.job.objects import Obj, as_dict, as_list, dig
from dlk8s.job.validation import (
    container_lists_problems,
    objects_with_names_problems,
    optional_object,
    template_metadata_problems,
)

# The main container's fields that come from the spec, not from a template
# (image, the launcher, EDL's ports, spec.<role>.resources), so the
# autoscaler and EDL's variables read one truth.
OWNED_FIELDS: Final = ("image", "command", "args", "ports", "resources")
# Names the operator's own volumes take: the live count, the master's etcd,
# the Paddle launcher's logs (pods, launch).
RESERVED_VOLUMES: Final = ("dlk8s-trainers", "etcd-data", "dlk8s-paddle-log")
RESERVED_MASTER_CONTAINERS: Final = ("etcd",)


def role_template(job: object, role: str) -> Obj:
    """spec.<role>.template, or {} (read leniently)."""
    return as_dict(dig(job, "spec", role.lower(), "template"))


def merge_template(built: Obj, template: Obj) -> Obj:
    """The pod template `built` by the operator with the user's `template`
    merged in; neither is modified.

    Pod-level fields come from the template. Containers of the same name
    are merged: the template's fields, with the built container's on top,
    and both lists of variables and mounts (ours last, so ours win a
    clash of names). The template's other containers and volumes join ours.
    """
    spec = copy.deepcopy(as_dict(template.get("spec")))
    own = as_dict(built.get("spec"))
    theirs = {
        c.get("name"): c for c in as_list(spec.pop("containers", None)) if isinstance(c, dict)
    }
    containers = [
        _merge_container(theirs.pop(c["name"], {}), c) for c in as_list(own.get("containers"))
    ]
    spec["containers"] = containers + list(theirs.values())
    volumes = [v for v in as_list(spec.get("volumes")) if isinstance(v, dict)]
    spec["volumes"] = volumes + copy.deepcopy(as_list(own.get("volumes")))
    meta = as_dict(template.get("metadata"))
    labels = as_dict(meta.get("labels")) | as_dict(dig(built, "metadata", "labels"))
    metadata: Obj = {"labels": labels}
    if meta.get("annotations"):
        metadata["annotations"] = dict(as_dict(meta.get("annotations")))
    return {"metadata": metadata, "spec": spec}


def _merge_container(theirs: Obj, ours: Obj) -> Obj:
    merged = copy.deepcopy(theirs) | copy.deepcopy(ours)
    for key in ("env", "volumeMounts"):
        items = as_list(theirs.get(key)) + as_list(ours.get(key))
        if items:
            merged[key] = copy.deepcopy(items)
    return merged


# --- validation ----------------------------------------------------------------------


def template_problems(path: str, template: Obj, main: str, master: bool) -> list[str]:
    """A role's template: a PodTemplateSpec that leaves the operator's parts alone."""
    problems = optional_object(
        f"{path}.metadata", template.get("metadata"), template_metadata_problems
    )
    return problems + optional_object(
        f"{path}.spec", template.get("spec"), lambda p, spec: _spec_problems(p, spec, main, master)
    )


def _spec_problems(path: str, spec: Obj, main: str, master: bool) -> list[str]:
    problems = container_lists_problems(path, spec)
    for index, container in enumerate(as_list(spec.get("containers"))):
        name = dig(container, "name")
        where = f"{path}.containers[{index}]"
        if name == main:
            problems += [
                f"{where}.{key}: set by the PaddleJob (spec.image, the launcher, spec.port,"
                f" spec.<role>.resources); leave it out of the template"
                for key in OWNED_FIELDS
                if isinstance(container, dict) and key in container
            ]
        elif master and name in RESERVED_MASTER_CONTAINERS:
            problems.append(f"{where}.name: {name!r} is the master's etcd, added by the operator")
    volumes = spec.get("volumes")
    problems += objects_with_names_problems(f"{path}.volumes", volumes)
    return problems + [
        f"{path}.volumes[{index}].name: {volume['name']!r} is the operator's own volume"
        for index, volume in enumerate(as_list(volumes))
        if isinstance(volume, dict) and volume.get("name") in RESERVED_VOLUMES
    ]
