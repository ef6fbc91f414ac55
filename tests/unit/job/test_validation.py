"""Spec problems, each naming its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dlk8s.job.kinds.tfjob import TFJOB
from dlk8s.job.validation import metadata_problems, run_policy_problems

MASTER = {
    "tfReplicaType": "MASTER",
    "replicas": 1,
    "template": {"spec": {"containers": [{"name": "tensorflow"}]}},
}


def job(*specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
        "spec": {"replicaSpecs": [copy.deepcopy(s) for s in specs or (MASTER,)], **spec},
    }


def with_master(**changes: Any) -> dict[str, Any]:
    return job({**copy.deepcopy(MASTER), **changes})


def test_the_seed_example_is_valid() -> None:
    worker = {**copy.deepcopy(MASTER), "tfReplicaType": "WORKER"}
    assert TFJOB.validate(job(MASTER, worker, {"tfReplicaType": "PS", "replicas": 2})) == []


@pytest.mark.parametrize(
    ("the_job", "problem"),
    [
        ({"metadata": {}}, "spec: must be an object"),
        (job(), None),
        ({**job(), "spec": {"replicaSpecs": []}}, "spec.replicaSpecs: must be a non-empty list"),
        (
            job({"tfReplicaType": "PS"}),
            "spec.replicaSpecs: needs exactly one entry with tfReplicaType MASTER (found 0)",
        ),
        (job(MASTER, MASTER), "spec.replicaSpecs: MASTER appears more than once"),
        (with_master(replicas=2), "spec.replicaSpecs[0].replicas: must be 1 for MASTER"),
        (
            with_master(replicas=-1),
            "spec.replicaSpecs[0].replicas: must be an integer from 0 to 10000",
        ),
        (
            with_master(replicas=True),
            "spec.replicaSpecs[0].replicas: must be an integer from 0 to 10000",
        ),
        (
            with_master(tfPort=70000),
            "spec.replicaSpecs[0].tfPort: must be an integer from 1 to 65535",
        ),
        (
            with_master(tfReplicaType="CHIEF"),
            "spec.replicaSpecs[0].tfReplicaType: must be one of MASTER, WORKER, PS (got 'CHIEF')",
        ),
        (
            with_master(restartPolicy="Sometimes"),
            "spec.replicaSpecs[0].restartPolicy: must be one of"
            " ExitCode, OnFailure, Always, Never (got 'Sometimes')",
        ),
        (with_master(template=None), "spec.replicaSpecs[0].template: must be an object"),
        (
            with_master(template={"spec": {"containers": []}}),
            "spec.replicaSpecs[0].template.spec.containers: must be a non-empty list",
        ),
        (
            with_master(template={"spec": {"containers": [{"name": "main"}]}}),
            'spec.replicaSpecs[0].template.spec.containers: no container named "tensorflow"',
        ),
        (
            with_master(template={"spec": {"containers": [{"name": "tensorflow", "env": "X=1"}]}}),
            "spec.replicaSpecs[0].template.spec.containers[0].env: must be a list",
        ),
        (
            with_master(
                template={
                    "spec": {"containers": [{"name": "tensorflow", "resources": {"limits": []}}]}
                }
            ),
            "spec.replicaSpecs[0].template.spec.containers[0].resources.limits: must be an object",
        ),
        (
            with_master(
                template={"spec": {"containers": [{"name": "tensorflow"}, {"name": "tensorflow"}]}}
            ),
            "spec.replicaSpecs[0].template.spec.containers[1].name:"
            " 'tensorflow' is used by another container",
        ),
        (
            with_master(
                template={
                    "metadata": {"labels": {"a": 1}},
                    "spec": {"containers": [{"name": "tensorflow"}]},
                }
            ),
            "spec.replicaSpecs[0].template.metadata.labels: must map strings to strings",
        ),
        (
            job(MASTER, {"tfReplicaType": "PS", "template": {"spec": {"containers": []}}}),
            "spec.replicaSpecs[1].template.spec.containers: must be a non-empty list",
        ),
        (job(tfImage=""), "spec.tfImage: must be a non-empty string"),
        (
            job(tensorboard={"serviceType": "Ingress"}),
            "spec.tensorboard.logDir: must be a non-empty string",
        ),
        (
            job(tensorboard={"logDir": "/l", "serviceType": "Ingress"}),
            "spec.tensorboard.serviceType: must be one of ClusterIP, NodePort, LoadBalancer",
        ),
    ],
)
def test_problems(the_job: dict[str, Any], problem: str | None) -> None:
    problems = TFJOB.validate(the_job)
    if problem is None:
        assert problems == []
    else:
        assert problem in problems


def test_a_ps_may_omit_its_template() -> None:
    assert TFJOB.validate(job(MASTER, {"tfReplicaType": "PS", "replicas": 3})) == []


def test_metadata_problems() -> None:
    assert metadata_problems({"metadata": {"name": "j", "namespace": "", "uid": 5}}) == [
        "metadata.namespace: must be a non-empty string",
        "metadata.uid: must be a non-empty string",
    ]


def test_run_policy_problems() -> None:
    policy = {
        "cleanPodPolicy": "Some",
        "ttlSecondsAfterFinished": -1,
        "activeDeadlineSeconds": 0,
        "backoffLimit": "6",
        "suspend": "yes",
    }
    assert run_policy_problems({"spec": {"runPolicy": policy}}) == [
        "spec.runPolicy.cleanPodPolicy: must be one of Running, All, None (got 'Some')",
        "spec.runPolicy.ttlSecondsAfterFinished: must be an integer of at least 0",
        "spec.runPolicy.activeDeadlineSeconds: must be an integer of at least 1",
        "spec.runPolicy.backoffLimit: must be an integer of at least 0",
        "spec.runPolicy.suspend: must be true or false",
    ]
