"""The Trainer peer of make bench (bench/common/trainer_manifests.py,
bench/common/peers.py, the watcher's reading of a TrainJob): what the
cluster and the managers' config files get, as pure data."""

from __future__ import annotations

from dataclasses import fields
from multiprocessing import Value
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.common import trainer_manifests as m
from bench.common.harness import tfjob
from bench.common.peers import PEERS, peers_of
from bench.common.watcher import Progress, _record, status_of_trainjob, trainjob_kind
from bench.kueue import report as kueue_report
from bench.reports.training_operator import trainer_table
from dlk8s_dev.localcluster.controlplane import CONTROLLERS, controller_manager_argv

PORTS = {
    f"{who}-{what}": port
    for port, (who, what) in enumerate(
        ((w, n) for w in ("jobset", "trainer") for n in ("webhook", "metrics", "health")), 9000
    )
}


def test_the_runtime_has_the_tfjobs_shape_and_pod_templates() -> None:
    job = tfjob("burst-0001", 2, 1, exit_code=0)
    runtime = m.cluster_training_runtime(job)
    replicated = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert [(r["name"], r["template"]["spec"]["parallelism"]) for r in replicated] == [
        ("master", 1),
        ("worker", 2),
        ("ps", 1),
    ]
    assert all(r["replicas"] == 1 for r in replicated)
    pod = replicated[1]["template"]["spec"]["template"]
    assert pod["spec"]["containers"] == [
        {"name": "tensorflow", "image": "tensorflow/tensorflow:2.15.0"}
    ]
    assert pod["spec"]["restartPolicy"] == "Never"  # a Job's pods must say so
    assert pod["metadata"]["annotations"]  # kwok's exit code, as on the TFJob's pods
    assert "network" not in runtime["spec"]["template"]["spec"]  # JobSet's default: DNS hostnames
    assert "mlPolicy" not in runtime["spec"]
    # The TFJob is left as it was.
    assert "restartPolicy" not in job["spec"]["replicaSpecs"][0]["template"]["spec"]
    assert m.replicated_jobs(job) == 3
    assert m.replicated_jobs(tfjob("wide", 5, 0)) == 2


def test_a_trainjob_names_the_runtime_and_keeps_the_jobs_name_and_queue() -> None:
    job = tfjob("burst-0001", 2, 1)
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    out = m.trainjob(job)
    assert out["kind"] == "TrainJob"
    assert out["metadata"] == {"name": "burst-0001", "labels": {"kueue.x-k8s.io/queue-name": "q"}}
    assert out["spec"] == {"runtimeRef": {"name": m.RUNTIME}}


def test_stock_is_their_defaults_and_tuned_as_training_operators_tuned() -> None:
    stock, tuned = m.SETTINGS["stock"], m.SETTINGS["tuned"]
    jobset = m.jobset_config(stock, PORTS, Path("/c"))
    assert "clientConnection" not in jobset  # JobSet's own 500/500
    assert m.jobset_flags(stock) == []
    trainer = m.trainer_config(stock, PORTS)
    assert trainer["clientConnection"] == {"qps": 50, "burst": 100}  # its install's config
    # The install's config says 5; v2.3.0 runs one (trainer_config), and no flag changes that.
    assert trainer["controller"]["groupKindConcurrency"][m.TRAINJOB_KIND] == 5
    assert m.trainer_flags(stock) == []
    assert m.jobset_config(tuned, PORTS, Path("/c"))["clientConnection"] == {
        "qps": 1000,
        "burst": 1500,
    }
    assert m.jobset_flags(tuned) == ["--concurrent-reconciles=8"]
    tuned_trainer = m.trainer_config(tuned, PORTS)
    assert tuned_trainer["clientConnection"] == {"qps": 1000, "burst": 1500}
    assert m.trainer_flags(tuned) == ["--concurrent-reconciles=8"]


def test_their_servers_listen_on_127_0_0_1_with_the_harness_certificates() -> None:
    jobset = m.jobset_config(m.SETTINGS["stock"], PORTS, Path("/run/certs"))
    assert jobset["webhook"] == {"host": "127.0.0.1", "port": 9000, "certDir": "/run/certs"}
    assert jobset["metrics"]["bindAddress"] == "127.0.0.1:9001"
    assert jobset["internalCertManagement"] == {"enable": False}
    assert jobset["leaderElection"] == {"leaderElect": False}
    trainer = m.trainer_config(m.SETTINGS["stock"], PORTS)
    assert trainer["webhook"] == {"port": 9003, "host": "127.0.0.1"}
    assert trainer["metrics"] == {"bindAddress": "127.0.0.1:9004", "secureServing": False}
    assert trainer["health"]["healthProbeBindAddress"] == "127.0.0.1:9005"
    assert trainer["certManagement"] == {"enable": False}
    # Both are YAML a Go decoder reads back the same.
    assert yaml.safe_load(yaml.safe_dump(trainer)) == trainer


def _write(folder: Path, name: str, doc: Any, many: bool = False) -> Path:
    """`doc` as a YAML file; `many`: a list of documents, each its own."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump_all(doc) if many else yaml.safe_dump(doc))
    return path


def test_webhooks_get_their_kustomization_patches_a_url_and_the_ca(tmp_path: Path) -> None:
    hook = {
        "name": "vpod.kb.io",
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": "webhook-service", "path": "/validate--v1-pod"}},
    }
    other = dict(hook, name="vjobset.kb.io")
    other["clientConfig"] = {"service": {"name": "s", "path": "/validate-jobset"}}
    doc = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "x"}}
    _write(tmp_path, "manifests.yaml", [doc | {"webhooks": [other, hook]}, None], many=True)
    selector = {
        "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
    }
    patch = _write(
        tmp_path,
        "patch.yaml",
        [{"op": "replace", "path": "/webhooks/1", "value": hook | {"objectSelector": selector}}],
    )
    names = {"ValidatingWebhookConfiguration": "jobset-validating-webhook-configuration"}
    [out] = m.webhook_configurations(
        tmp_path, names, "https://127.0.0.1:9443", "Q0E=", {"ValidatingWebhookConfiguration": patch}
    )
    assert out["metadata"]["name"] == "jobset-validating-webhook-configuration"
    first, second = out["webhooks"]
    assert "objectSelector" not in first
    assert second["objectSelector"] == selector
    assert second["failurePolicy"] == "Fail"
    assert second["clientConfig"] == {
        "url": "https://127.0.0.1:9443/validate--v1-pod",
        "caBundle": "Q0E=",
    }


def test_json_patch_adds_and_replaces_and_refuses_the_rest() -> None:
    doc = {"webhooks": [{"name": "a"}, {"name": "b"}], "metadata": {"name": "x"}}
    out = m.json_patch(
        doc,
        [
            {"op": "add", "path": "/webhooks/0/objectSelector", "value": {"k": 1}},
            {"op": "replace", "path": "/metadata/name", "value": "y"},
        ],
    )
    assert out == {
        "webhooks": [{"name": "a", "objectSelector": {"k": 1}}, {"name": "b"}],
        "metadata": {"name": "y"},
    }
    assert doc["metadata"]["name"] == "x"  # not changed in place
    with pytest.raises(ValueError, match="remove"):
        m.json_patch(doc, [{"op": "remove", "path": "/metadata"}])


def test_rbac_takes_the_kustomizations_resources_with_its_prefix_and_namespace(
    tmp_path: Path,
) -> None:
    sa = {
        "kind": "ServiceAccount",
        "metadata": {"name": "controller-manager", "namespace": "system"},
    }
    binding = {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "manager-rolebinding"},
        "roleRef": {"kind": "ClusterRole", "name": "manager-role"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}
        ],
    }
    _write(tmp_path, "sa.yaml", sa)
    _write(tmp_path, "binding.yaml", binding)
    _write(tmp_path, "editor.yaml", {"kind": "ClusterRole", "metadata": {"name": "editor"}})
    _write(tmp_path, "kustomization.yaml", {"resources": ["sa.yaml", "binding.yaml"]})
    docs = m.rbac(tmp_path, "jobset-system", "jobset-")
    assert [d["metadata"]["name"] for d in docs] == [
        "jobset-controller-manager",
        "jobset-manager-rolebinding",
    ]
    assert docs[0]["metadata"]["namespace"] == "jobset-system"
    assert docs[1]["roleRef"]["name"] == "jobset-manager-role"
    assert docs[1]["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "jobset-controller-manager",
            "namespace": "jobset-system",
        }
    ]
    assert "namespace" not in docs[1]["metadata"]


def test_jobsets_crd_loses_its_conversion_webhook(tmp_path: Path) -> None:
    crd = {
        "metadata": {"name": "jobsets.jobset.x-k8s.io"},
        "spec": {"conversion": {"strategy": "Webhook"}},
    }
    _write(tmp_path / "bases", "jobset.x-k8s.io_jobsets.yaml", crd)
    assert m.jobset_crd(tmp_path) == {"metadata": {"name": "jobsets.jobset.x-k8s.io"}, "spec": {}}


def test_a_trainjob_runs_once_every_replicated_job_is_ready() -> None:
    def jobs(*ready: int) -> dict[str, Any]:
        return {
            "jobsStatus": [
                {"name": f"j{i}", "ready": r, "succeeded": 0} for i, r in enumerate(ready)
            ]
        }

    assert status_of_trainjob({}, 3) == {"phase": None}
    assert status_of_trainjob(jobs(1, 0, 1), 3)["phase"] == "Creating"
    assert status_of_trainjob(jobs(1, 1), 3)["phase"] == "Creating"  # one not reported yet
    assert status_of_trainjob(jobs(1, 1, 1), 3) == {"phase": "Running", "state": "Running"}
    complete = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert status_of_trainjob(complete, 3) == {"phase": "Done", "state": "Succeeded"}
    failed = jobs(1, 1, 1) | {"conditions": [{"type": "Failed", "status": "True"}]}
    assert status_of_trainjob(failed, 3)["phase"] == "Failed"


def test_metrics_count_every_controller_of_a_process() -> None:
    text = "\n".join(
        [
            'controller_runtime_reconcile_total{controller="trainjob",result="success"} 7',
            'controller_runtime_reconcile_total{controller="jobset",result="error"} 2',
            'rest_client_requests_total{code="201",host="h",method="POST"} 12',
            'rest_client_requests_total{code="200",host="h",method="POST"} 3',
            'workqueue_depth{controller="jobset",name="jobset"} 4',
        ]
    )
    assert m.reconciles_of(text) == 9
    assert m.requests_of(text) == {"POST": 15}
    assert m.queue_depth_of(text) == 4


def test_peers_names_training_operator_as_before_and_trainer_beside_it() -> None:
    assert [p.name for p in peers_of(["stock", "trainer-tuned"])] == [
        "training-operator-stock",
        "trainer-tuned",
    ]
    trainer = PEERS["trainer-stock"]
    jobs = [tfjob(f"b-{i}", 2, 1) for i in range(3)]
    assert trainer.services(jobs, 12) == 3  # one headless Service per JobSet
    assert PEERS["tuned"].services(jobs, 12) == 12
    assert trainer.kind(jobs).replicated_jobs == 3
    assert [j["kind"] for j in trainer.jobs(jobs)] == ["TrainJob"] * 3
    assert trainer.tuned() == PEERS["trainer-tuned"]
    assert trainer.figures()["trainer"]["trainer_qps"] == 50
    with pytest.raises(ValueError, match="trainer-fast"):
        peers_of(["trainer-fast"])


def test_the_report_names_trainer_and_its_settings() -> None:
    run = {"total_created_s": 2.0, "operator": {"cpu_seconds": 3.0}}
    settings = m.SETTINGS["tuned"].__dict__ | {"version": "v2.3.0", "jobset_version": "v0.12.0"}
    res = {"ceiling": run, "operator": run, "trainer-tuned": run | {"trainer": settings}}
    lines = trainer_table(res)
    assert lines[0] == "### dlk8s beside Kubeflow Trainer v2.3.0 with JobSet v0.12.0"
    assert "tuned: JobSet 1000 QPS (burst 1500), 8 reconcile(s)" in lines[2]
    assert trainer_table({"ceiling": run, "operator": run}) == []


def test_the_master_decides_the_jobset_as_it_decides_the_tfjob() -> None:
    spec = m.cluster_training_runtime(tfjob("j", 2, 1))["spec"]["template"]["spec"]
    assert spec["successPolicy"] == {"operator": "Any", "targetReplicatedJobs": ["master"]}
    no_master = tfjob("j", 2, 1, master=0)
    no_master["spec"]["replicaSpecs"] = no_master["spec"]["replicaSpecs"][1:]
    assert "successPolicy" not in m.cluster_training_runtime(no_master)["spec"]["template"]["spec"]


def test_kueues_own_workloads_are_counted_for_the_job_that_owns_them() -> None:
    progress = Progress(*(Value("i", 0) for _ in fields(Progress)))
    seen: dict[str, Any] = {}
    workload = {
        "metadata": {
            "name": "trainjob-tf-0001-1a2b3",
            "resourceVersion": "7",
            "ownerReferences": [{"kind": "TrainJob", "name": "tf-0001"}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }
    _record("workloads", "ADDED", workload, 1.0, seen, progress, trainjob_kind(2))
    assert seen["trainjob-tf-0001-1a2b3"]["job"] == "tf-0001"
    assert progress.workloads_admitted.value == 1
    labelled = {"metadata": {"name": "w", "labels": {"dlk8s.io/job-name": "mine"}}}
    _record("workloads", "ADDED", labelled, 1.0, seen, progress)
    assert seen["w"]["job"] == "mine"


def test_the_kueue_report_shows_the_trainer_modes_from_their_admission() -> None:
    run = {
        "pods_created_p50_s": 1.0,
        "pods_created_p99_s": 2.0,
        "first_started": {"p50_s": 1.0, "p99_s": 2.0},
        "started_later": {"p50_s": 1.0, "p99_s": 2.0},
        "jobs_measured": 4,
        "drain_seconds": 9.0,
        "operator": {"cpu_seconds": 3.0},
        "control_plane_cpu_seconds": {},
        "checks": {"pods_before_admission": 0},
    }
    meta = {k: 1 for k in ("jobs", "job_workers", "gpus_per_pod", "quota_jobs", "run_for")}
    meta |= {"date": "d", "git": "g", "cpus": 2, "cpu_model": "c", "nodes": "n", "kueue": "v"}
    text = kueue_report.markdown({"meta": meta, "runs": {"kueue": run, "trainer-tuned": run}})
    assert "| | with Kueue | Trainer tuned, with Kueue |" in text
    assert "| from | Workload Admitted | Workload Admitted |" in text
    assert "- Checks (trainer-tuned): pods_before_admission 0" in text


def test_trainer_asks_kube_controller_manager_for_the_job_controller() -> None:
    assert PEERS["trainer-stock"].kcm_controllers() == ("job-controller",)
    assert PEERS["stock"].kcm_controllers() == ()
    argv = controller_manager_argv(
        "kcm", Path("/w"), Path("/k"), 1, Path("/ca"), 10, extra_controllers=("job-controller",)
    )
    controllers = next(a for a in argv if a.startswith("--controllers=")).split("=")[1].split(",")
    assert controllers == [*CONTROLLERS, "job-controller"]
    plain = controller_manager_argv("kcm", Path("/w"), Path("/k"), 1, Path("/ca"), 10)
    assert "job-controller" not in next(a for a in plain if a.startswith("--controllers="))
