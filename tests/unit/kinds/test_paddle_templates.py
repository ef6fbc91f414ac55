"""PaddleJob's pod templates: spec.master/pserver/trainer.template merged into
the pods the operator builds (placement, pull secrets, priority, volumes,
security contexts, sidecars), and the parts of the pod a template may not
take from the operator."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dlk8s.job.actions import Create

from ..support.crd_schema import job_problems
from ..support.malformed import NOW, check_every_mutation, check_every_running_mutation, running
from ..support.paddle import CONFIG, PaddleWorld, edl_example

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RESTRICTED_POD = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
GPU_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
            ]
        }
    }
}


def trainer_template() -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"team": "vision", "paddle-job": "not-ours"},
            "annotations": {"a": "b"},
        },
        "spec": {
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [GPU_TAINT],
            "affinity": GPU_AFFINITY,
            "imagePullSecrets": [{"name": "regcred"}],
            "priorityClassName": "training",
            "securityContext": RESTRICTED_POD,
            "restartPolicy": "Always",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
            "containers": [
                {
                    "name": "paddle",
                    "securityContext": RESTRICTED_CONTAINER,
                    "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
                    "env": [{"name": "DATA", "value": "/data"}, {"name": "TRAINERS", "value": "9"}],
                    "imagePullPolicy": "Always",
                },
                {"name": "logs", "image": "busybox", "command": ["tail", "-F", "/data/log"]},
            ],
        },
    }


def templated() -> dict[str, Any]:
    job = edl_example()
    spec = job["spec"]
    spec["trainer"]["template"] = trainer_template()
    spec["pserver"]["template"] = {"spec": {"nodeSelector": {"pool": "cpu"}}}
    spec["master"] = {
        "template": {
            "spec": {"imagePullSecrets": [{"name": "regcred"}], "priorityClassName": "control"}
        }
    }
    return job


def created_pods(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result = PaddleWorld(job, config=CONFIG).reconcile()
    return {
        a.obj["metadata"]["name"]: a.obj
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == "Pod"
    }


def container(pod: dict[str, Any], name: str = "paddle") -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return found


def test_each_roles_template_places_only_that_roles_pods() -> None:
    pods = created_pods(templated())
    trainer = pods["example-trainer-1"]["spec"]
    assert trainer["nodeSelector"] == {"pool": "gpu"}
    assert trainer["tolerations"] == [GPU_TAINT]
    assert trainer["affinity"] == GPU_AFFINITY
    assert trainer["imagePullSecrets"] == [{"name": "regcred"}]
    assert trainer["priorityClassName"] == "training"
    assert trainer["securityContext"] == RESTRICTED_POD
    pserver = pods["example-pserver-0"]["spec"]
    assert pserver["nodeSelector"] == {"pool": "cpu"}
    assert "tolerations" not in pserver
    assert "imagePullSecrets" not in pserver
    master = pods["example-master-0"]["spec"]
    assert master["imagePullSecrets"] == [{"name": "regcred"}]
    assert master["priorityClassName"] == "control"
    assert "nodeSelector" not in master
    # The operator still decides how a pod ends: it recreates, the kubelet does not.
    assert {p["spec"]["restartPolicy"] for p in pods.values()} == {"Never"}


def test_an_image_pull_secret_in_every_template_reaches_every_pod() -> None:
    job = edl_example()
    secret = {"spec": {"imagePullSecrets": [{"name": "regcred"}]}}
    for role in ("trainer", "pserver"):
        job["spec"][role]["template"] = copy.deepcopy(secret)
    job["spec"]["master"] = {"template": copy.deepcopy(secret)}
    pods = created_pods(job)
    assert len(pods) == 5
    assert {n: p["spec"].get("imagePullSecrets") for n, p in pods.items()} == {
        n: [{"name": "regcred"}] for n in pods
    }


def test_the_main_container_merges_the_templates_and_the_operators_parts() -> None:
    trainer = created_pods(templated())["example-trainer-0"]
    paddle = container(trainer)
    # The operator's: image, launcher, ports, resources from the spec.
    assert paddle["image"] == "yancey1989/edl-tutorial"
    assert paddle["command"][:2] == ["sh", "-c"]
    assert paddle["resources"] == edl_example()["spec"]["trainer"]["resources"]
    # The template's: security context, pull policy, its mounts and variables...
    assert paddle["securityContext"] == RESTRICTED_CONTAINER
    assert paddle["imagePullPolicy"] == "Always"
    mounts = [(m["name"], m["mountPath"]) for m in paddle["volumeMounts"]]
    # ...then the operator's: Paddle's launcher logs, the live trainer count.
    operators = [("dlk8s-paddle-log", "/var/log/dlk8s-paddle"), ("dlk8s-trainers", "/etc/dlk8s")]
    assert mounts == [("data", "/data"), *operators]
    env = {e["name"]: e.get("value") for e in paddle["env"]}
    assert env["DATA"] == "/data"
    # ...except EDL's variables, which the operator owns.
    assert env["TRAINERS"] == "2"
    assert [e["name"] for e in paddle["env"]].count("TRAINERS") == 1
    volumes = [v["name"] for v in trainer["spec"]["volumes"]]
    assert volumes == ["data", "dlk8s-trainers", "dlk8s-paddle-log"]
    # A sidecar joins the pod as written, after the operator's container.
    assert [c["name"] for c in trainer["spec"]["containers"]] == ["paddle", "logs"]
    assert container(trainer, "logs") == trainer_template()["spec"]["containers"][1]


def test_template_labels_and_annotations_reach_the_pods_under_the_operators() -> None:
    trainer = created_pods(templated())["example-trainer-0"]["metadata"]
    assert trainer["labels"]["team"] == "vision"
    # EDL's label and ours are the operator's: a template cannot move a pod out of its job.
    assert trainer["labels"]["paddle-job"] == "example"
    assert trainer["labels"]["dlk8s.io/job-name"] == "example"
    assert trainer["annotations"]["a"] == "b"
    assert trainer["annotations"]["dlk8s.io/trainers"] == "2"


def test_the_master_keeps_its_etcd_beside_the_templates_containers() -> None:
    job = templated()
    job["spec"]["master"]["template"]["spec"]["volumes"] = [{"name": "cfg", "emptyDir": {}}]
    master = created_pods(job)["example-master-0"]["spec"]
    assert [c["name"] for c in master["containers"]] == ["paddle", "etcd"]
    assert [v["name"] for v in master["volumes"]] == ["cfg", "dlk8s-trainers", "etcd-data"]


def test_the_job_itself_is_never_modified() -> None:
    job = templated()
    before = copy.deepcopy(job)
    created_pods(job)
    assert job == before


def test_a_job_with_templates_passes_the_crd_and_the_operator() -> None:
    assert job_problems(templated()) == []


def invalid(job: dict[str, Any]) -> str:
    status = PaddleWorld(job, config=CONFIG).reconcile().status
    assert (status["state"], status.get("reason")) == ("Failed", "InvalidSpec"), status
    message: str = status["conditions"][-1]["message"]
    return message


@pytest.mark.parametrize("field", ["image", "command", "args", "ports", "resources"])
def test_the_main_container_may_not_take_what_the_paddlejob_sets(field: str) -> None:
    job = templated()
    main = job["spec"]["trainer"]["template"]["spec"]["containers"][0]
    main[field] = {"resources": {"limits": {"cpu": "1"}}}.get(field, ["x"])
    message = invalid(job)
    assert f"spec.trainer.template.spec.containers[0].{field}" in message


def test_the_operators_volumes_and_the_masters_etcd_are_reserved() -> None:
    job = templated()
    job["spec"]["pserver"]["template"]["spec"]["volumes"] = [{"name": "dlk8s-trainers"}]
    assert "spec.pserver.template.spec.volumes[0].name" in invalid(job)
    job = templated()
    etcd = {"name": "etcd", "image": "etcd"}
    job["spec"]["master"]["template"]["spec"]["containers"] = [etcd]
    assert "spec.master.template.spec.containers[0].name" in invalid(job)
    # A trainer may run a container called etcd: only the master has ours.
    job = templated()
    job["spec"]["trainer"]["template"]["spec"]["containers"].append(etcd)
    assert job_problems(job) == []


T = ("trainer", "template")
P = ("pserver", "template", "spec")


@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        (T, "x", "spec.trainer.template"),
        ((*T, "spec"), [], "spec.trainer.template.spec"),
        ((*T, "metadata", "labels"), {"a": 1}, "spec.trainer.template.metadata.labels"),
        ((*P, "containers"), [{"image": "x"}], "spec.pserver.template.spec.containers[0].name"),
        ((*P, "volumes"), [{}], "spec.pserver.template.spec.volumes[0]"),
    ],
)
def test_malformed_templates_fail_naming_the_field(
    where: tuple[str, ...], value: object, path: str
) -> None:
    job = templated()
    parent = job["spec"]
    for key in where[:-1]:
        parent = parent.setdefault(key, {})
    parent[where[-1]] = value
    assert path in invalid(job)


def test_malformed_fields_of_templated_jobs_never_raise() -> None:
    job = templated()
    assert check_every_mutation(job, CONFIG, NOW) > 500
    check_every_running_mutation(*running(job), CONFIG, NOW)
