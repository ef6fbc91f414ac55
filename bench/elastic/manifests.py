"""A trace's job as the operator's kind: an elastic PaddleJob, or a
PyTorchJob of WORKERs only (elasticPolicy), each trainer or WORKER asking
for its GPUs with CPU and memory in step."""

from __future__ import annotations

from typing import Any

from bench.common.operator import API_VERSION
from bench.elastic.traces import PYTORCH, kind_of

NAMESPACE = "elastic-bench"


def manifest(job: dict[str, Any]) -> dict[str, Any]:
    return pytorchjob(job) if kind_of(job) is PYTORCH else paddlejob(job)


def member_resources(gpus: int) -> dict[str, Any]:
    """What a trainer or a WORKER asks for: CPU and memory in step with its GPUs."""
    return {
        "requests": {"cpu": str(2 * gpus), "memory": f"{8 * gpus}Gi"},
        "limits": {"nvidia.com/gpu": gpus},
    }


def paddlejob(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "PaddleJob",
        "metadata": {"name": job["name"], "namespace": NAMESPACE},
        "spec": {
            "image": "paddlepaddle/paddlecloud-job",
            "faultTolerant": True,
            "trainer": {
                "entrypoint": "python train.py",
                "workspace": "/workspace",
                "minInstance": job["minTrainers"],
                "maxInstance": job["maxTrainers"],
                "resources": member_resources(job["gpusPerTrainer"]),
            },
            "pserver": {
                "minInstance": 1,
                "maxInstance": 1,
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
            },
            "master": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        },
    }


def pytorchjob(job: dict[str, Any]) -> dict[str, Any]:
    """WORKERs only (WORKER 0's agent hosts the rendezvous), started at the minimum."""
    container = {
        "name": "pytorch",
        "image": "pytorch/pytorch",
        "command": ["torchrun", "train.py"],
        "resources": member_resources(job["gpusPerTrainer"]),
    }
    return {
        "apiVersion": API_VERSION,
        "kind": PYTORCH.name,
        "metadata": {"name": job["name"], "namespace": NAMESPACE},
        "spec": {
            "elasticPolicy": {
                "minReplicas": job["minTrainers"],
                "maxReplicas": job["maxTrainers"],
            },
            "replicaSpecs": [
                {
                    "pytorchReplicaType": "WORKER",
                    "replicas": job["minTrainers"],
                    "template": {"spec": {"containers": [container]}},
                }
            ],
        },
    }
