"""`dlk8s-operator convert` output against the real apiserver and CRDs.

Every seed example (tests/data/seeds/) is converted by the command as a user
runs it, and its output applied with a server-side dry run and kubectl's
strict field validation: the structural schema, the CEL rules and the
unknown-field check of crds/ all have their say. The seed jobs as
tests/data/kwok/ has them (convert's output, names made distinct) get the
same treatment, and an unconverted seed shows that the apiserver would have
refused what convert fixes. Kubeflow training-operator's kubeflow.org/v1
PyTorchJobs and TFJobs (tests/data/kubeflow/) go the same way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dlk8s_dev.localcluster import LocalCluster

from ...unit.support.seeds import KWOK, TWINS
from ..helpers import CRDS

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
SEEDS = sorted((REPO / "tests" / "data" / "seeds").glob("*.yaml"))
JOB_SEEDS = [p for p in SEEDS if p.name != "tfjob-controller-config.yaml"]
EXAMPLES = sorted(KWOK / twin for twin in TWINS.values() if twin)
KUBEFLOW = sorted((REPO / "tests" / "data" / "kubeflow").glob("*.yaml"))


@pytest.fixture(scope="module")
def crds(cluster: LocalCluster) -> None:
    # Server-side, forcing conflicts: a helm release of an earlier test may own
    # the same CRDs with the same content.
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    cluster.wait_established(*(f"crd/{c}" for c in CRDS))


def convert(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dlk8s.cli.convert", *argv],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def dry_run(
    cluster: LocalCluster, namespace: str, manifests: str
) -> subprocess.CompletedProcess[str]:
    # An exported job names its namespace; the rest go to the test's.
    named = any(
        (d or {}).get("metadata", {}).get("namespace") for d in yaml.safe_load_all(manifests)
    )
    where = [] if named else ["-n", namespace]
    return cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", *where, "-f", "-",
        input=manifests, check=False,
    )  # fmt: skip


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("seed", JOB_SEEDS, ids=[p.stem for p in JOB_SEEDS])
def test_converted_seed_is_accepted(cluster: LocalCluster, namespace: str, seed: Path) -> None:
    done = convert("-f", str(seed))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(str(seed)), "every note names its file"
    applied = dry_run(cluster, namespace, done.stdout)
    assert applied.returncode == 0, applied.stderr
    assert "(server dry run)" in applied.stdout
    kinds = {d["kind"] for d in yaml.safe_load_all(done.stdout)}
    assert all(f"{kind.lower()}.dlk8s.io/" in applied.stdout for kind in kinds)
    assert "Warning" not in applied.stderr, applied.stderr  # no unknown or dropped field


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_documented_conversion_is_accepted(
    cluster: LocalCluster, namespace: str, example: Path
) -> None:
    applied = dry_run(cluster, namespace, example.read_text())
    assert applied.returncode == 0, applied.stderr
    assert "(server dry run)" in applied.stdout


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("manifest", KUBEFLOW, ids=[p.stem for p in KUBEFLOW])
def test_converted_kubeflow_job_is_accepted(
    cluster: LocalCluster, namespace: str, manifest: Path
) -> None:
    done = convert("-f", str(manifest))
    assert done.returncode == 0, done.stderr
    assert f"{manifest}: " in done.stderr
    [job] = yaml.safe_load_all(done.stdout)
    assert job["apiVersion"] == "dlk8s.io/v1alpha1"
    applied = dry_run(cluster, namespace, done.stdout)
    assert applied.returncode == 0, applied.stderr
    assert f"{job['kind'].lower()}.dlk8s.io/{job['metadata']['name']}" in applied.stdout
    assert "Warning" not in applied.stderr, applied.stderr  # no unknown or dropped field


@pytest.mark.usefixtures("crds")
def test_an_unconverted_kubeflow_job_is_refused(cluster: LocalCluster, namespace: str) -> None:
    """Kubeflow's replica map under dlk8s's group: the apiserver refuses it."""
    raw = yaml.safe_load((REPO / "tests" / "data" / "kubeflow" / "pytorchjob-ddp.yaml").read_text())
    raw["apiVersion"] = "dlk8s.io/v1alpha1"
    applied = dry_run(cluster, namespace, yaml.safe_dump(raw))
    assert applied.returncode != 0
    assert 'unknown field "spec.pytorchReplicaSpecs"' in applied.stderr


@pytest.mark.usefixtures("crds")
def test_all_seeds_at_once_from_standard_input(cluster: LocalCluster, namespace: str) -> None:
    text = "\n---\n".join(p.read_text() for p in SEEDS if "exported" not in p.name)
    done = subprocess.run(
        [sys.executable, "-m", "dlk8s.cli.convert", "-f", "-", "--rename-legacy-gpu"],
        input=text, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    jobs = list(yaml.safe_load_all(done.stdout))
    assert len(jobs) == len(JOB_SEEDS) - 1
    assert "alpha.kubernetes.io/nvidia-gpu" not in done.stdout
    # Several seeds share a name: one kind, one name per dry run.
    for job in jobs:
        applied = dry_run(cluster, namespace, yaml.safe_dump(job))
        assert applied.returncode == 0, (job["metadata"]["name"], applied.stderr)


@pytest.mark.usefixtures("crds")
def test_an_unconverted_seed_is_refused(cluster: LocalCluster, namespace: str) -> None:
    """What convert is for: the apiserver refuses EDL's spelling under dlk8s's group."""
    raw = yaml.safe_load((REPO / "tests" / "data" / "seeds" / "trainingjob-edl.yaml").read_text())
    raw.update(apiVersion="dlk8s.io/v1alpha1", kind="PaddleJob")
    applied = dry_run(cluster, namespace, yaml.safe_dump(raw))
    assert applied.returncode != 0
    assert 'unknown field "spec.ports_num"' in applied.stderr
