"""`dlk8s-operator convert` on every seed example (tests/data/seeds/).

Each converted job is checked three ways: against the structural schema of its
CRD in crds/ (the small checker of tests/unit/support/crd_schema.py: types,
enums, bounds, required and unknown fields; the CEL rules are the apiserver's,
see tests/e2e/operator/test_convert.py), against the operator's own validation, and
against field values written here by hand from the seed READMEs. The notes on
standard error are checked too: every rename and drop must be told.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlk8s.cli import convert

from ..support.crd_schema import SCHEMAS, job_problems, schema_problems
from ..support.paddle import edl_example
from ..support.seeds import KWOK, SEEDS, TWINS

ROOT = Path(__file__).resolve().parents[3]
SEED_FILES = sorted(SEEDS.glob("*.yaml"))
JOB_SEEDS = [p for p in SEED_FILES if p.name != "tfjob-controller-config.yaml"]


# --- helpers ----------------------------------------------------------------------------


def converted(name: str, **options: Any) -> convert.Converted:
    path = SEEDS / name
    return convert.convert_text(path.read_text(), name, convert.Options(**options))


def one_job(result: convert.Converted) -> tuple[dict[str, Any], list[str]]:
    """The one job a conversion that did not fail made, and its notes."""
    assert not result.failed, [str(n) for n in result.notes]
    assert len(result.jobs) == 1
    return result.jobs[0], [n.message for n in result.notes]


def only_job(name: str, **options: Any) -> tuple[dict[str, Any], list[str]]:
    return one_job(converted(name, **options))


def roles(job: dict[str, Any], field: str) -> dict[str, dict[str, Any]]:
    return {entry[field]: entry for entry in job["spec"]["replicaSpecs"]}


def container(entry: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = entry["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


# --- the checker itself can fail ----------------------------------------------------------


def test_the_schema_check_refuses_a_seed_job_with_only_its_apiversion_changed() -> None:
    # EDL's spelling is what the conversion exists for: the CRD has none of it.
    raw = yaml.safe_load((SEEDS / "trainingjob-edl.yaml").read_text())
    raw.update(apiVersion="dlk8s.io/v1alpha1", kind="PaddleJob")
    problems = schema_problems({k: v for k, v in raw.items() if k != "metadata"},
                               SCHEMAS["PaddleJob"])  # fmt: skip
    assert ".spec.ports_num: unknown field (the apiserver would drop it)" in problems
    assert ".spec.trainer.minInstance: required" in problems
    assert ".spec.trainer.min-instance: unknown field (the apiserver would drop it)" in problems


def test_the_schema_check_refuses_wrong_types_enums_and_bounds() -> None:
    job = {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "spec": {"replicaSpecs": [{"tfReplicaType": "CHIEF", "replicas": -1, "tfPort": "x"}]},
    }
    problems = schema_problems(job, SCHEMAS["TFJob"])
    assert any("'CHIEF' not in" in p for p in problems)
    assert any(p.startswith(".spec.replicaSpecs[0].replicas: -1 below") for p in problems)
    assert ".spec.replicaSpecs[0].tfPort: str, not integer" in problems


# --- every seed example --------------------------------------------------------------------


@pytest.mark.parametrize("seed", JOB_SEEDS, ids=[p.stem for p in JOB_SEEDS])
def test_every_seed_job_converts_into_a_job_the_crd_and_the_operator_accept(seed: Path) -> None:
    result = convert.convert_text(seed.read_text(), seed.name)
    job, _ = one_job(result)
    assert job["apiVersion"] == "dlk8s.io/v1alpha1"
    assert job_problems(job) == []
    # The apiVersion change is always told, as the first note about the job.
    job_notes = [n.message for n in result.notes if not n.where.endswith(".yaml")]
    assert job_notes[0].startswith("apiVersion: ")


def test_tfjob_first_example() -> None:
    job, notes = only_job("tfjob-example-job.yaml")
    assert job["kind"] == "TFJob"
    assert job["metadata"] == {"name": "example-job"}
    by_role = roles(job, "tfReplicaType")
    assert [(r, e["replicas"]) for r, e in by_role.items()] == [
        ("MASTER", 1),
        ("WORKER", 1),
        ("PS", 2),
    ]
    assert container(by_role["MASTER"])["image"] == "gcr.io/tf-on-k8s-dogfood/tf_sample:dc944ff"
    assert "template" not in by_role["PS"]  # the standard gRPC server
    assert notes == [
        "apiVersion: tensorflow.org/v1alpha1 is now dlk8s.io/v1alpha1",
        "kind: TfJob is now TFJob",
    ]


def test_tfjob_replica_specs_spelling_becomes_replicaspecs() -> None:
    job, notes = only_job("tfjob-smoke-gpu.yaml")
    assert "replica_specs" not in job["spec"]
    master = roles(job, "tfReplicaType")["MASTER"]
    assert master["tfPort"] == 2222
    assert container(master)["resources"] == {"limits": {"alpha.kubernetes.io/nvidia-gpu": 1}}
    assert any(n.startswith("spec.replica_specs: renamed to spec.replicaSpecs") for n in notes)


def test_legacy_gpu_resource_is_renamed_only_when_asked() -> None:
    job, notes = only_job("tfjob-smoke-gpu.yaml", rename_legacy_gpu=True)
    master = roles(job, "tfReplicaType")["MASTER"]
    assert container(master)["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert (
        "spec.replicaSpecs[0].template.spec.containers[0].resources.limits"
        "[alpha.kubernetes.io/nvidia-gpu]: renamed to nvidia.com/gpu (--rename-legacy-gpu)"
    ) in notes


def test_tfjob_tensorboard_on_azure_keeps_its_share() -> None:
    job, _ = only_job("tfjob-tensorboard-azure.yaml")
    board = job["spec"]["tensorboard"]
    assert board["logDir"] == "/tmp/tensorflow"
    assert board["volumes"] == [
        {
            "name": "azurefile",
            "azureFile": {"secretName": "azure-secret", "shareName": "data", "readOnly": False},
        }
    ]
    assert board["volumeMounts"] == [{"mountPath": "/tmp/tensorflow", "name": "azurefile"}]


def test_tfjob_tensorboard_on_gke_reads_gcs() -> None:
    job, _ = only_job("tfjob-tensorboard-gke.yaml")
    assert job["spec"]["tensorboard"] == {"logDir": "gs://my-bucket/logdir"}
    master = roles(job, "tfReplicaType")["MASTER"]
    assert container(master)["args"] == ["--log_dir=gs://my-bucket/logdir"]


def test_exported_tfjob_loses_what_the_server_and_the_old_operator_wrote() -> None:
    job, notes = only_job("tfjob-exported.yaml")
    assert job["metadata"] == {"name": "example-job", "namespace": "default"}
    assert "status" not in job
    assert "RuntimeId" not in job["spec"]
    by_role = roles(job, "tfReplicaType")
    # The old operator's generated PS template goes: dlk8s makes its own.
    assert by_role["PS"] == {"replicas": 2, "tfPort": 2222, "tfReplicaType": "PS"}
    assert "IsDefaultPS" not in by_role["MASTER"]
    assert "metadata" not in by_role["MASTER"]["template"]  # creationTimestamp: null
    assert job["spec"]["tensorboard"] == {"logDir": "/tmp/tensorflow"}
    assert job["spec"]["tfImage"] == "tensorflow/tensorflow:1.3.0"
    for told in (
        "metadata.uid: dropped: the API server sets it for the new object",
        "metadata.resourceVersion: dropped: the API server sets it for the new object",
        "metadata.selfLink: dropped: the API server sets it for the new object",
        "spec.RuntimeId: dropped: dlk8s derives it from the job's uid",
        "spec.replicaSpecs[2].IsDefaultPS: dropped: written by the old operator",
        "spec.tensorboard.serviceType: dropped: empty (the old default)",
        "status: dropped: the old operator's status; dlk8s writes its own",
    ):
        assert told in notes
    assert any(n.startswith("spec.replicaSpecs[2].template: dropped") for n in notes)


def test_mxjob_linear_changes_nothing_but_the_group() -> None:
    job, notes = only_job("mxjob-linear-dist.yaml")
    assert job["kind"] == "MXJob"
    by_role = roles(job, "mxReplicaType")
    assert list(by_role) == ["SCHEDULER", "SERVER", "WORKER"]
    assert all(e["replicas"] == 1 for e in by_role.values())
    assert container(by_role["SERVER"])["imagePullPolicy"] == "Always"
    assert notes == ["apiVersion: fioravanzo.org/v1alpha1 is now dlk8s.io/v1alpha1"]


def test_mxjob_gpu_example_with_broken_anchors_mounts_the_share_in_every_replica() -> None:
    result = converted("mxjob-cifar-gpu.yaml")
    job, _ = one_job(result)
    share = {
        "name": "myshare",
        "azureFile": {"secretName": "mxsecret", "shareName": "mxsn", "readOnly": False},
    }
    by_role = roles(job, "mxReplicaType")
    for entry in by_role.values():
        assert entry["template"]["spec"]["volumes"] == [share]
        assert container(entry)["volumeMounts"] == [{"mountPath": "/", "name": "myshare"}]
    assert container(by_role["WORKER"])["resources"] == {
        "limits": {"alpha.kubernetes.io/nvidia-gpu": 1}
    }
    assert "resources" not in container(by_role["SCHEDULER"])
    # One repair note per place a strict YAML reader refuses, with its line.
    repairs = [n.message for n in result.notes if n.where == "mxjob-cifar-gpu.yaml"]
    assert [r.split(":")[0] for r in repairs] == ["line 15", "line 17", "line 26", "line 28"]
    assert "*cifarvol is used before &cifarvol is defined (line 45)" in repairs[1]
    # The replicas do not share objects: a change to one leaves the others.
    by_role["SERVER"]["template"]["spec"]["volumes"][0]["name"] = "changed"
    assert by_role["SCHEDULER"]["template"]["spec"]["volumes"][0]["name"] == "myshare"
    assert "&" not in convert.dump(result.jobs)  # no anchors in what it prints


def test_caffe2_replicaspecs_object_becomes_a_worker_list() -> None:
    job, notes = only_job("caffe2job-backendspecs.yaml")
    assert job["spec"]["backendSpecs"] == {
        "backendType": "redis",
        "redisHost": "redis-service",
        "redisPort": 6379,
    }
    (entry,) = job["spec"]["replicaSpecs"]
    assert entry["replicaType"] == "WORKER"
    assert entry["replicas"] == 2
    assert entry["template"]["spec"]["hostNetwork"] is True
    assert container(entry)["command"] == ["python", "resnet50_trainer.py"]
    assert container(entry)["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert any(n.startswith("spec.replicaSpecs: one object made a one-entry list") for n in notes)


def test_caffe2_backend_and_replicatype_list_get_dlk8s_spelling() -> None:
    job, notes = only_job("caffe2job-replicatype.yaml")
    assert job["spec"]["backendSpecs"] == {"backendType": "redis"}
    assert "backend" not in job["spec"]
    assert [(e["replicaType"], e["replicas"]) for e in job["spec"]["replicaSpecs"]] == [
        ("MASTER", 1),
        ("WORKER", 2),
    ]
    assert all("ReplicaType" not in e for e in job["spec"]["replicaSpecs"])
    assert "spec.backend: moved to spec.backendSpecs.backendType ('redis')" in notes
    assert "spec.replicaSpecs[0].ReplicaType: renamed to spec.replicaSpecs[0].replicaType" in notes
    assert "spec.replicaSpecs[1].ReplicaType: renamed to spec.replicaSpecs[1].replicaType" in notes


def test_edl_trainingjob_becomes_a_camelcase_paddlejob() -> None:
    job, notes = only_job("trainingjob-edl.yaml")
    assert job["kind"] == "PaddleJob"
    assert job["metadata"] == {"name": "example"}
    # EDL's example as the PaddleJob tests have it, written from the same README.
    assert job["spec"] == edl_example()["spec"]
    for old, new in (
        ("spec.ports_num", "spec.portsNum"),
        ("spec.ports_num_for_sparse", "spec.portsNumForSparse"),
        ("spec.fault_tolerant", "spec.faultTolerant"),
        ("spec.trainer.min-instance", "spec.trainer.minInstance"),
        ("spec.trainer.max-instance", "spec.trainer.maxInstance"),
        ("spec.pserver.min-instance", "spec.pserver.minInstance"),
        ("spec.pserver.max-instance", "spec.pserver.maxInstance"),
    ):
        assert any(n.startswith(f"{old}: renamed to {new}") for n in notes), old
    assert "kind: TrainingJob is now PaddleJob" in notes


# An EDL TrainingJob's start: a volume for every pod of the job.
EDL_WITH_VOLUMES = """
apiVersion: paddlepaddle.org/v1
kind: TrainingJob
metadata: {name: edl}
spec:
  image: paddle
  volumes: [{name: data, hostPath: {path: /data}}]
  VolumeMounts: [{name: data, mountPath: /data}]
"""


def test_edl_fields_without_a_dlk8s_counterpart_are_dropped_and_told() -> None:
    text = (
        EDL_WITH_VOLUMES
        + """
  host_network: true
  passes: 3
  fault_tolerant: true
  master: {etcd-endpoint: "etcd:2379", resources: {requests: {cpu: "1"}}}
  trainer:
    etcd-endpoint: "etcd:2379"
    entrypoint: python train.py
    min-instance: 1
    max-instance: 3
    replicaSpec: {}
  pserver: {min-instance: 1, max-instance: 1}
"""
    )
    job, notes = one_job(convert.convert_text(text, "edl.yaml"))
    assert job["spec"]["trainer"]["passes"] == 3  # top-level passes moved
    assert job["spec"]["master"]["resources"] == {"requests": {"cpu": "1"}}
    for gone in ("host_network", "volumes", "VolumeMounts", "passes"):
        assert gone not in job["spec"]
    assert "spec.passes: moved to spec.trainer.passes" in notes
    for path in ("spec.host_network", "spec.master.etcd-endpoint", "spec.trainer.etcd-endpoint",
                 "spec.trainer.replicaSpec"):  # fmt: skip
        assert any(n.startswith(f"{path}: dropped") for n in notes), path
    assert job_problems(job) == []


def test_edls_volumes_and_mounts_go_to_every_roles_pod_template() -> None:
    text = (
        EDL_WITH_VOLUMES
        + """
  fault_tolerant: FT
  trainer: {entrypoint: python train.py, min-instance: 2, max-instance: 2}
  pserver: {min-instance: 1, max-instance: 1}
"""
    )
    volumes = [{"name": "data", "hostPath": {"path": "/data"}}]
    mounts = [{"name": "data", "mountPath": "/data"}]
    expected = {
        "spec": {"volumes": volumes, "containers": [{"name": "paddle", "volumeMounts": mounts}]}
    }
    for tolerant, roles in (
        ("true", ("trainer", "pserver", "master")),
        ("false", ("trainer", "pserver")),
    ):
        job, notes = one_job(convert.convert_text(text.replace("FT", tolerant), "edl.yaml"))
        assert {r: job["spec"][r]["template"] for r in roles} == {r: expected for r in roles}
        if tolerant == "false":
            assert "master" not in job["spec"]  # a job that is not fault tolerant has none
        assert job_problems(job) == []
        where = ", ".join(f"spec.{r}.template.spec.volumes" for r in roles)
        assert f"spec.volumes: moved to {where} (EDL gave them to every pod of the job)" in notes
    # One list per pod: a change to one role's leaves the others'.
    job["spec"]["trainer"]["template"]["spec"]["volumes"][0]["name"] = "changed"
    assert job["spec"]["pserver"]["template"]["spec"]["volumes"][0]["name"] == "data"


# The start of an MXJob of the MXNet fork, named mx: its spec's fields follow.
SEED_MXJOB = """
apiVersion: fioravanzo.org/v1alpha1
kind: MXJob
metadata: {name: mx}
spec:
"""


def test_seed_scheduler_name_and_termination_policy() -> None:
    text = (
        SEED_MXJOB
        + """\
  schedulerName: volcano
  mxImage: mxnet:1.3
  terminationPolicy: {chief: {replicaName: WORKER, replicaIndex: 0}}
  replicaSpecs:
    - {mxReplicaType: SCHEDULER, mxPort: 9100,
       template: {spec: {containers: [{name: mxnet, image: mx}]}}}
    - {mxReplicaType: WORKER, replicas: 2,
       template: {spec: {schedulerName: other, containers: [{name: mxnet, image: mx}]}}}
"""
    )
    job, notes = one_job(convert.convert_text(text, "mx.yaml"))
    scheduler, worker = job["spec"]["replicaSpecs"]
    assert scheduler["psRootPort"] == 9100
    assert scheduler["template"]["spec"]["schedulerName"] == "volcano"
    assert worker["template"]["spec"]["schedulerName"] == "other"  # its own wins
    assert set(job["spec"]) == {"replicaSpecs"}
    assert any(n.startswith("spec.replicaSpecs[0].mxPort: renamed to") for n in notes)
    assert any(n.startswith("spec.terminationPolicy: dropped: its chief") for n in notes)
    assert any(n.startswith("spec.mxImage: dropped") for n in notes)
    assert (
        "spec.replicaSpecs[1].template.spec.schedulerName: kept; it differs from spec.schedulerName"
        in notes
    )


def test_the_controller_config_is_left_out_with_a_pointer_to_the_chart() -> None:
    result = converted("tfjob-controller-config.yaml")
    assert result.jobs == []
    assert not result.failed
    (note,) = result.notes
    assert "config.accelerators" in note.message
    assert note.where == "tfjob-controller-config.yaml: ConfigMap tf-job-operator-config"


# --- what it cannot convert -------------------------------------------------------------------


def test_a_training_operator_v1_mxjob_is_not_a_shape_convert_reads() -> None:
    text = (
        "apiVersion: kubeflow.org/v1\nkind: MXJob\nmetadata: {name: m}\nspec: {mxReplicaSpecs: {}}"
    )
    result = convert.convert_text(text, "v1.yaml")
    assert result.failed
    assert result.jobs == []
    assert "is not the seed operators' shape" in result.notes[0].message


def test_a_job_dlk8s_would_refuse_is_printed_but_fails_the_run() -> None:
    # The MXNet fork ran servers without an mxnet container; dlk8s refuses them.
    text = (
        SEED_MXJOB
        + """\
  replicaSpecs:
    - {mxReplicaType: SCHEDULER, template: {spec: {containers: [{name: mxnet, image: a}]}}}
    - {mxReplicaType: SERVER, template: {spec: {containers: [{name: other, image: a}]}}}
"""
    )
    result = convert.convert_text(text, "mx.yaml")
    assert result.failed
    assert len(result.jobs) == 1
    refusals = [n.message for n in result.notes if "dlk8s would refuse" in n.message]
    assert refusals
    assert "mxnet" in refusals[0]


def test_a_forward_alias_does_not_reach_into_another_document() -> None:
    text = "a: *x\n---\nb: &x 1\n"
    result = convert.convert_text(text, "two.yaml")
    assert result.failed
    assert "not valid YAML" in result.notes[0].message


def test_a_dlk8s_job_passes_through_unchanged() -> None:
    text = (KWOK / "tfjob.yaml").read_text()
    result = convert.convert_text(text, "tfjob.yaml")
    assert result.jobs == [yaml.safe_load(text)]
    assert [n.message for n in result.notes] == ["already a dlk8s job: printed as it is"]


# --- the command ------------------------------------------------------------------------------


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    convert.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = convert.run(parser.parse_args(list(argv)), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_command_prints_every_job_of_every_file_in_order() -> None:
    files = [str(p) for p in SEED_FILES]
    code, out, err = run(*[a for f in files for a in ("-f", f)])
    assert code == 0
    documents = list(yaml.safe_load_all(out))
    assert [d["metadata"]["name"] for d in documents] == [
        "example-job",  # caffe2job-backendspecs
        "example-job",  # caffe2job-replicatype
        "mx-cifar-gpu",
        "mx-test-dist",
        "example-job",  # tfjob-example-job (the controller config is left out)
        "example-job",  # tfjob-exported
        "tf-smoke-gpu",
        "tf-smoke-gpu",
        "tf-smoke-gpu",
        "example",
    ]
    assert out.startswith("---\napiVersion: dlk8s.io/v1alpha1\n")
    # Each note names its file; none goes to standard output.
    assert all(line.split(":")[0].endswith(".yaml") for line in err.splitlines())
    assert "renamed" not in out


def test_command_exit_codes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubeflow.org/v1\nkind: MXJob\nmetadata: {name: x}\nspec: {}\n")
    code, out, err = run("-f", str(SEEDS / "mxjob-linear-dist.yaml"), "-f", str(bad))
    assert code == 1
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["MXJob"]
    code, out, err = run("-f", str(tmp_path / "missing.yaml"))
    assert (code, out) == (2, "")
    assert "missing.yaml: cannot read" in err


# --- tests/data/kwok holds what convert prints --------------------------------------------


def test_the_kwok_jobs_of_the_seeds_are_what_convert_prints() -> None:
    """One dlk8s copy of each seed job, in tests/data/kwok/: convert's output,
    but for the names made distinct where two seeds of a kind shared one (so
    that they can run side by side in one namespace)."""
    assert set(TWINS) == {p.name for p in JOB_SEEDS}
    for seed, twin in TWINS.items():
        if twin is None:
            continue
        [job] = convert.convert_text((SEEDS / seed).read_text(), seed).jobs
        written = yaml.safe_load((KWOK / twin).read_text())
        job["metadata"]["name"] = written["metadata"]["name"]
        assert written == job, (seed, twin)
