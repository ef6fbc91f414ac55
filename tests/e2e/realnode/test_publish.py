"""A release, published to a registry and installed from it as a user would.

A registry on 127.0.0.1 (Debian's docker-registry, its own port, config and
storage), and `make publish REGISTRY=127.0.0.1:<port>` into it: the very
target, from `make release`'s dist/ to the pushes. Then a fresh local
cluster whose real node was given no image but the pause sandbox, its
containerd pointed at that plain-HTTP registry (dlk8s_dev.registry):

- `helm install dlk8s oci://127.0.0.1:<port>/dlk8s/charts/dlk8s --version
  $(cat VERSION) --set cloud=gke` (plus where the node's images come from)
  and `helm test` pass, and the node's containerd pulled the operator by the
  digest the published chart pins, from that registry;
- examples/tfjob-train, its image set to the runtime the release published
  (a kustomize overlay, as a user on a mirror would), trains to Done.

And the login the CI workflow gives `make publish` from its secrets
(REGISTRY_USER, REGISTRY_PASSWORD): a registry that asks for one refuses
the same publish without it and takes everything with it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster, leftover_processes, missing_tools
from dlk8s_dev.localdeploy import Install, operator_pods
from dlk8s_dev.registry import LocalRegistry, NodeRegistry
from dlk8s_dev.release import RELEASED_IMAGES, image_repository

from ..helpers import get_json, job_status, wait_until

VERSION = (REPO_ROOT / "VERSION").read_text().strip()
RELEASE = "dlk8s"
NAMESPACE = "dlk8s-system"
JOBS = "publish-jobs"
TRAIN = REPO_ROOT / "examples" / "tfjob-train"
# The first pull of the runtime (a gigabyte and a half unpacked) is part of it.
TRAIN_TIMEOUT = 900


def published_ref(published: dict[str, Any], which: str) -> str:
    image = published["images"][which]
    return f"{image['repository']}@{image['digest']}"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    if not shutil.which("docker-registry") or not shutil.which("skopeo"):
        pytest.skip("docker-registry and skopeo are missing (run `make tools` as root)")
    local = LocalRegistry(tmp_path_factory.mktemp("registry")).start()
    pid = local.pid
    try:
        yield local
    finally:
        local.stop()
        assert pid is not None
        assert not Path(f"/proc/{pid}").exists(), "the registry outlived the test"


# The make that runs this test passes its jobserver on (this make is its own),
# and a login of the user's must not decide whether publishing works.
ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "REGISTRY_USER", "REGISTRY_PASSWORD")
}


@pytest.fixture(scope="module")
def dist(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dist/ of `make publish REGISTRY=127.0.0.1:<port>`, once it pushed."""
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        ["make", "--no-print-directory", "publish", f"REGISTRY={registry.address}",
         f"DIST={dist}"],
        cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return dist


@pytest.fixture(scope="module")
def published(dist: Path) -> dict[str, Any]:
    """What it pushed where (its dist/published.json)."""
    found: dict[str, Any] = json.loads((dist / "published.json").read_text())
    return found


def node_images(cluster: LocalCluster) -> list[str]:
    """Every image name the real node's containerd holds."""
    assert cluster.node is not None
    out = subprocess.run(
        ["ctr", "--address", str(cluster.node.containerd_socket), "-n", "k8s.io",
         "images", "ls", "-q"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


@pytest.fixture(scope="module")
def bare_cluster(registry: LocalRegistry) -> Iterator[tuple[LocalCluster, list[str]]]:
    """A fresh cluster whose real node pulls from the registry; the images it started with."""
    from dlk8s_dev.localcluster import DEFAULT_TOOLS_BIN
    from dlk8s_dev.realnode import missing_requirements

    missing = missing_tools() + missing_requirements(DEFAULT_TOOLS_BIN)
    if missing:
        pytest.skip(f"a real node needs {missing} (run `make tools` as root)")
    local = LocalCluster(real_node=True, bare_node=True).start()
    assert local.node is not None
    node, workdir = local.node, str(local.workdir)
    started_with = node_images(local)
    try:
        with NodeRegistry(node, registry):
            yield local, started_with
    finally:
        local.stop()
        assert not leftover_processes(workdir), "processes outlived the cluster"
        assert not node.leftovers(), f"the real node left: {node.leftovers()}"


@pytest.fixture(scope="module")
def installed(bare_cluster: tuple[LocalCluster, list[str]], published: dict[str, Any]) -> Install:
    """The published chart, installed from its oci:// reference."""
    cluster, _ = bare_cluster
    assert cluster.node is not None
    # Every pod of the release (the operator, `helm test`'s and its smoke
    # TFJob's) goes to the real node; kwok's nodes run no image.
    cluster.node.real_namespace(cluster, NAMESPACE)
    cluster.helm(
        "install", RELEASE, published["chart"], "--version", VERSION, "--plain-http",
        "-n", NAMESPACE, "--create-namespace", "--set", "cloud=gke",
        # The images the operator puts into pods, from this release: the
        # runtime for a PS's gRPC server; the smoke TFJob needs only a shell.
        "--set", f"config.tfImage={published_ref(published, 'runtime')}",
        "--set", f"tests.jobImage={published_ref(published, 'operator')}",
        "--wait", "--timeout=600s",
    )  # fmt: skip
    return Install(cluster, RELEASE, NAMESPACE)


def test_the_node_starts_with_no_dlk8s_image_but_its_sandbox(
    bare_cluster: tuple[LocalCluster, list[str]],
) -> None:
    _, started_with = bare_cluster
    assert started_with, "the node has not even its pause image"
    assert all("/pause" in name or name.startswith("sha256:") for name in started_with), (
        started_with
    )


def test_make_publish_pushed_the_images_and_the_chart(
    published: dict[str, Any], registry: LocalRegistry
) -> None:
    assert published["version"] == VERSION
    assert published["chart"] == f"oci://{registry.address}/dlk8s/charts/dlk8s"
    for which in RELEASED_IMAGES:
        image = published["images"][which]
        assert image["repository"] == image_repository(registry.address, which)
        assert image["digest"].startswith("sha256:")
        out = subprocess.run(
            ["skopeo", "inspect", "--tls-verify=false", "--raw",
             f"docker://{image['repository']}:{VERSION}"],
            capture_output=True, check=True,
        ).stdout  # fmt: skip
        # The tag names exactly the manifest whose digest was recorded.
        assert f"sha256:{hashlib.sha256(out).hexdigest()}" == image["digest"]


def test_the_published_chart_pins_the_operator_by_digest(
    published: dict[str, Any], bare_cluster: tuple[LocalCluster, list[str]]
) -> None:
    cluster, _ = bare_cluster
    shown = cluster.helm(
        "show", "values", published["chart"], "--version", VERSION, "--plain-http"
    ).stdout
    image = yaml.safe_load(shown)["image"]
    operator = published["images"]["operator"]
    assert (image["repository"], image["digest"]) == (operator["repository"], operator["digest"])


def test_helm_installs_it_from_the_registry_and_helm_test_passes(
    installed: Install, published: dict[str, Any]
) -> None:
    cluster = installed.cluster
    operator = published_ref(published, "operator")
    [pod] = [p for p in operator_pods(installed) if not p["metadata"].get("deletionTimestamp")]
    assert pod["spec"]["containers"][0]["image"] == operator
    assert cluster.node is not None
    assert pod["spec"]["nodeName"] == cluster.node.name
    # What the kubelet ran: the image containerd pulled, by its digest.
    assert pod["status"]["containerStatuses"][0]["imageID"] == operator
    assert operator in node_images(cluster)
    said = cluster.helm("test", RELEASE, "-n", NAMESPACE, "--timeout=600s").stdout
    assert re.search(r"^Phase:\s+Succeeded$", said, re.M), said


def test_tfjob_train_runs_to_done_on_the_published_runtime(
    installed: Install, published: dict[str, Any], tmp_path: Path
) -> None:
    cluster = installed.cluster
    assert cluster.node is not None
    cluster.node.real_namespace(cluster, JOBS)
    runtime = published["images"]["runtime"]
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": JOBS,
        # kustomize takes a folder only by a relative path.
        "resources": [os.path.relpath(TRAIN, tmp_path)],
        "images": [
            {"name": name, "newName": runtime["repository"], "digest": runtime["digest"]}
            for name in example_images(TRAIN / "tfjob.yaml")
        ],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    cluster.kubectl("apply", "-k", str(tmp_path))
    status = wait_until(
        lambda: (
            (s := job_status(cluster, JOBS, "tfjobs.dlk8s.io", "tfjob-train")).get("phase")
            in ("Done", "Failed")
            and s
        ),
        timeout=TRAIN_TIMEOUT,
        what="tfjob-train to finish",
    )
    log = cluster.kubectl("logs", "tfjob-train-master-0", "-n", JOBS, "-c", "tensorflow").stdout
    assert (status["phase"], status.get("state")) == ("Done", "Succeeded"), (status, log[-3000:])
    assert "done: largest error" in log
    master = get_json(cluster, "pod", "tfjob-train-master-0", "-n", JOBS)
    ran = master["status"]["containerStatuses"][0]["imageID"]
    assert ran == f"{runtime['repository']}@{runtime['digest']}"


def example_images(path: Path) -> list[str]:
    """The image names (without tag or digest) a job manifest's containers use."""
    names = set()
    for doc in yaml.safe_load_all(path.read_text()):
        for spec in (doc or {}).get("spec", {}).get("replicaSpecs", []):
            for c in (spec.get("template") or {}).get("spec", {}).get("containers", []):
                name = c["image"].split("@")[0]
                # A tag is what follows the last colon after the last slash.
                tagged = ":" in name.rsplit("/", 1)[-1]
                names.add(name.rsplit(":", 1)[0] if tagged else name)
    assert names, f"{path} names no image"
    return sorted(names)


def test_publish_logs_in_with_registry_user_and_password(
    dist: Path, published: dict[str, Any], tmp_path: Path
) -> None:
    """The login the workflow passes from its secrets, into a registry that
    asks for one: refused without it, everything pushed with it."""
    users = {"robot": "s3cret"}
    argv = [sys.executable, "-m", "dlk8s_dev.release", "publish", "--dist", str(dist),
            "--version", VERSION, "--helm", str(REPO_ROOT / ".tools" / "bin" / "helm")]  # fmt: skip
    with LocalRegistry(tmp_path / "private", users=users) as private:
        argv += ["--registry", private.address]
        refused = subprocess.run(argv, env=ENV, capture_output=True, text=True, check=False)
        assert refused.returncode == 1
        assert re.search(r"unauthorized|authentication required", refused.stderr), refused.stderr
        login = {"REGISTRY_USER": "robot", "REGISTRY_PASSWORD": "s3cret"}
        done = subprocess.run(
            argv, env={**ENV, **login}, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        token = base64.b64encode(b"robot:s3cret").decode()
        request = urllib.request.Request(
            f"http://{private.address}/v2/_catalog", headers={"Authorization": f"Basic {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            catalog = json.load(resp)["repositories"]
    assert sorted(catalog) == [
        "dlk8s/charts/dlk8s",
        "dlk8s/operator",
        "dlk8s/paddle",
        "dlk8s/pytorch",
        "dlk8s/runtime",
    ]
    # The same images, so the same digests, whichever registry they went to.
    again = json.loads((dist / "published.json").read_text())
    for which in RELEASED_IMAGES:
        assert again["images"][which]["digest"] == published["images"][which]["digest"]
