"""Least privilege: the chart grants the operator's ServiceAccount exactly
the calls the operator makes (issue 14).

What is granted: `kubectl auth can-i --list` as the ServiceAccount, minus
what any ServiceAccount may do (a bare one's list). What is used: an
operator with leader election and the autoscaler is taken through every
path that calls the API server (children of every type created and
cleaned up, a job deleted by its TTL, names taken by strangers, a refusal
counted on its Event, an elastic PaddleJob scaled), and its own count of
requests by verb and resource (dlk8s_api_requests_total) is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dlk8s.job.childnames import grpc_server_configmap_name, tensorboard_name
from dlk8s.job.network import network_policy_name
from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install, OperatorProcess

from ..helpers import (
    apply,
    example,
    finish_pod,
    get_or_none,
    job_manifest,
    job_status,
    wait_for_state,
    wait_until,
)
from ..permissions import granted, used

# Granted though no request of ours carries it: with the admission plugin
# OwnerReferencesPermissionEnforcement, creating a child whose
# ownerReference sets blockOwnerDeletion needs `update` on the owner's
# finalizers, which the API server checks on our creates.
IMPLIED = {("jobs.dlk8s.io/finalizers", "update")}


@pytest.fixture
def busy_operator(
    cluster: LocalCluster, install: Install, operator: OperatorProcess
) -> Iterator[OperatorProcess]:
    """An operator with leader election, after every path that calls the API server."""
    operator.stop()
    lease = f"{install.release}-leader"
    cluster.kubectl("delete", "lease", lease, "-n", install.namespace, "--ignore-not-found")
    env = {
        "DLK8S_LEADER_ELECT": "true",
        "DLK8S_LEADER_ELECTION_ID": lease,
        "DLK8S_LEADER_ELECTION_NAMESPACE": install.namespace,
        "DLK8S_AUTOSCALER_PERIOD": "1",
    }
    process = OperatorProcess(install, name="rbac", env=env).start()
    try:
        yield process
    finally:
        process.stop()
        operator.start()


def every_path(cluster: LocalCluster, namespace: str) -> None:
    # Children of every type, cleaned up (cleanPodPolicy All), then the job
    # deleted by its TTL.
    done = job_manifest(
        "TFJob", "done", {"MASTER": 1}, "tensorflow",
        tensorboard={"logDir": "/logs"},
        runPolicy={"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 1},
    )  # fmt: skip
    done["spec"]["replicaSpecs"].append({"tfReplicaType": "PS", "replicas": 1})
    apply(cluster, namespace, done)
    wait_for_state(cluster, namespace, "TFJob", "done", "Running")
    finish_pod(cluster, namespace, "done-master-0", 0)
    wait_until(lambda: get_or_none(cluster, "tfjob", "done", "-n", namespace) is None, 60, "TTL")
    # Names taken by strangers: a look at each (get), and the NameTaken
    # event of every retry counted on one Event (patch). The PS's Service,
    # not the MASTER's: a replica's Service is created once its own pod has
    # an address, and the MASTER's pod never is.
    for argv in (
        ["run", "taken-master-0", "--image=x"],
        ["create", "service", "clusterip", "taken-ps-0", "--tcp=80"],
        ["create", "configmap", grpc_server_configmap_name("taken"), "--from-literal=k=v"],
        ["create", "deployment", tensorboard_name("taken"), "--image=x"],
    ):
        cluster.kubectl(*argv, "-n", namespace)
    stranger = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": network_policy_name("taken")},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(stranger))
    taken = job_manifest(
        "TFJob", "taken", {"MASTER": 1}, "tensorflow", tensorboard={"logDir": "/l"}
    )
    taken["spec"]["replicaSpecs"].append({"tfReplicaType": "PS", "replicas": 1})
    apply(cluster, namespace, taken)
    # A Caffe2Job with redis in its MASTER: its password's Secret.
    apply(cluster, namespace, example("caffe2job-redis-in-master.yaml"))
    # An elastic PaddleJob: the autoscaler patches it, and the trainers' count.
    apply(cluster, namespace, example("paddlejob-edl.yaml"))
    wait_until(
        lambda: (job_status(cluster, namespace, "PaddleJob", "example").get("trainers") or 0) > 2,
        90,
        "the autoscaler to grow the PaddleJob",
    )


def test_the_operator_is_granted_exactly_what_it_uses(
    cluster: LocalCluster, namespace: str, install: Install, busy_operator: OperatorProcess
) -> None:
    every_path(cluster, namespace)
    wait_until(
        lambda: (
            {("pods", "patch"), ("events", "patch"), ("services", "get")}
            | {("networkpolicies.networking.k8s.io", "get"), ("secrets", "create")}
            <= used(busy_operator)
        ),
        60,
        "the trainer count patched on pods, a repeated event, a look at a taken Service"
        " and at a taken NetworkPolicy, and a redis password made",
    )
    cluster.kubectl("create", "serviceaccount", "bare", "-n", namespace)
    baseline = granted(cluster, f"system:serviceaccount:{namespace}:bare", install.namespace)
    sa = f"system:serviceaccount:{install.namespace}:{install.service_account}"
    chart = granted(cluster, sa, install.namespace) - baseline
    calls = used(busy_operator)
    print(f"\ngranted by the chart: {sorted(chart)}\nused: {sorted(calls)}")
    assert calls <= chart, f"used but not granted: {sorted(calls - chart)}"
    assert chart - IMPLIED == calls, f"granted but not used: {sorted(chart - IMPLIED - calls)}"
