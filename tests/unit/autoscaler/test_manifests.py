"""Reading the planner's cluster from API objects: as the scheduler counts
them, only active elastic PaddleJobs, and never an exception."""

from __future__ import annotations

import random
from typing import Any

from dlk8s.autoscaler.cluster import Node, Placement, Requirement, Toleration
from dlk8s.autoscaler.manifests import job_from_manifest, node_from_manifest, pod_from_manifest
from dlk8s.job.computeresources import Resources

from ..support.elastic import GI
from ..support.malformed import MANIFEST_JUNK, random_mutation


def test_api_objects_are_read_as_the_scheduler_counts_them() -> None:
    raw_pod = {
        "metadata": {
            "name": "j-trainer-3",
            "namespace": "ns",
            "labels": {"dlk8s.io/replica-type": "trainer", "dlk8s.io/replica-index": "3"},
            "ownerReferences": [{"uid": "u", "controller": True}],
        },
        "spec": {
            "nodeName": "n0",
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
        },
        "status": {"phase": "Running"},
    }
    parsed = pod_from_manifest(raw_pod)
    assert parsed is not None
    assert parsed.requests == Resources(3000, GI, 2)
    assert (parsed.owner_uid, parsed.role, parsed.index, parsed.node) == ("u", "trainer", 3, "n0")
    assert pod_from_manifest({**raw_pod, "status": {"phase": "Succeeded"}}) is None
    raw_node = {
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"}},
    }
    assert node_from_manifest(raw_node) == Node("n0", Resources(32000, 128 * GI, 4))


def paddlejob(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "PaddleJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "annotations": {}},
        "spec": {
            "faultTolerant": True,
            "trainer": {"minInstance": 2, "maxInstance": 6, "resources": {"requests": {"cpu": 1}}},
            **spec,
        },
        "status": {"state": "Running", "phase": "Running"},
    }


def test_only_active_elastic_paddlejobs_are_scaled() -> None:
    found = job_from_manifest(paddlejob())
    assert found is not None
    assert (found.min, found.max, found.trainers, found.trainer) == (2, 6, 2, Resources(1000))
    fixed = paddlejob(trainer={"minInstance": 2, "maxInstance": 2})
    assert job_from_manifest(fixed) is None
    assert job_from_manifest({**paddlejob(), "status": {"state": "Succeeded"}}) is None
    assert job_from_manifest({**paddlejob(), "kind": "TFJob"}) is None


def test_only_the_jobs_dlk8s_runs_here_are_scaled() -> None:
    """spec.managedBy (docs/multicluster.md): MultiKueue's jobs on a manager
    run on a worker, another controller's are its own."""
    for managed_by in ("", "dlk8s.io/operator"):
        job = paddlejob()
        job["spec"]["managedBy"] = managed_by
        assert job_from_manifest(job) is not None, managed_by
    for managed_by in ("kueue.x-k8s.io/multikueue", "example.com/other"):
        job = paddlejob()
        job["spec"]["managedBy"] = managed_by
        assert job_from_manifest(job) is None, managed_by


def test_a_job_whose_trainers_have_begun_to_exit_0_is_left_alone() -> None:
    # Its master's task queue is empty: growing it adds trainers with nothing
    # to do, shrinking it cuts short trainers finishing their last task, and
    # its finished trainers are not trainers waiting for room.
    def with_trainers(states: dict[str, int]) -> dict[str, Any]:
        job = paddlejob()
        job["status"]["replicaStatuses"] = [
            {"replicaType": "PSERVER", "replicasStates": {"Succeeded": 1}},
            {"replicaType": "TRAINER", "replicasStates": states},
        ]
        return job

    assert job_from_manifest(with_trainers({"Running": 2})) is not None
    assert job_from_manifest(with_trainers({"Running": 1, "Succeeded": 1})) is None


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
                    ],
                },
                {"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]},
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
        ],
    }
}
PLACED = {"nodeSelector": {"pool": "gpu"}, "tolerations": [GPU_TOLERATION], "affinity": AFFINITY}
EXPECTED = Placement(
    {"pool": "gpu"},
    (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),),
    (
        (
            Requirement("gpu", "In", ("a100",)),
            Requirement("metadata.name", "NotIn", ("n9",), field=True),
        ),
        (Requirement("spot", "DoesNotExist", ()),),
    ),
)


def templated_paddlejob() -> dict[str, Any]:
    """A job whose trainer template places its trainers and adds a sidecar."""
    sidecar = {"name": "logs", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}
    job = paddlejob()
    job["spec"]["trainer"]["template"] = {"spec": {**PLACED, "containers": [sidecar]}}
    job["spec"]["pserver"] = {"template": {"spec": {"nodeSelector": {"pool": "cpu"}}}}
    return job


def test_a_trainer_templates_placement_and_sidecars_count() -> None:
    found = job_from_manifest(templated_paddlejob())
    assert found is not None
    assert found.placement == EXPECTED  # the trainer's, not the pserver's
    assert found.trainer == Resources(1250, 64 * 2**20)
    plain = job_from_manifest(paddlejob())
    assert plain is not None
    assert plain.placement == Placement()


def test_a_pods_required_node_affinity_is_read_and_its_preferences_left_out() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": PLACED, "status": {}}
    parsed = pod_from_manifest(pod)
    assert parsed is not None
    assert parsed.placement == EXPECTED


def test_malformed_objects_never_raise() -> None:
    rng = random.Random(3)
    bases = [
        paddlejob(),
        templated_paddlejob(),
        {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k"}]}},
        {"metadata": {"name": "p"}, "spec": PLACED},
    ]
    for _ in range(2000):
        junk = random_mutation(rng.choice(bases), rng)
        elastic = job_from_manifest(junk)
        if elastic is not None:  # whatever it read, it is something to plan with
            assert 0 <= elastic.min <= elastic.trainers <= elastic.max
            assert elastic.min < elastic.max
            assert min(elastic.trainer.cpu, elastic.trainer.memory, elastic.trainer.gpu) >= 0
        node_from_manifest(junk)
        pod_from_manifest(junk)
    for junk in MANIFEST_JUNK:
        assert job_from_manifest(junk) is None
        assert node_from_manifest(junk) is None
        assert pod_from_manifest(junk) is None
