"""The PaddleJob world the tests share: EDL's example job and a reconcile
world that applies pod annotation patches as the API server would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlk8s.job.actions import Patch
from dlk8s.job.config import parse_config
from dlk8s.job.kinds.paddlejob.launch import LAUNCHER
from dlk8s.job.reconcile import Result

from .worlds import World

CONFIG = parse_config({})


def launched(*arguments: str) -> list[str]:
    """A container command: EDL's paddle_k8s with these arguments where the
    image has it (the launcher's fallback is tested in test_paddle_launcher)."""
    return ["sh", "-c", LAUNCHER, "paddle_k8s", *arguments]


UID = "0c1d2e3f-0000-4000-8000-0000000000aa"


def edl_example(**spec: Any) -> dict[str, Any]:
    """EDL's example training job (tests/data/kwok/paddlejob-edl.yaml)."""
    job: dict[str, Any] = {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "PaddleJob",
        "metadata": {"name": "example", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {
            "image": "yancey1989/edl-tutorial",
            "port": 7164,
            "portsNum": 1,
            "portsNumForSparse": 1,
            "faultTolerant": True,
            "trainer": {
                "entrypoint": "python /workspace/train_ft.py",
                "workspace": "/workspace",
                "passes": 50,
                "minInstance": 2,
                "maxInstance": 6,
                "resources": {
                    "limits": {"cpu": "200m", "memory": "200Mi"},
                    "requests": {"cpu": "200m", "memory": "200Mi"},
                },
            },
            "pserver": {
                "minInstance": 2,
                "maxInstance": 2,
                "resources": {
                    "limits": {"cpu": "800m", "memory": "1Gi"},
                    "requests": {"cpu": "500m", "memory": "600Mi"},
                },
            },
        },
    }
    job["spec"].update(spec)
    return job


# What EDL's job parser sets on every pod of its example job, the role and the
# downward API's variables apart.
EDL_EXAMPLE_ENV: dict[str, Any] = {
    "PADDLE_JOB_NAME": "example",
    "TRAINERS": "2",
    "PSERVERS": "2",
    "ENTRY": "python /workspace/train_ft.py",
    "TRAINER_PACKAGE": "/workspace",
    "PADDLE_INIT_PORT": "7164",
    "PADDLE_INIT_PORTS_NUM": "1",
    "PADDLE_INIT_PORTS_NUM_FOR_SPARSE": "1",
    "PADDLE_INIT_NUM_GRADIENT_SERVERS": "2",
    "PADDLE_INIT_NUM_PASSES": "50",
    # 200m of CPU: EDL truncated to 0 threads; at least one.
    "PADDLE_INIT_TRAINER_COUNT": "1",
    "PADDLE_INIT_USE_GPU": "0",
    "DLK8S_TRAINERS_FILE": "/etc/dlk8s/trainers",
}

# What Paddle 3's elastic launcher reads in place of its flags, on every pod
# of the (fault-tolerant) example job: docs/kinds.md, PaddlePaddle 3.
ELASTIC_LAUNCHER_ENV: dict[str, Any] = {
    "PADDLE_MASTER": "etcd://example-master-0.ns.svc:2379",
    "PADDLE_JOB_ID": "example",
    "PADDLE_NNODES": "2:6",
    "PADDLE_ELASTIC_LEVEL": "0",
    "PADDLE_ELASTIC_TIMEOUT": "10",
    "PADDLE_MAX_RESTART": "1000000",
    "PADDLE_LOG_DIR": "/var/log/dlk8s-paddle",
}


@dataclass
class PaddleWorld(World):
    """The reconcile test world, plus merge patches of pod annotations."""

    def apply(self, result: Result, graceful: bool = False) -> None:
        super().apply(result, graceful)
        for action in result.actions:
            if isinstance(action, Patch) and action.kind == "Pod":
                pod = self.children.get(("Pod", action.name))
                meta = action.patch["metadata"]
                if pod is None or pod["metadata"]["uid"] != meta["uid"]:
                    continue
                pod["metadata"].setdefault("annotations", {}).update(meta.get("annotations", {}))
                pod["spec"].update(action.patch.get("spec", {}))

    def scale(self, count: object, reason: str | None = None) -> None:
        """The count annotation, as anyone who may edit the job writes it."""
        annotations = self.job["metadata"].setdefault("annotations", {})
        annotations["dlk8s.io/trainers"] = str(count)
        if reason is not None:
            annotations["dlk8s.io/trainers-reason"] = reason

    def autoscale(self, count: int, reason: str) -> None:
        """The count, as the autoscaler of the operator's process gives it."""
        assert self.config.admission is not None
        self.config.admission.given.add(self.job["metadata"]["uid"])
        self.scale(count, reason)

    def exit(self, name: str, code: int, at: Any = None, container: str = "paddle") -> None:
        super().exit(name, code, at, container)
