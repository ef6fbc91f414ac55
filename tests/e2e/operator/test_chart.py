"""The Helm chart against a real control plane, with helm 4 and with helm 3.

The CRDs are cluster-scoped and kept on uninstall, so every test here starts
from whatever CRDs an earlier test (or another helm) left behind. Installs
therefore pass --take-ownership, which is what a user does who installs under
a new release name or namespace after an uninstall; test_reinstall_* checks
that a reinstall under the same name needs no flag and that a different one
fails with Helm's ownership message until the flag is given.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlk8s_dev.localcluster import LocalCluster

from ..helpers import CRDS, get_json, temporary_namespace

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "dlk8s"
LOCAL_VALUES = REPO / "values" / "local.yaml"
# The seeds' jobs for kwok (tests/data/kwok/), the jobs that train, each a
# kustomization, and their overlays for the local cluster (examples/local/;
# runtime-image and pytorch-image are components, which only they build).
EXAMPLES = sorted((REPO / "tests" / "data" / "kwok").glob("*.yaml")) + sorted(
    p.parent
    for p in (
        *(REPO / "examples").glob("*/kustomization.yaml"),
        *(REPO / "examples" / "local").glob("*/kustomization.yaml"),
    )
    if "\nkind: Component\n" not in p.read_text()
)
HELMS = ("helm4", "helm3")
TIMEOUT = "180s"


def install(
    cluster: LocalCluster,
    helm: str,
    release: str,
    namespace: str,
    *extra: str,
    chart: Path = CHART,
    command: str = "install",
    take_ownership: bool = True,
    check: bool = True,
) -> Any:
    argv = [
        command,
        release,
        str(chart),
        "--namespace",
        namespace,
        "--set",
        "cloud=gke",
        "-f",
        str(LOCAL_VALUES),
        "--wait",
        "--timeout",
        TIMEOUT,
        *extra,
    ]
    if take_ownership:
        argv.append("--take-ownership")
    return cluster.helm(*argv, helm=helm, check=check)


def uninstall(cluster: LocalCluster, helm: str, release: str, namespace: str) -> None:
    cluster.helm("uninstall", release, "--namespace", namespace, helm=helm, check=False)


@contextmanager
def installed(
    cluster: LocalCluster, helm: str, release: str, namespace: str, *extra: str
) -> Iterator[None]:
    """The chart installed as `release`, and uninstalled again however the test ends."""
    try:
        install(cluster, helm, release, namespace, *extra)
        yield
    finally:
        uninstall(cluster, helm, release, namespace)


def wait_established(cluster: LocalCluster) -> None:
    cluster.wait_established(*(f"crd/{c}" for c in CRDS))


def can_i(cluster: LocalCluster, sa: str, *args: str) -> bool:
    done = cluster.kubectl("auth", "can-i", *args, f"--as={sa}", check=False)
    return done.stdout.strip() == "yes"


OWNER_ANNOTATIONS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")


@pytest.fixture(scope="module", autouse=True)
def leave_crds_as_found(cluster: LocalCluster) -> Iterator[None]:
    """Hand the shared CRDs back as this module found them.

    The releases here take the CRDs over and keep them on uninstall. A later
    install by whoever owned them before (or, if there were none, by anyone)
    must not find them claimed by a release that no longer exists: so CRDs
    that were absent are deleted, and the owner annotations of those that
    existed are put back.
    """
    before: dict[str, dict[str, str] | None] = {}
    for name in CRDS:
        found = cluster.kubectl("get", "crd", name, "-o", "json", check=False)
        before[name] = None
        if found.returncode == 0:
            before[name] = json.loads(found.stdout)["metadata"].get("annotations", {})
    yield
    for name, found_annotations in before.items():
        if found_annotations is None:
            cluster.kubectl("delete", "crd", name, "--ignore-not-found", "--timeout=120s")
            continue
        restore = [
            f"{key}={found_annotations[key]}" if key in found_annotations else f"{key}-"
            for key in OWNER_ANNOTATIONS
        ]
        cluster.kubectl("annotate", "crd", name, "--overwrite", *restore, check=False)


@pytest.fixture
def other_namespace(cluster: LocalCluster) -> Iterator[str]:
    with temporary_namespace(cluster) as name:
        yield name


@pytest.mark.parametrize("helm", HELMS)
def test_install_upgrade_uninstall(
    cluster: LocalCluster, namespace: str, helm: str, tmp_path: Path
) -> None:
    release = f"dlk8s-{helm}"
    with installed(cluster, helm, release, namespace):
        # The CRDs are Established, kept on uninstall, and owned by this release.
        wait_established(cluster)
        for name in CRDS:
            crd = get_json(cluster, "crd", name)
            conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
            assert conditions["Established"] == "True", name
            annotations = crd["metadata"]["annotations"]
            assert annotations["helm.sh/resource-policy"] == "keep"
            assert annotations["meta.helm.sh/release-name"] == release
            assert annotations["meta.helm.sh/release-namespace"] == namespace

        # The operator Deployment is available and reads the GKE preset.
        deployment = get_json(cluster, "deployment", release, "-n", namespace)
        assert deployment["status"].get("availableReplicas") == 1
        config = get_json(cluster, "configmap", f"{release}-config", "-n", namespace)
        controller = yaml.safe_load(config["data"]["controller_config_file.yaml"])
        # GKE's device plugin mounts the driver itself: the preset adds the variable only.
        assert controller["accelerators"]["nvidia.com/gpu"] == {
            "volumes": [],
            "envVars": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
        }
        legacy = controller["accelerators"]["alpha.kubernetes.io/nvidia-gpu"]
        assert [v["hostPath"] for v in legacy["volumes"]] == [
            "/home/kubernetes/bin/nvidia/lib",
            "/home/kubernetes/bin/nvidia/bin",
        ]
        assert controller["grpcServerFilePath"] == "/etc/dlk8s/grpc/grpc_tensorflow_server.py"

        # The ServiceAccount may do what the operator needs and no more.
        sa = f"system:serviceaccount:{namespace}:{release}"
        assert can_i(cluster, sa, "create", "pods", "-n", "default")
        assert can_i(cluster, sa, "update", "tfjobs.dlk8s.io", "--subresource=status", "-n", "x")
        assert can_i(cluster, sa, "list", "nodes")
        assert not can_i(cluster, sa, "update", "tfjobs.dlk8s.io", "-n", "default")
        assert not can_i(cluster, sa, "get", "secrets", "-n", namespace)
        assert can_i(cluster, sa, "update", f"leases/{release}-leader", "-n", namespace)
        assert not can_i(cluster, sa, "update", "leases/some-other-lease", "-n", namespace)

        # `helm test` runs its hook pod (kwok finishes it, see values/local.yaml).
        cluster.helm("test", release, "--namespace", namespace, "--timeout", TIMEOUT, helm=helm)

        cluster.kubectl(
            "apply", "-n", namespace, "-f", str(REPO / "tests" / "data" / "kwok" / "tfjob.yaml")
        )

        # An upgrade with a changed CRD applies the change ...
        # (changed in crds/, the CRDs' one source, and generated into the chart
        # the way `make chart-generate` does it)
        for part in ("crds", "charts", "docs"):
            shutil.copytree(REPO / part, tmp_path / part)
        shutil.copy(REPO / "VERSION", tmp_path / "VERSION")
        crd_file = tmp_path / "crds" / "tfjobs.dlk8s.io.yaml"
        crd = yaml.safe_load(crd_file.read_text())
        marker = {"name": "Marker", "type": "string", "jsonPath": ".metadata.uid", "priority": 1}
        crd["spec"]["versions"][0]["additionalPrinterColumns"].append(marker)
        crd_file.write_text(yaml.safe_dump(crd))
        subprocess.run(
            [sys.executable, str(REPO / "tools" / "chartdoc.py"), "generate", "--root", tmp_path],
            check=True,
        )
        changed = tmp_path / "charts" / "dlk8s"
        install(cluster, helm, release, namespace, chart=changed, command="upgrade")
        columns = get_json(cluster, "crd", "tfjobs.dlk8s.io")["spec"]["versions"][0][
            "additionalPrinterColumns"
        ]
        assert "Marker" in {c["name"] for c in columns}

        # ... and upgrading back to the real chart takes it away again.
        install(cluster, helm, release, namespace, command="upgrade")
        columns = get_json(cluster, "crd", "tfjobs.dlk8s.io")["spec"]["versions"][0][
            "additionalPrinterColumns"
        ]
        assert "Marker" not in {c["name"] for c in columns}

    # Uninstall removes the operator but leaves the CRDs and the jobs.
    gone = cluster.kubectl("get", "deployment", release, "-n", namespace, check=False)
    assert gone.returncode != 0
    for name in CRDS:
        cluster.kubectl("get", "crd", name)
    job = get_json(cluster, "tfjob", "example-job", "-n", namespace)
    assert job["metadata"]["name"] == "example-job"


@pytest.mark.parametrize("helm", HELMS)
def test_reinstall_after_uninstall(
    cluster: LocalCluster, namespace: str, other_namespace: str, helm: str
) -> None:
    release = f"dlk8s-re-{helm}"
    try:
        install(cluster, helm, release, namespace)
        uninstall(cluster, helm, release, namespace)

        # Same release name and namespace: Helm adopts the CRDs it kept.
        install(cluster, helm, release, namespace, take_ownership=False)
        uninstall(cluster, helm, release, namespace)

        # Anywhere else the kept CRDs still name the old release ...
        refused = install(
            cluster, helm, release, other_namespace, take_ownership=False, check=False
        )
        assert refused.returncode != 0
        assert "meta.helm.sh/release-namespace" in refused.stderr

        # ... until the new release takes them over.
        install(cluster, helm, release, other_namespace)
        crd = get_json(cluster, "crd", "tfjobs.dlk8s.io")
        assert crd["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == other_namespace
    finally:
        uninstall(cluster, helm, release, namespace)
        uninstall(cluster, helm, release, other_namespace)


def test_namespace_scope_confines_the_operator(
    cluster: LocalCluster, namespace: str, other_namespace: str
) -> None:
    release = "dlk8s-ns"
    scoped = ("--set", "rbac.scope=namespace", "--set", "crds.install=false")
    with installed(cluster, "helm4", release, namespace, *scoped):
        sa = f"system:serviceaccount:{namespace}:{release}"
        assert can_i(cluster, sa, "create", "pods", "-n", namespace)
        assert can_i(cluster, sa, "watch", "tfjobs.dlk8s.io", "-n", namespace)
        assert not can_i(cluster, sa, "create", "pods", "-n", other_namespace)
        assert not can_i(cluster, sa, "list", "nodes")
        deployment = get_json(cluster, "deployment", release, "-n", namespace)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["DLK8S_NAMESPACE"] == namespace
        assert env["DLK8S_AUTOSCALER"] == "false"


@pytest.mark.parametrize("helm", HELMS)
@pytest.mark.parametrize(
    ("setting", "named"),
    [
        # An unknown cloud: the message names the key and the allowed clouds.
        ("cloud=aws-typo", ("cloud", "gke", "azure")),
        # A misspelled key: the message names it and lists the right one.
        ("replicaCoutn=2", ("replicaCoutn", "replicaCount")),
    ],
    ids=["bad-cloud", "misspelled-key"],
)
def test_bad_values_fail_install(
    cluster: LocalCluster, namespace: str, helm: str, setting: str, named: tuple[str, ...]
) -> None:
    release = f"dlk8s-bad-{helm}"
    done = cluster.helm(
        "install", release, str(CHART), "--namespace", namespace,
        "-f", str(LOCAL_VALUES), "--set", setting, helm=helm, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    for word in named:
        assert word in done.stderr, (word, done.stderr)
    releases = cluster.helm("list", "--namespace", namespace, "-q", helm=helm).stdout.split()
    assert release not in releases


@pytest.fixture(scope="module")
def crds_installed(cluster: LocalCluster) -> None:
    # Server-side, forcing conflicts: the CRDs may already be owned by a helm
    # release from an earlier test, with the same content.
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    wait_established(cluster)


@pytest.mark.usefixtures("crds_installed")
@pytest.mark.parametrize("example", EXAMPLES, ids=[str(p.relative_to(REPO)) for p in EXAMPLES])
def test_example_is_accepted(cluster: LocalCluster, namespace: str, example: Path) -> None:
    how = "-k" if example.is_dir() else "-f"
    done = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, how, str(example))
    assert "(server dry run)" in done.stdout
