"""`kubectl get` shows live pod counts, by the CRD's full name beside Kubeflow's."""

from __future__ import annotations

import pytest

from dlk8s_dev.localcluster import LocalCluster

from ..helpers import apply, example, finish_pod, wait_for_phase, wait_for_pods, wait_until

pytestmark = pytest.mark.usefixtures("operator")

SEED_PODS = {"example-job-master-0", "example-job-worker-0", "example-job-ps-0", "example-job-ps-1"}


def columns(cluster: LocalCluster, namespace: str, *args: str) -> dict[str, str]:
    """The one row of `kubectl get tfjobs.dlk8s.io`, by column header."""
    out = cluster.kubectl("get", "tfjobs.dlk8s.io", "-n", namespace, *args).stdout
    header, row = out.strip().splitlines()
    return dict(zip(header.split(), row.split(), strict=True))


def test_printer_columns_count_the_pods_of_every_role(
    cluster: LocalCluster, namespace: str
) -> None:
    apply(cluster, namespace, example("tfjob.yaml"))  # 1 MASTER, 1 WORKER, 2 PS
    wait_for_pods(cluster, namespace, "example-job", SEED_PODS)
    wait_for_phase(cluster, namespace, "TFJob", "example-job", "Running")
    row = wait_until(
        lambda: (r := columns(cluster, namespace))["RUNNING"] == "4" and r,
        what="four running pods in the RUNNING column",
    )
    assert (row["SUCCEEDED"], row["FAILED"]) == ("0", "0")
    assert "PENDING" not in row  # only with -o wide

    finish_pod(cluster, namespace, "example-job-worker-0", 0)
    row = wait_until(
        lambda: (r := columns(cluster, namespace, "-o", "wide"))["SUCCEEDED"] == "1" and r,
        what="the finished worker in the SUCCEEDED column",
    )
    assert (row["RUNNING"], row["PENDING"], row["FAILED"]) == ("3", "0", "0")
