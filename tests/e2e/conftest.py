"""Fixtures that give end-to-end tests a real local control plane."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlk8s_dev.localcluster import LocalCluster, leftover_processes, missing_tools
from dlk8s_dev.localdeploy import Install, OperatorProcess, install_chart

from .helpers import CRDS, temporary_namespace


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Which process runs them: their folder (tests/conftest.py).
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    missing = missing_tools()
    if missing:
        pytest.skip(f"local control plane tools missing: {missing} (run `make tools`)")
    local = LocalCluster()
    local.start()
    # Shown in the summary (-rA) and in CI logs: start-up time is a number we track.
    print(f"\n[localcluster] start-up took {local.startup_seconds:.1f}s")
    os.environ.setdefault("DLK8S_CLUSTER_STARTUP_SECONDS", f"{local.startup_seconds:.1f}")
    try:
        yield local
    finally:
        workdir = str(local.workdir)
        local.stop()
        stray = [p for p in leftover_processes(workdir)]
        assert not stray, f"processes outlived the cluster: {stray}"


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    with temporary_namespace(cluster) as name:
        yield name


@pytest.fixture(scope="session")
def install(cluster: LocalCluster) -> Install:
    """The chart, installed once per session with helm 4 and cloud=gke, and
    every job given its NetworkPolicy (inert under kwok, but checked by the
    API server and granted by the chart's RBAC like any other child)."""
    return install_chart(cluster, sets=("cloud=gke", "networkPolicy.enabled=true"))


@pytest.fixture(scope="session")
def operator(install: Install) -> Iterator[OperatorProcess]:
    """One operator for the session, running with the chart's ServiceAccount."""
    process = OperatorProcess(install, name="session-operator").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    operator = getattr(item, "funcargs", {}).get("operator")
    if report.when == "call" and report.failed and isinstance(operator, OperatorProcess):
        # What the operator did is most of what a failed end-to-end test needs.
        report.sections.append(("operator log (tail)", operator.tail(6000)))


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[LocalCluster]:
    """A second control plane whose cluster also has a real node (see realnode/).

    Started only by the tests that ask for it. Afterwards nothing of it may be
    left on the machine: no process, mount, network namespace, iptables rule,
    veth, bridge, cgroup or folder.
    """
    from dlk8s_dev.localcluster import DEFAULT_TOOLS_BIN
    from dlk8s_dev.realnode import missing_requirements

    missing = missing_tools() + missing_requirements(DEFAULT_TOOLS_BIN)
    if missing:
        pytest.skip(f"a real node needs {missing} (run `make tools` as root)")
    local = LocalCluster(real_node=True)
    local.start()
    assert local.node is not None
    print(
        f"\n[realnode] control plane {local.startup_seconds:.1f}s, "
        f"real node {local.node.startup_seconds:.1f}s more"
    )
    os.environ.setdefault("DLK8S_REALNODE_STARTUP_SECONDS", f"{local.node.startup_seconds:.1f}")
    node = local.node
    try:
        yield local
    finally:
        workdir = str(local.workdir)
        local.stop()
        stray = leftover_processes(workdir)
        assert not stray, f"processes outlived the cluster: {stray}"
        left = node.leftovers()
        assert not left, f"the real node left: {left}"


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crds_installed(cluster: LocalCluster) -> Iterator[None]:
    """The CRDs straight from crds/, removed again if this module added them.

    Server-side with forced conflicts, because a helm release may already own
    the same CRDs with the same content; then they stay.
    """
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    absent = [name for name in CRDS if cluster.api(f"{crds}/{name}")[0] != 200]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    cluster.wait_established(*(f"crd/{c}" for c in CRDS))
    yield
    if absent:
        cluster.kubectl("delete", "crd", *absent, "--ignore-not-found", "--timeout=120s")
