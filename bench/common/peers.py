"""The peers a burst can be run with, by the names `--peers` takes.

- ``stock``, ``tuned``: Kubeflow's training-operator (training_operator.py),
  its TFJobs of the same shape; the results' key is
  ``training-operator-<settings>``;
- ``trainer-stock``, ``trainer-tuned``: Kubeflow Trainer v2 with JobSet
  (trainer.py), TrainJobs on a ClusterTrainingRuntime of the same shape.

Each is measured as runs.py measures the operator: its jobs' pods all
created, each job Running as the peer reports it (training-operator's
Running condition; a TrainJob's JobSet status: every replicated Job ready),
kube-apiserver's CPU and the peer's processes' CPU summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import trainer, trainer_manifests, training_operator
from bench.common.devtools import LocalCluster
from bench.common.harness import Controller
from bench.common.watcher import KUBEFLOW_TFJOBS, JobKind, trainjob_kind


@dataclass(frozen=True)
class Peer:
    family: str  # "training-operator" or "trainer"
    settings: training_operator.Settings | trainer_manifests.Settings

    @property
    def name(self) -> str:
        """The label of its runs and its key in the results."""
        return f"{self.family}-{self.settings.name}"

    def jobs(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """dlk8s's TFJobs as this peer's jobs of the same shape."""
        if self.family == "trainer":
            return [trainer_manifests.trainjob(j) for j in jobs]
        return [training_operator.kubeflow_tfjob(j) for j in jobs]

    def kind(self, jobs: list[dict[str, Any]]) -> JobKind:
        """Where its jobs are and how the watcher reads them."""
        if self.family == "trainer":
            return trainjob_kind(trainer_manifests.replicated_jobs(jobs[0]))
        return KUBEFLOW_TFJOBS

    def services(self, jobs: list[dict[str, Any]], pods: int) -> int:
        """The Services its jobs get: one per pod (training-operator), one
        headless Service per JobSet (Trainer)."""
        return len(jobs) if self.family == "trainer" else pods

    def start(
        self, cluster: LocalCluster, raw: Path, scenario: str, tfjob: dict[str, Any]
    ) -> Controller:
        """A fresh process (Trainer: a pair), its logs in `raw`."""
        if isinstance(self.settings, trainer_manifests.Settings):
            label = f"{self.name}-{scenario}"
            return trainer.Trainer(cluster, self.settings, raw, tfjob, label=label).start()
        log_file = raw / f"{self.name}-{scenario}.log"
        return training_operator.TrainingOperator(cluster, self.settings, log_file).start()

    def figures(self) -> dict[str, Any]:
        """Its settings and version, under its family's key in a run's results."""
        if self.family == "trainer":
            versions = {
                "version": trainer.TRAINER_VERSION,
                "jobset_version": trainer.JOBSET_VERSION,
            }
            return {"trainer": asdict(self.settings) | versions}
        return {
            "training_operator": asdict(self.settings)
            | {"version": training_operator.TRAINING_OPERATOR_VERSION}
        }

    def install(self, cluster: LocalCluster, tfjob: dict[str, Any]) -> None:
        if self.family == "trainer":
            trainer.install(cluster, tfjob)
        else:
            training_operator.install(cluster)

    def kcm_controllers(self) -> tuple[str, ...]:
        """kube-controller-manager's controllers it needs beyond the local
        cluster's: Trainer's JobSets run batch Jobs, whose pods the job
        controller makes (the cluster runs none otherwise)."""
        return ("job-controller",) if self.family == "trainer" else ()

    def tuned(self) -> Peer:
        """The same peer with its tuned settings (its warm-up's)."""
        family = trainer_manifests if self.family == "trainer" else training_operator
        return Peer(self.family, family.SETTINGS["tuned"])

    def watched(self) -> list[tuple[str, str]]:
        """(resource, group) of its jobs, which the garbage collector must
        watch before a measured run."""
        if self.family == "trainer":
            return [("trainjobs", "trainer.kubeflow.org"), ("jobsets", "jobset.x-k8s.io")]
        return [("tfjobs", "kubeflow.org")]


PEERS = {
    **{name: Peer("training-operator", s) for name, s in training_operator.SETTINGS.items()},
    **{f"trainer-{name}": Peer("trainer", s) for name, s in trainer_manifests.SETTINGS.items()},
}


def peers_of(names: Sequence[str]) -> list[Peer]:
    """The peers `--peers` names, in its order; ValueError names an unknown one."""
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(unknown)}: one of {', '.join(PEERS)}")
    return [PEERS[n] for n in names]
