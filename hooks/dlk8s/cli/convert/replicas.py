"""The skeleton of the kinds whose replicas are a `replicaSpecs` list of pod
templates (TfJob, MXJob, Caffe2Job), and the job-wide policies they share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from dlk8s.cli.convert.edits import Rename, drop_unknown, rename_all
from dlk8s.cli.convert.metadata import clean_template
from dlk8s.cli.convert.notes import Notes
from dlk8s.cli.convert.skeleton import Skeleton
from dlk8s.job.objects import Obj


class ReplicaList(Skeleton):
    """Converts each `replicaSpecs` entry, then the seed's termination policy and scheduler."""

    # Fields of one entry the seed spelled otherwise.
    replica_renames: ClassVar[tuple[Rename, ...]] = ()
    # Fields of one entry dlk8s knows; every other one is dropped with a note.
    replica_fields: ClassVar[tuple[str, ...]] = ()
    # The replica type whose exit decides the job in dlk8s.
    decides: ClassVar[str] = "MASTER"

    def parts(self, spec: Obj, note: Notes) -> None:
        for index, entry in enumerate(replica_list(spec)):
            if not isinstance(entry, dict):
                continue
            path = f"spec.replicaSpecs[{index}]"
            rename_all(entry, self.replica_renames, path, note)
            self.replica(entry, path, note)
            drop_unknown(entry, self.replica_fields, path, note)
            if isinstance(entry.get("template"), dict):
                clean_template(entry["template"], f"{path}.template", note)

    def replica(self, entry: Obj, path: str, note: Notes) -> None:
        """The kind's own changes to one entry, before its unknown fields are dropped."""

    def policies(self, spec: Obj, note: Notes) -> None:
        if "terminationPolicy" in spec:
            termination_policy(spec, self.decider(replica_list(spec)), note)
        if "schedulerName" in spec:
            scheduler_name(spec, replica_list(spec), note)

    def decider(self, replica_specs: list[Any]) -> str:
        """The replica type that decides this job."""
        return self.decides

    def resources(self, spec: Obj) -> Iterator[tuple[str, object]]:
        for index, template in templates(replica_list(spec)):
            pod = template.get("spec")
            containers = pod.get("containers") if isinstance(pod, dict) else None
            for c_index, container in enumerate(containers if isinstance(containers, list) else []):
                yield (
                    f"spec.replicaSpecs[{index}].template.spec.containers[{c_index}].resources",
                    container.get("resources") if isinstance(container, dict) else None,
                )


def replica_list(spec: Obj) -> list[Any]:
    specs = spec.get("replicaSpecs")
    return specs if isinstance(specs, list) else []


def templates(replica_specs: list[Any]) -> Iterator[tuple[int, Obj]]:
    for index, entry in enumerate(replica_specs):
        if isinstance(entry, dict) and isinstance(entry.get("template"), dict):
            yield index, entry["template"]


def scheduler_name(spec: Obj, replica_specs: list[Any], note: Notes) -> None:
    """The seeds' spec.schedulerName becomes each template's schedulerName."""
    name = spec.pop("schedulerName")
    note(
        "spec.schedulerName",
        "moved into replicaSpecs[].template.spec.schedulerName of every replica"
        " (dlk8s takes the pod's own field)",
    )
    for index, template in templates(replica_specs):
        pod = template.setdefault("spec", {})
        if isinstance(pod, dict) and "schedulerName" not in pod:
            pod["schedulerName"] = name
        elif isinstance(pod, dict) and pod["schedulerName"] != name:
            note(
                f"spec.replicaSpecs[{index}].template.spec.schedulerName",
                "kept; it differs from spec.schedulerName",
            )


def termination_policy(spec: Obj, deciding: str, note: Notes) -> None:
    policy = spec.pop("terminationPolicy")
    chief = policy.get("chief") if isinstance(policy, dict) else None
    same = (
        isinstance(chief, dict)
        and str(chief.get("replicaName", "")).upper() == deciding
        and chief.get("replicaIndex", 0) in (0, None)
    )
    if same or chief is None:
        note("spec.terminationPolicy", f"dropped: in dlk8s the {deciding} always decides the job")
    else:
        note(
            "spec.terminationPolicy",
            f"dropped: its chief {chief} no longer decides the job; in dlk8s the {deciding}"
            " does (exit 0 succeeds, 1-127 fails, 128-255 is retried)",
        )
