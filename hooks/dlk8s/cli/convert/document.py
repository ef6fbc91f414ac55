"""One file's documents, each converted into a dlk8s job or left out, with its notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import yaml

from dlk8s.cli.convert.edits import unshared
from dlk8s.cli.convert.forgiving_yaml import load_documents
from dlk8s.cli.convert.metadata import metadata
from dlk8s.cli.convert.notes import Note, Notes
from dlk8s.cli.convert.seed_kinds import SeedKind, seed_kind
from dlk8s.cli.convert.skeleton import Options
from dlk8s.job.kinds import KINDS
from dlk8s.job.objects import Obj
from dlk8s.job.vocabulary import API_VERSION

# What a conversion does unless the command line asks otherwise.
DEFAULTS: Final = Options()


@dataclass
class Converted:
    """What one input file turned into."""

    # The jobs to print, in the file's order.
    jobs: list[Obj] = field(default_factory=list)
    # Every repair, rename, drop and refusal, in the order they were made.
    notes: list[Note] = field(default_factory=list)
    # A document could not be converted, or dlk8s would refuse what it became.
    failed: bool = False


def _not_a_job(doc: Obj) -> str:
    kind = doc.get("kind")
    data = doc.get("data")
    if (
        kind == "ConfigMap"
        and isinstance(data, dict)
        and any(k.replace("-", "_") == "controller_config_file.yaml" for k in data)
    ):
        return (
            "a seed operator's controller config, not a job: left out. Give its"
            " accelerators to the dlk8s chart as config.accelerators (or keep the file in"
            " a ConfigMap named by config.existingConfigMap); see docs/chart.md"
        )
    return f"{doc.get('apiVersion')} {kind} is not a job of a seed operator: left out"


def convert_document(
    doc: object, source: str, index: int, options: Options, notes: list[Note]
) -> tuple[Obj | None, bool]:
    """One input document as a dlk8s job (or None), and whether it failed."""
    if doc is None:
        return None, False
    if not isinstance(doc, dict):
        notes.append(Note(f"{source}: document {index + 1}", "not a Kubernetes object: left out"))
        return None, True
    api_version = str(doc.get("apiVersion", ""))
    kind = str(doc.get("kind", ""))
    name = (
        (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    )
    note = Notes(notes, f"{source}: {kind or 'document ' + str(index + 1)} {name or '(no name)'}")
    if api_version == API_VERSION and kind in KINDS:
        note("", "already a dlk8s job: printed as it is")
        return unshared(doc), False
    seed = seed_kind(kind, api_version)
    if seed is None:
        note("", _not_a_job(doc))
        return None, False
    if api_version not in seed.api_versions:
        # e.g. training-operator's kubeflow.org/v1 MXJob, whose replicas are a map
        note(
            "apiVersion",
            f"{api_version} {kind} is not the seed operators' shape (they used"
            f" {', '.join(seed.api_versions)}): left out",
        )
        return None, True
    return _convert_seed(doc, seed, note, options)


def _convert_seed(
    doc: Obj, seed: SeedKind, note: Notes, options: Options
) -> tuple[Obj | None, bool]:
    api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
    job: Obj = {"apiVersion": API_VERSION, "kind": seed.kind}
    note("apiVersion", f"{api_version} is now {API_VERSION}")
    if kind != seed.kind:
        note("kind", f"{kind} is now {seed.kind}")
    job["metadata"] = metadata(doc.get("metadata"), note)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        note("spec", "missing or not an object: the job cannot be converted")
        return None, True
    job["spec"] = seed.converter.convert(unshared(spec), note, options)
    if "status" in doc:
        note("status", "dropped: the old operator's status; dlk8s writes its own")
    for key in [k for k in doc if k not in ("apiVersion", "kind", "metadata", "spec", "status")]:
        note(key, "dropped: not part of a job")
    problems = KINDS[seed.kind].validate(job)
    for problem in problems:
        note("", f"dlk8s would refuse the converted job: {problem}")
    return job, bool(problems)


def convert_text(text: str, source: str, options: Options = DEFAULTS) -> Converted:
    """Every job of one file's text, converted, with its notes."""
    result = Converted()
    try:
        documents, repairs = load_documents(text)
    except yaml.YAMLError as err:
        result.notes.append(Note(source, f"not valid YAML: {err}"))
        result.failed = True
        return result
    result.notes += [Note(source, repair) for repair in repairs]
    for index, doc in enumerate(documents):
        job, failed = convert_document(doc, source, index, options, result.notes)
        if job is not None:
            result.jobs.append(job)
        result.failed = result.failed or failed
    return result


def dump(jobs: list[Obj]) -> str:
    """Multi-document YAML, fields in the order the conversion left them."""
    return "".join(
        "---\n" + yaml.safe_dump(job, sort_keys=False, default_flow_style=False, width=100)
        for job in jobs
    )
