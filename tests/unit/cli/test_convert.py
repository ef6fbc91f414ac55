"""`dlk8s-operator convert` on every seed example (tests/data/seeds/).

Each converted job is checked three ways: against the structural schema of its
CRD in crds/ (a small checker below: types, enums, bounds, required and
unknown fields; the CEL rules are the apiserver's, see
tests/e2e/test_convert.py), against the operator's own validation, and
against field values written here by hand from the seed READMEs. The notes on
standard error are checked too: every rename and drop must be told.
"""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlk8s.cli import convert
from dlk8s.job.kinds import KINDS

ROOT = Path(__file__).resolve().parents[3]
SEEDS = ROOT / "tests" / "data" / "seeds"
SEED_FILES = sorted(SEEDS.glob("*.yaml"))
EXAMPLES = ROOT / "examples" / "seeds"
JOB_SEEDS = [p for p in SEED_FILES if p.name != "tfjob-controller-config.yaml"]


# --- a small structural-schema checker -------------------------------------------


def _crd_schemas() -> dict[str, dict[str, Any]]:
    schemas = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        version = crd["spec"]["versions"][0]
        schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas


SCHEMAS = _crd_schemas()


def _type_ok(value: Any, kind: str | None) -> bool:
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    return kind is None or checks[kind](value)


def schema_problems(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """What the apiserver's structural checks would refuse or prune (CEL aside)."""
    if value is None:
        return [f"{path}: null (the apiserver drops it)"]
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: neither an integer nor a string"]
    elif (
        "anyOf" in schema
        and "type" not in schema
        and all(schema_problems(value, s, path) for s in schema["anyOf"])
    ):
        return [f"{path}: matches none of anyOf"]
    if not _type_ok(value, schema.get("type")):
        return [f"{path}: {type(value).__name__}, not {schema['type']}"]
    found: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(f"{path}: {value} below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            found.append(f"{path}: {value} above {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            found.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            found.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            found.append(f"{path}: more than {schema['maxItems']} items")
        for index, item in enumerate(value):
            found += schema_problems(item, schema.get("items", {}), f"{path}[{index}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{path}.{key}: required")
        for key, item in value.items():
            if key in properties:
                found += schema_problems(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += schema_problems(item, extra, f"{path}.{key}")
            elif properties and not schema.get("x-kubernetes-preserve-unknown-fields"):
                found.append(f"{path}.{key}: unknown field (the apiserver would drop it)")
    return found


def job_problems(job: dict[str, Any]) -> list[str]:
    schema = SCHEMAS[job["kind"]]
    body = {k: v for k, v in job.items() if k != "metadata"}  # ObjectMeta is the apiserver's
    return schema_problems(body, schema) + KINDS[job["kind"]].validate(job)


# --- helpers ----------------------------------------------------------------------------


def converted(name: str, **options: Any) -> convert.Converted:
    path = SEEDS / name
    return convert.convert_text(path.read_text(), name, convert.Options(**options))


def only_job(name: str, **options: Any) -> tuple[dict[str, Any], list[str]]:
    result = converted(name, **options)
    assert not result.failed, [str(n) for n in result.notes]
    assert len(result.jobs) == 1
    return result.jobs[0], [n.message for n in result.notes]


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
    assert not result.failed, [str(n) for n in result.notes]
    assert len(result.jobs) == 1
    job = result.jobs[0]
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
    assert not result.failed
    (job,) = result.jobs
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
    assert job["spec"] == {
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
    }
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


def test_edl_fields_without_a_dlk8s_counterpart_are_dropped_and_told() -> None:
    text = """
apiVersion: paddlepaddle.org/v1
kind: TrainingJob
metadata: {name: edl}
spec:
  image: paddle
  host_network: true
  passes: 3
  volumes: [{name: data, hostPath: {path: /data}}]
  VolumeMounts: [{name: data, mountPath: /data}]
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
    result = convert.convert_text(text, "edl.yaml")
    assert not result.failed, [str(n) for n in result.notes]
    (job,) = result.jobs
    assert job["spec"]["trainer"]["passes"] == 3  # top-level passes moved
    assert job["spec"]["master"] == {"resources": {"requests": {"cpu": "1"}}}
    for gone in ("host_network", "volumes", "VolumeMounts", "passes"):
        assert gone not in job["spec"]
    notes = [n.message for n in result.notes]
    assert "spec.passes: moved to spec.trainer.passes" in notes
    for path in ("spec.host_network", "spec.volumes", "spec.VolumeMounts",
                 "spec.master.etcd-endpoint", "spec.trainer.etcd-endpoint",
                 "spec.trainer.replicaSpec"):  # fmt: skip
        assert any(n.startswith(f"{path}: dropped") for n in notes), path
    assert job_problems(job) == []


def test_seed_scheduler_name_and_termination_policy() -> None:
    text = """
apiVersion: fioravanzo.org/v1alpha1
kind: MXJob
metadata: {name: mx}
spec:
  schedulerName: volcano
  mxImage: mxnet:1.3
  terminationPolicy: {chief: {replicaName: WORKER, replicaIndex: 0}}
  replicaSpecs:
    - {mxReplicaType: SCHEDULER, mxPort: 9100,
       template: {spec: {containers: [{name: mxnet, image: mx}]}}}
    - {mxReplicaType: WORKER, replicas: 2,
       template: {spec: {schedulerName: other, containers: [{name: mxnet, image: mx}]}}}
"""
    result = convert.convert_text(text, "mx.yaml")
    assert not result.failed, [str(n) for n in result.notes]
    (job,) = result.jobs
    scheduler, worker = job["spec"]["replicaSpecs"]
    assert scheduler["psRootPort"] == 9100
    assert scheduler["template"]["spec"]["schedulerName"] == "volcano"
    assert worker["template"]["spec"]["schedulerName"] == "other"  # its own wins
    assert set(job["spec"]) == {"replicaSpecs"}
    notes = [n.message for n in result.notes]
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


def test_a_training_operator_v1_tfjob_is_not_a_seed_shape() -> None:
    text = (
        "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: t}\nspec: {tfReplicaSpecs: {}}"
    )
    result = convert.convert_text(text, "v1.yaml")
    assert result.failed
    assert result.jobs == []
    assert "is not the seed operators' shape" in result.notes[0].message


def test_a_job_dlk8s_would_refuse_is_printed_but_fails_the_run() -> None:
    # The MXNet fork ran servers without an mxnet container; dlk8s refuses them.
    text = """
apiVersion: fioravanzo.org/v1alpha1
kind: MXJob
metadata: {name: mx}
spec:
  replicaSpecs:
    - {mxReplicaType: SCHEDULER, template: {spec: {containers: [{name: mxnet, image: a}]}}}
    - {mxReplicaType: SERVER, template: {spec: {containers: [{name: other, image: a}]}}}
"""
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
    text = (ROOT / "examples" / "kwok" / "tfjob.yaml").read_text()
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
    bad.write_text("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: x}\nspec: {}\n")
    code, out, err = run("-f", str(SEEDS / "mxjob-linear-dist.yaml"), "-f", str(bad))
    assert code == 1
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["MXJob"]
    code, out, err = run("-f", str(tmp_path / "missing.yaml"))
    assert (code, out) == (2, "")
    assert "missing.yaml: cannot read" in err


# --- examples/seeds is what convert prints ------------------------------------------------


def test_examples_seeds_are_the_converted_seed_jobs() -> None:
    """examples/seeds/ documents the conversion; a change of convert shows up there.

    Regenerate one with:
    .tools/venv/bin/python -m dlk8s.cli.convert -f tests/data/seeds/NAME.yaml
    (and keep the header comment of the example).
    """
    expected = {p.name for p in JOB_SEEDS}
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == expected
    for seed in JOB_SEEDS:
        documents = list(yaml.safe_load_all((EXAMPLES / seed.name).read_text()))
        assert documents == convert.convert_text(seed.read_text(), seed.name).jobs, seed.name
