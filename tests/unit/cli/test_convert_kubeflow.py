"""`dlk8s-operator convert` on Kubeflow training-operator's `kubeflow.org/v1`
PyTorchJobs and TFJobs (tests/data/kubeflow/).

Each converted job must pass its CRD's structural schema and the operator's
validation (tests/unit/support/crd_schema.py; the CEL rules are the API
server's, tests/e2e/operator/test_convert.py), and the values expected are written
from training-operator's documentation: its replica types (Master, Worker;
Chief, PS, Evaluator), its defaults (restartPolicy OnFailure for PyTorch and
Never for TensorFlow, cleanPodPolicy None, nprocPerNode auto, the elastic
bounds taken from each other or from the Worker replicas) and its port
names (pytorchjob-port, tfjob-port). Every change must be told in a note.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlk8s.cli import convert

from ..support.crd_schema import job_problems
from ..support.seeds import KWOK, ROOT

KUBEFLOW = ROOT / "tests" / "data" / "kubeflow"
FILES = sorted(KUBEFLOW.glob("*.yaml"))
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
TRAINING_OPERATOR = "kubeflow.org/training-operator"


def converted_text(text: str) -> tuple[dict[str, Any], list[str]]:
    result = convert.convert_text(text, "kubeflow.yaml")
    assert not result.failed, [str(n) for n in result.notes]
    [job] = result.jobs
    return job, [n.message for n in result.notes]


def converted(name: str) -> tuple[dict[str, Any], list[str]]:
    return converted_text((KUBEFLOW / name).read_text())


def roles(job: dict[str, Any], field: str) -> dict[str, dict[str, Any]]:
    return {entry[field]: entry for entry in job["spec"]["replicaSpecs"]}


def told(notes: list[str], *words: str) -> bool:
    return any(all(w in n for w in words) for n in notes)


def kubeflow(kind: str, roles_yaml: str, spec_yaml: str = "") -> str:
    """A kubeflow.org/v1 job of `kind`, its replica map made of `role()` lines."""
    replica_map = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}[kind]
    header = f"apiVersion: kubeflow.org/v1\nkind: {kind}\nmetadata: {{name: k}}\nspec:\n"
    return header + spec_yaml + f"\n  {replica_map}:\n" + roles_yaml


def pytorch(roles_yaml: str, spec_yaml: str = "") -> str:
    return kubeflow("PyTorchJob", roles_yaml, spec_yaml)


def role(name: str, replicas: int, container: str = "pytorch", port: Any = None) -> str:
    """One role of the map, with its main container (and that container's named port)."""
    main: dict[str, Any] = {"name": container, "image": "i"}
    if port is not None:
        main["ports"] = [{"name": port[0], "containerPort": port[1]}]
    entry = {"replicas": replicas, "template": {"spec": {"containers": [main]}}}
    return f"    {name}: {json.dumps(entry)}\n"  # JSON is YAML's flow style


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_kubeflow_job_converts_into_a_job_the_crd_and_the_operator_accept(
    path: Path,
) -> None:
    job, notes = converted(path.name)
    assert job["apiVersion"] == "dlk8s.io/v1alpha1"
    assert job_problems(job) == []
    assert "apiVersion: kubeflow.org/v1 is now dlk8s.io/v1alpha1" in notes


def test_the_kwok_pytorchjobs_are_what_convert_prints() -> None:
    twins = sorted(p.name for p in KWOK.glob("pytorchjob-*.yaml"))
    assert twins == sorted(p.name for p in FILES if p.name.startswith("pytorchjob-"))
    for name in twins:
        job, _ = converted(name)
        assert yaml.safe_load((KWOK / name).read_text()) == job, name


# --- PyTorchJob -------------------------------------------------------------------------


def test_static_pytorchjob_keeps_its_roles_port_and_policies() -> None:
    job, notes = converted("pytorchjob-ddp.yaml")
    by_role = roles(job, "pytorchReplicaType")
    assert list(by_role) == ["MASTER", "WORKER"]
    assert (by_role["MASTER"]["replicas"], by_role["WORKER"]["replicas"]) == (1, 2)
    assert by_role["MASTER"]["pytorchPort"] == 29500
    assert "pytorchPort" not in by_role["WORKER"]
    assert {e["restartPolicy"] for e in by_role.values()} == {"OnFailure"}
    assert job["spec"]["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "None"}
    assert job["spec"]["nprocPerNode"] == "auto"
    assert "pytorchReplicaSpecs" not in job["spec"]
    assert told(notes, "spec.pytorchReplicaSpecs:", "spec.replicaSpecs")
    assert told(notes, "spec.pytorchReplicaSpecs.Master.template", "29500", "pytorchPort")
    assert told(notes, "spec.runPolicy.schedulingPolicy: dropped", "kueue.x-k8s.io/queue-name")
    assert told(notes, "spec.runPolicy.cleanPodPolicy: set to None")
    assert told(notes, "spec.nprocPerNode: set to auto")


def test_torchrun_pytorchjob_keeps_its_processes_per_pod_and_gets_kubeflows_restarts() -> None:
    job, notes = converted("pytorchjob-torchrun.yaml")
    assert job["spec"]["nprocPerNode"] == "2"
    assert {e["restartPolicy"] for e in job["spec"]["replicaSpecs"]} == {"OnFailure"}
    for name in ("Master", "Worker"):
        assert told(notes, f"spec.pytorchReplicaSpecs.{name}.restartPolicy: set to OnFailure")
    assert not told(notes, "spec.nprocPerNode")


def test_elastic_pytorchjob_keeps_its_bounds_and_moves_its_rendezvous_settings() -> None:
    job, notes = converted("pytorchjob-elastic.yaml")
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 1,
        "maxReplicas": 3,
        "maxRestarts": 10,
        "nProcPerNode": 1,
    }
    assert "nprocPerNode" not in job["spec"]  # the elastic policy's says it
    [worker] = job["spec"]["replicaSpecs"]
    [pytorch_container] = worker["template"]["spec"]["containers"]
    assert {"name": "PET_RDZV_CONF", "value": "join_timeout=600"} in pytorch_container["env"]
    assert told(notes, "spec.elasticPolicy.rdzvBackend: dropped", "c10d")
    assert told(notes, "spec.elasticPolicy.rdzvConf: dropped: moved to PET_RDZV_CONF")
    assert told(notes, "spec.elasticPolicy.metrics: dropped", "HorizontalPodAutoscaler")
    assert told(notes, "spec.elasticPolicy:", "every WORKER")


def test_elastic_bounds_take_kubeflows_defaults() -> None:
    """Neither bound: both are the Worker replicas; one bound: the other is it."""
    job, notes = converted_text(pytorch(role("Worker", 2), "  elasticPolicy: {maxRestarts: 1}"))
    policy = job["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (2, 2)
    assert told(notes, "spec.elasticPolicy.minReplicas: set to 2, Kubeflow's default")
    job, _ = converted_text(pytorch(role("Worker", 3), "  elasticPolicy: {maxReplicas: 3}"))
    assert job["spec"]["elasticPolicy"] == {"maxReplicas": 3, "minReplicas": 3}


def test_elastic_etcd_and_hosts_are_dropped_and_a_master_is_told() -> None:
    spec = (
        "  nprocPerNode: '2'\n  elasticPolicy: {rdzvBackend: etcd, rdzvHost: etcd.example,"
        " rdzvId: run-1, minReplicas: 1, maxReplicas: 2, nProcPerNode: 4}"
    )
    job, notes = converted_text(pytorch(role("Master", 1) + role("Worker", 1), spec))
    assert job["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 2}
    assert job["spec"]["nprocPerNode"] == "2"
    assert told(notes, "spec.elasticPolicy.rdzvBackend: dropped", "not etcd")
    assert told(notes, "spec.elasticPolicy.rdzvHost: dropped")
    assert told(notes, "spec.elasticPolicy.rdzvId: dropped", "runtime id")
    assert told(notes, "spec.elasticPolicy.nProcPerNode: dropped", "spec.nprocPerNode")
    assert told(notes, "spec.elasticPolicy:", "MASTER now hosts the rendezvous")


def test_replica_keys_in_any_case_and_unknown_roles() -> None:
    job, notes = converted_text(
        pytorch(role("master", 1) + role("WORKER", 1) + role("Launcher", 1))
    )
    assert list(roles(job, "pytorchReplicaType")) == ["MASTER", "WORKER"]
    assert told(notes, "spec.pytorchReplicaSpecs.Launcher: dropped: not a role of this kind")


def test_a_kubeflow_job_dlk8s_would_refuse_fails_the_run() -> None:
    text = pytorch(role("Worker", 5), "  elasticPolicy: {minReplicas: 1, maxReplicas: 2}")
    result = convert.convert_text(text, "p.yaml")
    assert result.failed
    assert any("dlk8s would refuse" in n.message for n in result.notes)


# --- TFJob ------------------------------------------------------------------------------


def test_tfjob_chief_is_the_master_and_the_evaluator_goes() -> None:
    job, notes = converted("tfjob-chief-ps.yaml")
    by_role = roles(job, "tfReplicaType")
    assert list(by_role) == ["MASTER", "WORKER", "PS"]
    assert [by_role[r]["replicas"] for r in by_role] == [1, 2, 2]
    restart = {r: e["restartPolicy"] for r, e in by_role.items()}
    assert restart == {"MASTER": "ExitCode", "WORKER": "OnFailure", "PS": "Always"}
    assert job["spec"]["tfConfig"] == {"masterTaskType": "chief"}
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "ttlSecondsAfterFinished": 600,
        "successPolicy": "AllWorkers",
    }
    assert "successPolicy" not in job["spec"]
    assert told(notes, "spec.tfReplicaSpecs.Evaluator: dropped")
    assert told(notes, "spec.tfReplicaSpecs.Chief: now the MASTER")
    assert told(notes, "spec.successPolicy: moved to spec.runPolicy.successPolicy")
    assert not told(notes, "cleanPodPolicy")


def test_tfjob_of_workers_only_gets_worker_0_as_its_chief() -> None:
    job, notes = converted("tfjob-workers.yaml")
    by_role = roles(job, "tfReplicaType")
    assert [(r, e["replicas"]) for r, e in by_role.items()] == [("MASTER", 1), ("WORKER", 2)]
    assert by_role["MASTER"]["template"] == by_role["WORKER"]["template"]
    assert {e["restartPolicy"] for e in by_role.values()} == {"Never"}
    assert "tfPort" not in by_role["MASTER"]  # tfjob-port 2222 is the default
    assert job["spec"]["tfConfig"] == {"masterTaskType": "chief"}
    assert told(notes, "spec.tfReplicaSpecs.worker:", "worker 0 became it")
    assert told(notes, "spec.tfReplicaSpecs.worker.restartPolicy: set to Never")


def test_tfjob_master_chief_and_port() -> None:
    master = role("Master", 1, "tensorflow", ("tfjob-port", 3333))
    worker = role("Worker", 1, "tensorflow")
    job, notes = converted_text(kubeflow("TFJob", master + worker, '  successPolicy: ""'))
    assert "tfConfig" not in job["spec"]  # a Master is TF_CONFIG's master
    assert "successPolicy" not in job["spec"]["runPolicy"]
    assert told(notes, "spec.successPolicy: dropped: Kubeflow's default")
    assert roles(job, "tfReplicaType")["MASTER"]["tfPort"] == 3333
    assert told(notes, "spec.tfReplicaSpecs.Master.template", "3333", "tfPort")
    chief = role("Chief", 1, "tensorflow")
    job, notes = converted_text(kubeflow("TFJob", master + chief + worker))
    assert [e["tfReplicaType"] for e in job["spec"]["replicaSpecs"]] == ["MASTER", "WORKER"]
    assert job["spec"]["tfConfig"] == {"masterTaskType": "chief"}
    assert "tfPort" not in job["spec"]["replicaSpecs"][0]  # the Chief's, not the Master's
    assert told(notes, "spec.tfReplicaSpecs.Master: dropped: the Chief is the job's MASTER")


def test_multikueues_managed_by_carries_over_and_training_operators_is_dropped() -> None:
    """Kubeflow's runPolicy.managedBy: MultiKueue's moves to spec.managedBy
    (docs/multicluster.md), training-operator's has no meaning for dlk8s."""
    master = role("Master", 1, "tensorflow", ("tfjob-port", 3333))
    policy = "  runPolicy:\n    managedBy: {}\n"
    job, notes = converted_text(kubeflow("TFJob", master, policy.format(MULTIKUEUE)))
    assert job["spec"]["managedBy"] == MULTIKUEUE
    assert "managedBy" not in job["spec"]["runPolicy"]
    assert told(notes, "spec.runPolicy.managedBy: moved to spec.managedBy")
    job, notes = converted_text(kubeflow("TFJob", master, policy.format(TRAINING_OPERATOR)))
    assert "managedBy" not in job["spec"]
    assert "managedBy" not in job["spec"]["runPolicy"]
    assert told(notes, "spec.runPolicy.managedBy: dropped")
