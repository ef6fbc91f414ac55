"""What a user may do and what the operator did, as permissions: the
(resource with its API group, verb) pairs that the RBAC tests compare."""

from __future__ import annotations

import re

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import OperatorProcess

# (resource with its API group, verb)
Permission = tuple[str, str]

JOB_KINDS = ("tfjobs", "mxjobs", "caffe2jobs", "paddlejobs", "pytorchjobs")
GROUPS = {
    "deployments": "apps",
    # Each job's, with networkPolicy.enabled (the session's install sets it).
    "networkpolicies": "networking.k8s.io",
    "leases": "coordination.k8s.io",
    "priorityclasses": "scheduling.k8s.io",
    # Who may read /metrics: the operator asks for each scraper (runtime.access).
    "tokenreviews": "authentication.k8s.io",
    "subjectaccessreviews": "authorization.k8s.io",
    # Kueue's, granted with kueue.enabled (test_kueue_jobs.py)
    **dict.fromkeys(
        ("workloads", "localqueues", "resourceflavors", "workloadpriorityclasses"),
        "kueue.x-k8s.io",
    ),
}


def qualified(resource: str) -> str:
    """As can-i names it ("deployments.apps"); the five job kinds as one,
    since the operator handles them alike and a test runs two of them."""
    base, _, sub = resource.partition("/")
    base = base.rsplit(".dlk8s.io", 1)[0]
    if base in JOB_KINDS:
        name = "jobs.dlk8s.io"
    else:
        group = GROUPS.get(base.split(".")[0])
        name = f"{base.split('.')[0]}.{group}" if group else base
    return f"{name}/{sub}" if sub else name


def granted(cluster: LocalCluster, user: str, namespace: str) -> set[Permission]:
    """`kubectl auth can-i --list` as `user`, one (resource, verb) per pair."""
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    found: set[Permission] = set()
    for line in out.splitlines()[1:]:
        match = re.match(r"^(\S+)\s+\[.*?\]\s+\[.*?\]\s+\[(.*)\]$", line.strip())
        if match:
            resource, verbs = match.groups()
            found |= {(qualified(resource), verb) for verb in verbs.split()}
    return found


def used(process: OperatorProcess) -> set[Permission]:
    found: set[Permission] = set()
    for labels in re.findall(
        r"^dlk8s_api_requests_total\{([^}]*)\} [1-9]", process.metrics(), re.M
    ):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        found.add((qualified(pairs["resource"]), pairs["verb"].lower()))
    return found
