"""The one table of the kinds `convert` reads, the seed operators' and
Kubeflow training-operator's: a new converter is a module beside this one and
a row here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dlk8s.cli.convert.caffe2job import Caffe2Job
from dlk8s.cli.convert.kubeflow_pytorchjob import KubeflowPyTorchJob
from dlk8s.cli.convert.kubeflow_tfjob import KubeflowTFJob
from dlk8s.cli.convert.mxjob import MXJob
from dlk8s.cli.convert.skeleton import Converter
from dlk8s.cli.convert.tfjob import TfJob
from dlk8s.cli.convert.trainingjob import TrainingJob


@dataclass(frozen=True)
class SeedKind:
    """One older operator's kind: what it is called there and here."""

    # The kind as the old operator's users wrote it (matched in any case).
    seed_kind: str
    # The apiVersions that kind had; another one has another shape.
    api_versions: tuple[str, ...]
    # The dlk8s kind it becomes.
    kind: str
    # What converts its spec.
    converter: Converter


SEED_KINDS: Final = (
    # tf-operator 0.1 moved the same TfJob to kubeflow.org/v1alpha1 as TFJob.
    SeedKind("TfJob", ("tensorflow.org/v1alpha1", "kubeflow.org/v1alpha1"), "TFJob", TfJob()),
    SeedKind("MXJob", ("fioravanzo.org/v1alpha1", "kubeflow.org/v1alpha1"), "MXJob", MXJob()),
    SeedKind("Caffe2Job", ("kubeflow.org/v1alpha1",), "Caffe2Job", Caffe2Job()),
    SeedKind("TrainingJob", ("paddlepaddle.org/v1",), "PaddleJob", TrainingJob()),
    # training-operator's, whose replicas are a map by role (docs/kubeflow.md).
    SeedKind("TFJob", ("kubeflow.org/v1",), "TFJob", KubeflowTFJob()),
    SeedKind("PyTorchJob", ("kubeflow.org/v1",), "PyTorchJob", KubeflowPyTorchJob()),
)


def seed_kind(kind: str, api_version: str) -> SeedKind | None:
    """The row for kind at api_version; else the first row for kind (whose
    apiVersions then say why the object is not converted)."""
    rows = [s for s in SEED_KINDS if kind.lower() == s.seed_kind.lower()]
    return next((s for s in rows if api_version in s.api_versions), None) or next(iter(rows), None)
