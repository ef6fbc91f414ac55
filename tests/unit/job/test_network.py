"""Each job's NetworkPolicy (job.network), as docs/security.md describes it:
with --network-policies a job's pods take connections from its own pods
only, TensorBoard's from its namespace (from anyone behind a
LoadBalancer); without the flag no policy is made."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..support.worlds import CONFIG, World, tfjob

ON = replace(CONFIG, network_policies=True)
BOARD = {"logDir": "/logs"}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def policy(world: World, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = world.children[("NetworkPolicy", name)]["spec"]
    return spec


def test_a_jobs_pods_take_connections_from_its_own_pods_only() -> None:
    world = World(tfjob(), config=ON)
    world.settle()
    assert world.names("NetworkPolicy") == ["example-job-network"]
    spec = policy(world, "example-job-network")
    assert spec["policyTypes"] == ["Ingress"]  # a job still reaches its data and the API
    [rule] = spec["ingress"]
    [peer] = rule["from"]
    assert "ports" not in rule  # every port, to the job's own pods
    assert peer == {"podSelector": spec["podSelector"]}
    pods = [world.pod(n)["metadata"]["labels"] for n in world.pods()]
    assert len(pods) == 4
    assert all(selects(spec["podSelector"], labels) for labels in pods)
    # Another job of that name (recreated) has another runtime id.
    other = World(tfjob(), config=ON)
    other.job["metadata"]["uid"] = "another-uid"
    other.settle()
    theirs = policy(other, "example-job-network")["podSelector"]
    assert not any(selects(theirs, labels) for labels in pods)


def test_the_policy_is_owned_by_the_job_and_made_again_when_deleted() -> None:
    world = World(tfjob(), config=ON)
    world.settle()
    owner = world.children[("NetworkPolicy", "example-job-network")]["metadata"]
    [ref] = owner["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("TFJob", "example-job", True)
    del world.children[("NetworkPolicy", "example-job-network")]
    world.settle()
    assert world.names("NetworkPolicy") == ["example-job-network"]


def test_tensorboard_answers_its_namespace_or_behind_a_load_balancer_anyone() -> None:
    world = World(tfjob(tensorboard=BOARD), config=ON)
    world.settle()
    board = policy(world, "example-job-tensorboard")
    template = world.children[("Deployment", "example-job-tensorboard")]["spec"]["template"]
    assert selects(board["podSelector"], template["metadata"]["labels"])
    assert not selects(
        policy(world, "example-job-network")["podSelector"], template["metadata"]["labels"]
    )
    assert board["ingress"] == [
        {"from": [{"podSelector": {}}], "ports": [{"protocol": "TCP", "port": 6006}]}
    ]
    allowed = replace(ON, tensorboard_service_types=("ClusterIP", "LoadBalancer"))
    public = World(tfjob(tensorboard={**BOARD, "serviceType": "LoadBalancer"}), config=allowed)
    public.settle()
    [rule] = policy(public, "example-job-tensorboard")["ingress"]
    assert {"ipBlock": {"cidr": "0.0.0.0/0"}} in rule["from"]


def test_no_policy_without_the_flag() -> None:
    world = World(tfjob(tensorboard=BOARD))
    world.settle()
    assert world.names("NetworkPolicy") == []
