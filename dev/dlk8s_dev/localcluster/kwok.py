"""The fake nodes kwok plays: what each advertises, its Node object, and the
stages that move their pods (Running at once, finished only when asked).

Pods finish only when asked: annotate a Running pod with
``kwok.dlk8s.io/exit-code`` (optionally ``kwok.dlk8s.io/run-duration``, a Go
duration such as ``5s``) and kwok moves it to Succeeded (code 0) or Failed with
that exit code in every container's status (``kwok.dlk8s.io/end-reason``
and ``-message`` set what the kubelet would say of the end, such as
``StartError``). A pod annotated
``kwok.dlk8s.io/use-grace`` is deleted only at the end of its grace period,
not at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import datafiles

EXIT_CODE_ANNOTATION = "kwok.dlk8s.io/exit-code"
RUN_DURATION_ANNOTATION = "kwok.dlk8s.io/run-duration"
USE_GRACE_ANNOTATION = "kwok.dlk8s.io/use-grace"
# The terminated state's reason and message instead of Error (or Completed).
END_REASON_ANNOTATION = "kwok.dlk8s.io/end-reason"
END_MESSAGE_ANNOTATION = "kwok.dlk8s.io/end-message"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: str = "32"
    memory: str = "128Gi"
    gpu: int = 4
    pods: int = 1100


DEFAULT_NODES: tuple[NodeSpec, ...] = (NodeSpec("kwok-node-0"), NodeSpec("kwok-node-1"))


def kwok_pod_stages() -> list[dict[str, Any]]:
    """Pods go Running at once, and finish only when a test annotates them."""
    return datafiles.yaml_docs(
        "kwok-stages.yaml",
        exit_code_annotation=EXIT_CODE_ANNOTATION,
        run_duration_annotation=RUN_DURATION_ANNOTATION,
        use_grace_annotation=USE_GRACE_ANNOTATION,
        end_reason_annotation=END_REASON_ANNOTATION,
        end_message_annotation=END_MESSAGE_ANNOTATION,
    )


def node_manifest(spec: NodeSpec) -> dict[str, Any]:
    resources = {
        "cpu": spec.cpu,
        "memory": spec.memory,
        "pods": str(spec.pods),
        "nvidia.com/gpu": str(spec.gpu),
        # The seed operators' examples still ask for the pre-device-plugin name.
        "alpha.kubernetes.io/nvidia-gpu": str(spec.gpu),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": spec.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }
