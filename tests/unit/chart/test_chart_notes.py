"""The job NOTES.txt hands a new user is one the CRD and the operator accept.

NOTES.txt cannot point at examples/ (a packaged chart has no checkout beside
it), so it carries a TFJob to paste into `kubectl apply -f -`. Rendered with
helm, that heredoc is cut out and checked with the CRD schema checker of
tests/unit/support/crd_schema.py and the operator's own validation.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from ..support.crd_schema import job_problems

ROOT = Path(__file__).resolve().parents[3]
HELM = ROOT / ".tools" / "bin" / "helm4"


def notes(*sets: str) -> str:
    argv = [str(HELM), "install", "dlk8s", str(ROOT / "charts" / "dlk8s"),
            "--namespace", "dlk8s-system", "--dry-run=client"]  # fmt: skip
    for item in sets:
        argv += ["--set", item]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return out[out.index("NOTES:") :]


def test_notes_job_is_accepted_by_the_crd_and_the_operator() -> None:
    text = notes()
    heredoc = re.search(r"kubectl apply -f - <<'JOB'\n(.*?)\nJOB\n", text, re.S)
    assert heredoc is not None, text
    job = yaml.safe_load(heredoc.group(1))
    assert (job["apiVersion"], job["kind"]) == ("dlk8s.io/v1alpha1", "TFJob")
    assert job_problems(job) == []
    assert f"kubectl get tfjobs.dlk8s.io {job['metadata']['name']}" in text


def test_notes_name_no_path_of_the_repository() -> None:
    for text in (notes(), notes("crds.install=false"), notes("cloud=gke", "tests.enabled=false")):
        assert "examples/" not in text
        assert not re.search(r"-f crds/?\b", text)
