"""The job kinds the operator knows, by the `kind` of their custom resource."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from dlk8s.job.jobmodel import Kind
from dlk8s.job.kinds.caffe2job import CAFFE2JOB
from dlk8s.job.kinds.mxjob import MXJOB
from dlk8s.job.kinds.paddlejob import PADDLEJOB
from dlk8s.job.kinds.pytorchjob import PYTORCHJOB
from dlk8s.job.kinds.tfjob import TFJOB

KINDS: Final[Mapping[str, Kind]] = MappingProxyType(
    {kind.name: kind for kind in (TFJOB, MXJOB, CAFFE2JOB, PADDLEJOB, PYTORCHJOB)}
)


def lookup(name: object) -> Kind | None:
    return KINDS.get(name) if isinstance(name, str) else None
