"""`dlk8s-operator convert`: the seed operators' and Kubeflow training-operator's
jobs as dlk8s jobs (docs/migration.md, docs/kubeflow.md).

Reading YAML as the seeds' users have it (`forgiving_yaml`), the pieces every
conversion shares (`notes`, `edits`, `metadata`), the one order of a
conversion (`skeleton`, and `replicas` for the kinds with a `replicaSpecs`
list, `kubeflow` for training-operator's replica maps), one module per kind
registered in `seed_kinds`, one document at a time (`document`) and the
command (`command`).

It imports only the job layer, the standard library and PyYAML, so it works
without a cluster or the Kubernetes client.
"""

from __future__ import annotations

from dlk8s.cli.convert.command import add_arguments, main, run
from dlk8s.cli.convert.document import Converted, convert_document, convert_text, dump
from dlk8s.cli.convert.forgiving_yaml import load_documents
from dlk8s.cli.convert.notes import Note
from dlk8s.cli.convert.seed_kinds import SEED_KINDS, SeedKind
from dlk8s.cli.convert.skeleton import Options

__all__ = [
    "SEED_KINDS",
    "Converted",
    "Note",
    "Options",
    "SeedKind",
    "add_arguments",
    "convert_document",
    "convert_text",
    "dump",
    "load_documents",
    "main",
    "run",
]
