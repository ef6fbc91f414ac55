"""reconcile never fails on input and never builds from an unusable spec.

Property-style: every field of a rich valid job (and of its status and
observed pods) is in turn replaced by malformed values or removed, and each
result must be coherent: no internal error, a status of the documented shape,
and either a job that is still usable or one failed as InvalidSpec that
creates nothing.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from dlk8s.job.actions import Event
from dlk8s.job.reconcile import Observed, reconcile
from dlk8s.runtime.executor import controlled_by

from ..support.malformed import (
    CONFIG,
    JUNK,
    NOW,
    check,
    check_every_mutation,
    check_every_running_mutation,
    mutations,
    rich_job,
    running,
)


def test_every_malformed_field_of_a_new_job() -> None:
    assert check_every_mutation(rich_job(), CONFIG, NOW) > 500


def test_every_malformed_field_of_a_running_job() -> None:
    check_every_running_mutation(*running(rich_job()), CONFIG, NOW)


def test_every_malformed_field_of_a_previous_status() -> None:
    job, observed = running(rich_job())
    for status in mutations(job["status"]):
        check(reconcile(job | {"status": status}, observed, CONFIG, NOW), job)


def test_every_malformed_field_of_an_observed_pod() -> None:
    job, observed = running(rich_job())
    checked = 0
    for pod in mutations(observed.pods[0]):
        # Observed holds only children the job controls (the runtime's index
        # files them by their controller's uid): a pod mutated out of that
        # never reaches reconcile.
        pods = [p for p in (pod, *observed.pods[1:]) if controlled_by(p, job["metadata"]["uid"])]
        check(
            reconcile(job, Observed(pods, observed.services, observed.configmaps), CONFIG, NOW), job
        )
        checked += len(pods) > len(observed.pods) - 1
    assert checked > 800


@pytest.mark.parametrize("value", [*JUNK, "<remove>"])
def test_the_job_itself_or_its_sections_replaced(value: Any) -> None:
    for section in ("metadata", "spec", "status", "kind"):
        job = rich_job()
        if value == "<remove>":
            job.pop(section, None)
        else:
            job[section] = value
        check(reconcile(job, Observed(), CONFIG, NOW), job)
    check(reconcile(value, Observed(), CONFIG, NOW), None)  # type: ignore[arg-type]


def random_tree(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(JUNK)
    if rng.random() < 0.5:
        return [random_tree(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    keys = [
        "replicaSpecs",
        "tfReplicaType",
        "replicas",
        "template",
        "spec",
        "containers",
        "name",
        "x",
    ]
    return {rng.choice(keys): random_tree(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def test_random_specs() -> None:
    rng = random.Random(20260301)
    for _ in range(300):
        job = rich_job()
        job["spec"] = random_tree(rng, 5)
        check(reconcile(job, Observed(), CONFIG, NOW), job)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"].pop("containers"),
            "containers",
        ),
        (lambda j: j["spec"]["replicaSpecs"].append({"tfReplicaType": "EVALUATOR"}), "EVALUATOR"),
        (lambda j: j.update(kind="MPIJob"), "kind: 'MPIJob'"),
        (lambda j: j["metadata"].pop("uid"), "metadata.uid"),
    ],
)
def test_invalid_spec_names_the_problem(change: Any, message: str) -> None:
    job = rich_job()
    change(job)
    result = reconcile(job, Observed(), CONFIG, NOW)
    assert result.status["reason"] == "InvalidSpec"
    [event] = [a for a in result.actions if isinstance(a, Event)]
    assert event.type == "Warning"
    assert message in event.message
    assert (
        message in next(c for c in result.status["conditions"] if c["type"] == "Failed")["message"]
    )
