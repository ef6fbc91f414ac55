"""The echo of a job's own creates runs no pass (job.urgency's NONE): for
every example job of every kind, the pass that follows its first one, once
the caches show what the first created, does nothing and writes nothing.
(A pod created behind the operator's admission gate runs that pass: a
later pass lifts the gate; tests/unit/runtime/test_urgency.py.)"""

from __future__ import annotations

import pytest

from dlk8s.job.kinds.elastic import is_admission_gate

from ..support.seeds import KWOK, kwok_job
from ..support.worlds import World

EXAMPLES = sorted(p.name for p in KWOK.glob("*.yaml"))


def gated(world: World) -> bool:
    return any(
        is_admission_gate(gate)
        for name in world.pods()
        for gate in world.pod(name).get("spec", {}).get("schedulingGates", [])
    )


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_pass_after_the_echo_of_the_first_creates_does_nothing(example: str) -> None:
    world = World(kwok_job(example, namespace="ns", uid="u-1"))
    first = world.step()
    assert world.pods(), "the first pass creates the job's pods"
    assert not gated(world)
    second = world.reconcile()
    assert second.actions == []
    assert second.status == first.status
