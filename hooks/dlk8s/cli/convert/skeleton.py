"""The one order in which every seed kind's spec is converted.

A kind subclasses `Skeleton`, fills in its tables (renames, server fields,
known fields) and overrides the steps it has; `replicas.ReplicaList` is the
skeleton of the kinds whose replicas are a `replicaSpecs` list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Protocol

from dlk8s.cli.convert.edits import Rename, drop_all, drop_unknown, rename_all
from dlk8s.cli.convert.notes import Notes
from dlk8s.job.computeresources import GPU, LEGACY_GPU
from dlk8s.job.objects import Obj


@dataclass(frozen=True)
class Options:
    """What the command line asks of every conversion."""

    # --rename-legacy-gpu: ask for the device plugin's GPU where the seed asked
    # for the legacy name, which no current cluster offers.
    rename_legacy_gpu: bool = False


class Converter(Protocol):
    """Turns one seed job's spec (a copy it may change) into a dlk8s spec."""

    def convert(self, spec: Obj, note: Notes, options: Options) -> Obj: ...


class Skeleton:
    """The steps of a conversion, in the order their notes are told."""

    # Spec fields the seed spelled otherwise.
    renames: ClassVar[tuple[Rename, ...]] = ()
    # Spec fields the old operator wrote into the job itself.
    server_fields: ClassVar[tuple[str, ...]] = ()
    # Spec fields dlk8s knows; every other one is dropped with a note.
    spec_fields: ClassVar[tuple[str, ...]] = ()

    def convert(self, spec: Obj, note: Notes, options: Options) -> Obj:
        rename_all(spec, self.renames, "spec", note)
        why = "dlk8s derives it from the job's uid"
        drop_all(spec, tuple((key, why) for key in self.server_fields), "spec", note)
        self.reshape(spec, note)
        self.parts(spec, note)
        self.policies(spec, note)
        if options.rename_legacy_gpu:
            for path, resources in self.resources(spec):
                rename_legacy_gpu(resources, path, note)
        drop_unknown(spec, self.spec_fields, "spec", note)
        return spec

    def reshape(self, spec: Obj, note: Notes) -> None:
        """Moves the spec's fields to where dlk8s has them, before its parts are read."""

    def parts(self, spec: Obj, note: Notes) -> None:
        """Converts each replica or role of the job."""

    def policies(self, spec: Obj, note: Notes) -> None:
        """Converts what the seed said of the whole job: who decides it, its scheduler."""

    def resources(self, spec: Obj) -> Iterator[tuple[str, object]]:
        """Every `resources` of the job that may ask for a GPU, with its path."""
        return iter(())


def rename_legacy_gpu(resources: object, path: str, note: Notes) -> None:
    """Asks for the device plugin's resource where the seed asked for the legacy one."""
    for part in ("limits", "requests"):
        amounts = resources.get(part) if isinstance(resources, dict) else None
        if isinstance(amounts, dict) and LEGACY_GPU in amounts:
            amounts[GPU] = amounts.pop(LEGACY_GPU)
            note(f"{path}.{part}[{LEGACY_GPU}]", f"renamed to {GPU} (--rename-legacy-gpu)")
