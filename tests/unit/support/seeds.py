"""The seed operators' job examples, as their users had them and as dlk8s
spells them: the two sets of test data, and which file is which in each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
# As their users had them: what `dlk8s-operator convert` reads (tests/data/seeds/README.md).
SEEDS = ROOT / "tests" / "data" / "seeds"
# In dlk8s's spelling, as the kwok tests run them (tests/data/kwok/README.md).
KWOK = ROOT / "tests" / "data" / "kwok"
# Each seed job's twin in KWOK; None: an exported job, which only convert
# reads (test_exported_tfjob_loses_what_the_server_and_the_old_operator_wrote).
TWINS: dict[str, str | None] = {
    "caffe2job-backendspecs.yaml": "caffe2job-redis.yaml",
    "caffe2job-replicatype.yaml": "caffe2job-redis-in-master.yaml",
    "mxjob-cifar-gpu.yaml": "mxjob-cifar-gpu.yaml",
    "mxjob-linear-dist.yaml": "mxjob-linear-dist.yaml",
    "tfjob-example-job.yaml": "tfjob.yaml",
    "tfjob-exported.yaml": None,
    "tfjob-smoke-gpu.yaml": "tfjob-smoke-gpu.yaml",
    "tfjob-tensorboard-azure.yaml": "tfjob-tensorboard-azure.yaml",
    "tfjob-tensorboard-gke.yaml": "tfjob-tensorboard-gke.yaml",
    "trainingjob-edl.yaml": "paddlejob-edl.yaml",
}


def kwok_job(name: str, *, namespace: str, uid: str) -> dict[str, Any]:
    """The job of KWOK/`name` as the API server would hold it in `namespace`."""
    job: dict[str, Any] = yaml.safe_load((KWOK / name).read_text())
    job["metadata"] |= {"namespace": namespace, "uid": uid, "generation": 1}
    return job
