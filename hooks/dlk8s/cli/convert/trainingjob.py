"""EDL's TrainingJob (`paddlepaddle.org/v1`), with its snake_case and
`min-instance` fields, as a PaddleJob."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from dlk8s.cli.convert.edits import Drop, drop, drop_all, drop_unknown, rename_all, unshared
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.skeleton import Skeleton
from dlk8s.job.objects import Obj, as_list

# EDL's dashed fields of a trainer or pserver, and their dlk8s names.
_INSTANCES: Final = (("min-instance", "minInstance", ""), ("max-instance", "maxInstance", ""))
# What EDL wrote into a trainer, pserver or master that a PaddleJob has no place for.
_PART_DROPS: Final[tuple[Drop, ...]] = (
    ("etcd-endpoint", "the master pod of a fault-tolerant PaddleJob runs its own etcd"),
    ("replicaSpec", "EDL wrote the Job or ReplicaSet it made there; dlk8s owns pods directly"),
)
# Each role of the job, and the fields dlk8s knows of it.
_ROLES: Final = (
    (
        "trainer",
        (
            "entrypoint",
            "workspace",
            "passes",
            "minInstance",
            "maxInstance",
            "resources",
            "template",
        ),
    ),
    ("pserver", ("minInstance", "maxInstance", "resources", "template")),
    ("master", ("resources", "template")),
)
_ROLE_NAMES: Final = tuple(role for role, _ in _ROLES)
_HOST_NETWORK: Final = (
    "host_network",
    "PaddleJob pods use the pod network (EDL needed a port manager for the host's;"
    " a role's template.spec.hostNetwork asks for the host's, without one)",
)
# EDL's volumes and mounts of every pod of the job, and where a pod template has them.
_VOLUME_FIELDS: Final = (
    ("volumes", "volumes"),
    ("VolumeMounts", "volumeMounts"),
    ("volumeMounts", "volumeMounts"),
)


class TrainingJob(Skeleton):
    renames = (
        ("ports_num", "portsNum", "EDL's snake_case"),
        ("ports_num_for_sparse", "portsNumForSparse", "EDL's snake_case"),
        ("fault_tolerant", "faultTolerant", "EDL's snake_case"),
    )
    spec_fields = (
        "image",
        "port",
        "portsNum",
        "portsNumForSparse",
        "faultTolerant",
        "trainer",
        "pserver",
        "master",
        "runPolicy",
    )

    def reshape(self, spec: Obj, note: Notes) -> None:
        trainer = spec.get("trainer")
        if "passes" in spec:
            passes = spec.pop("passes")
            if isinstance(trainer, dict) and "passes" not in trainer:
                trainer["passes"] = passes
                note("spec.passes", "moved to spec.trainer.passes")
            else:
                note("spec.passes", "dropped: spec.trainer.passes is set and wins")
        drop_all(spec, (_HOST_NETWORK,), "spec", note)
        for key, into in _VOLUME_FIELDS:
            if key in spec:
                _move_to_templates(spec, key, into, note)

    def parts(self, spec: Obj, note: Notes) -> None:
        for role, known in _ROLES:
            part = spec.get(role)
            if isinstance(part, dict):
                path = f"spec.{role}"
                rename_all(part, _INSTANCES, path, note)
                drop_all(part, _PART_DROPS, path, note)
                drop_unknown(part, known, path, note)
                _resources(part, path, note)
        if "master" in spec and not spec["master"]:
            del spec["master"]

    def resources(self, spec: Obj) -> Iterator[tuple[str, object]]:
        for role, _ in _ROLES:
            part = spec.get(role)
            resources = part.get("resources") if isinstance(part, dict) else None
            yield f"spec.{role}.resources", resources


def _move_to_templates(spec: Obj, key: str, into: str, note: Notes) -> None:
    """EDL's spec.volumes or spec.VolumeMounts, given to every role's pod
    template (the master's only in a fault-tolerant job, the only one with
    a master), as EDL gave them to every pod of the job."""
    value = spec.pop(key)
    if not isinstance(value, list) or not value:
        note(f"spec.{key}", "dropped: empty" if value in (None, []) else "dropped: not a list")
        return
    tolerant = spec.get("faultTolerant") is True
    moved = []
    for role in _ROLE_NAMES if tolerant else _ROLE_NAMES[:2]:
        part = spec.setdefault(role, {}) if role == "master" else spec.get(role)
        template = part.setdefault("template", {}) if isinstance(part, dict) else None
        pod = template.setdefault("spec", {}) if isinstance(template, dict) else None
        if not isinstance(pod, dict):
            continue
        target = pod if into == "volumes" else _main_container(pod)
        target[into] = unshared(value)
        where = "spec" if into == "volumes" else "spec.containers[paddle]"
        moved.append(f"spec.{role}.template.{where}.{into}")
    if not moved:
        note(f"spec.{key}", "dropped: the job has no trainer or pserver to give them to")
        return
    note(f"spec.{key}", f"moved to {', '.join(moved)} (EDL gave them to every pod of the job)")


def _main_container(pod: Obj) -> Obj:
    """The template's paddle container, added first if it has none."""
    containers = [c for c in as_list(pod.get("containers")) if isinstance(c, dict)]
    main = next((c for c in containers if c.get("name") == "paddle"), None)
    if main is None:
        main = {"name": "paddle"}
        containers.insert(0, main)
    pod["containers"] = containers
    return main


def _resources(part: Obj, path: str, note: Notes) -> None:
    resources = part.get("resources")
    if isinstance(resources, dict):
        drop_unknown(resources, ("limits", "requests"), f"{path}.resources", note)
        for key in [
            k for k in ("limits", "requests") if k in resources and resources[k] in (None, {})
        ]:
            drop(resources, key, f"{path}.resources.{key}", note, "empty")
        if not resources:
            del part["resources"]
