"""The NetworkPolicy each job gets (docs/security.md): its pods take
connections from the job's own pods and from nobody else.

A job's rendezvous and data paths (a Caffe2 MASTER's redis, a PaddleJob
master's etcd, parameter servers, torchrun's c10d store, MXNet's scheduler,
and the ports gloo, NCCL and ps-lite open at random) listen on every
interface of the pod, and any pod of the cluster could otherwise reach them.
Policies add up: a user who wants more in (a scraper of the pods' own
metrics) adds a policy of their own that selects the same pods. Only
ingress is held: a job still reaches its data, registries and the API.
"""

from __future__ import annotations

from typing import Final

from dlk8s.job.childnames import child_name
from dlk8s.job.children import job_labels, manifest
from dlk8s.job.jobmodel import JobContext
from dlk8s.job.objects import Obj
from dlk8s.job.vocabulary import LABEL_JOB_NAME, LABEL_RUNTIME_ID

NETWORK_POLICY: Final = ("networking.k8s.io/v1", "NetworkPolicy")


def network_policy_name(job: str) -> str:
    return child_name(job, "network")


def job_pods(ctx: JobContext) -> Obj:
    """A selector of the job's replica pods: the name, and the runtime id
    that tells them from the pods of an earlier job of that name."""
    labels = job_labels(ctx)
    return {"matchLabels": {key: labels[key] for key in (LABEL_JOB_NAME, LABEL_RUNTIME_ID)}}


def job_network_policy(ctx: JobContext) -> Obj:
    """Ingress to the job's pods from the job's pods only, on every port."""
    selector = job_pods(ctx)
    spec = {
        "podSelector": selector,
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": selector}]}],
    }
    name = network_policy_name(ctx.job.name)
    return manifest(NETWORK_POLICY, ctx, name, job_labels(ctx), {"spec": spec})


def policy_for_pods(
    ctx: JobContext,
    name: str,
    labels: dict[str, str],
    pods: dict[str, str],
    port: int,
    anyone: bool,
) -> Obj:
    """Ingress to the pods `pods` selects on `port` only: from the job's
    namespace, or (`anyone`) from everywhere, as a LoadBalancer needs."""
    peers: list[Obj] = [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]
    rule: Obj = {
        "from": peers if anyone else [{"podSelector": {}}],
        "ports": [{"protocol": "TCP", "port": port}],
    }
    spec = {
        "podSelector": {"matchLabels": pods},
        "policyTypes": ["Ingress"],
        "ingress": [rule],
    }
    return manifest(NETWORK_POLICY, ctx, name, labels, {"spec": spec})
