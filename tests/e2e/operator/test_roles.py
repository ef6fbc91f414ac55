"""Roles for the people who submit jobs, on a real apiserver with RBAC.

The chart (the session's install, rbac.userRoles at their defaults) adds
`<release>-<namespace>-edit` and `-view` ClusterRoles labelled for
aggregation; kube-controller-manager's cluster role aggregation controller
then folds their rules into the built-in `edit`, `admin` and `view` roles.
Users are impersonated with `kubectl --as` (the local cluster's admin is in
system:masters, which may impersonate); none of them exists anywhere else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install

from ..helpers import job_manifest, temporary_namespace, wait_until

pytestmark = pytest.mark.e2e


def can_i(cluster: LocalCluster, user: str, verb: str, resource: str, namespace: str,
          *extra: str) -> bool:  # fmt: skip
    done = cluster.kubectl(
        "auth", "can-i", verb, resource, "-n", namespace, f"--as={user}", *extra, check=False
    )
    return done.stdout.strip() == "yes"


def bind(cluster: LocalCluster, namespace: str, user: str, role: str) -> None:
    cluster.kubectl(
        "create", "rolebinding", f"{user}-{role}"[:63], f"--clusterrole={role}",
        f"--user={user}", "-n", namespace,
    )  # fmt: skip


def create_as(cluster: LocalCluster, user: str, namespace: str, job: dict[str, Any]) -> Any:
    return cluster.kubectl(
        "create", "-n", namespace, f"--as={user}", "-f", "-", input=json.dumps(job), check=False
    )


def tfjob(name: str) -> dict[str, Any]:
    return job_manifest("TFJob", name, {"MASTER": 1, "WORKER": 1}, "tensorflow")


def wait_aggregated(cluster: LocalCluster, user: str, verb: str, namespace: str) -> None:
    # The aggregation controller works asynchronously after the chart's install.
    wait_until(
        lambda: can_i(cluster, user, verb, "tfjobs.dlk8s.io", namespace),
        timeout=60,
        what=f"{user} to be allowed to {verb} tfjobs.dlk8s.io",
    )


def test_edit_may_create_a_tfjob_and_view_may_not(
    cluster: LocalCluster, install: Install, namespace: str
) -> None:
    bind(cluster, namespace, "alice", "edit")
    bind(cluster, namespace, "bob", "view")
    wait_aggregated(cluster, "alice", "create", namespace)
    wait_aggregated(cluster, "bob", "list", namespace)

    created = create_as(cluster, "alice", namespace, tfjob("alices-job"))
    assert created.returncode == 0, created.stderr
    assert "tfjob.dlk8s.io/alices-job created" in created.stdout

    refused = create_as(cluster, "bob", namespace, tfjob("bobs-job"))
    assert refused.returncode != 0
    assert "forbidden" in refused.stderr.lower()
    assert 'User "bob" cannot create resource "tfjobs" in API group "dlk8s.io"' in refused.stderr
    assert cluster.kubectl("get", "tfjob", "bobs-job", "-n", namespace, check=False).returncode

    # view reads what edit created, and nothing more.
    seen = cluster.kubectl("get", "tfjobs.dlk8s.io", "-n", namespace, "--as=bob", "-o", "name")
    assert seen.stdout.split() == ["tfjob.dlk8s.io/alices-job"]
    for verb in ("delete", "patch", "update"):
        assert not can_i(cluster, "bob", verb, "tfjobs.dlk8s.io", namespace), verb
    for kind in ("mxjobs", "caffe2jobs", "paddlejobs", "pytorchjobs"):
        assert can_i(cluster, "bob", "watch", f"{kind}.dlk8s.io", namespace), kind
        assert can_i(cluster, "alice", "delete", f"{kind}.dlk8s.io", namespace), kind


def test_nobody_but_the_operator_writes_a_jobs_status(
    cluster: LocalCluster, install: Install, namespace: str
) -> None:
    bind(cluster, namespace, "carol", "admin")
    wait_aggregated(cluster, "carol", "create", namespace)
    for verb in ("update", "patch"):
        assert not can_i(cluster, "carol", verb, "tfjobs.dlk8s.io", namespace,
                         "--subresource=status"), verb  # fmt: skip
    assert can_i(cluster, "carol", "get", "tfjobs.dlk8s.io", namespace, "--subresource=status")
    assert can_i(cluster, "carol", "deletecollection", "paddlejobs.dlk8s.io", namespace)


def test_a_role_ends_at_its_namespace_and_nobody_else_gets_one(
    cluster: LocalCluster, install: Install, namespace: str
) -> None:
    bind(cluster, namespace, "dave", "edit")
    wait_aggregated(cluster, "dave", "create", namespace)
    with temporary_namespace(cluster) as other:
        assert not can_i(cluster, "dave", "create", "tfjobs.dlk8s.io", other)
        refused = create_as(cluster, "dave", other, tfjob("elsewhere"))
        assert refused.returncode != 0
        assert "forbidden" in refused.stderr.lower()
    assert not can_i(cluster, "erin", "list", "tfjobs.dlk8s.io", namespace)


def test_the_charts_roles_can_be_bound_directly(
    cluster: LocalCluster, install: Install, namespace: str
) -> None:
    edit = f"{install.release}-{install.namespace}-edit"
    view = f"{install.release}-{install.namespace}-view"
    roles = json.loads(cluster.kubectl("get", "clusterrole", edit, view, "-o", "json").stdout)
    labels = {r["metadata"]["name"]: r["metadata"]["labels"] for r in roles["items"]}
    assert labels[edit]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert labels[view]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"

    bind(cluster, namespace, "frank", edit)
    bind(cluster, namespace, "grace", view)
    wait_until(
        lambda: can_i(cluster, "frank", "create", "tfjobs.dlk8s.io", namespace),
        timeout=30,
        what="frank's RoleBinding to take effect",
    )
    created = create_as(cluster, "frank", namespace, tfjob("franks-job"))
    assert created.returncode == 0, created.stderr
    refused = create_as(cluster, "grace", namespace, tfjob("graces-job"))
    assert refused.returncode != 0
    assert "forbidden" in refused.stderr.lower()
    # The chart's roles hold the five kinds and nothing else: no pods, no secrets.
    assert not can_i(cluster, "frank", "create", "pods", namespace)
    assert not can_i(cluster, "grace", "get", "secrets", namespace)
