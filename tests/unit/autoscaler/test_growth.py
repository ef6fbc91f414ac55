"""The autoscaler's growth: per-node fit, fulfillment order, the max-load
bound, and jobs that may not grow yet."""

from __future__ import annotations

import dataclasses

import pytest

from dlk8s.autoscaler.plan import plan
from dlk8s.job.computeresources import Resources

from ..support.elastic import job, node, pod, res, targets, trainer_pods


def test_a_lone_job_grows_to_its_max_when_there_is_room() -> None:
    a = job("a", 1, 4, 1, res(1, 1, gpu=1))
    result = plan([node("n0", gpu=8)], trainer_pods(a, "n0"), [a])
    assert targets(result) == {"a": 4}


def test_the_least_fulfilled_job_grows_first() -> None:
    # Room for exactly one more 1-GPU trainer: a (0 of 3 extra) gets it, not b (2 of 4).
    a = job("a", 1, 4, 1, res(1, 1, gpu=1))
    b = job("b", 2, 6, 4, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0") + trainer_pods(b, "n0", "n0", "n0", "n0")
    result = plan([node("n0", gpu=6)], pods, [a, b])
    assert targets(result) == {"a": 2}


def test_growth_alternates_by_fulfillment() -> None:
    # Four GPUs free: a and b have the same range; each gets two.
    a = job("a", 1, 5, 1, res(1, 1, gpu=1), created="2026-01-01T00:00:00Z")
    b = job("b", 1, 5, 1, res(1, 1, gpu=1), created="2026-01-01T00:00:01Z")
    pods = trainer_pods(a, "n0") + trainer_pods(b, "n0")
    result = plan([node("n0", gpu=6)], pods, [a, b])
    assert targets(result) == {"a": 3, "b": 3}


def test_fit_is_checked_per_node_not_on_totals() -> None:
    # Two GPUs free in total, but one per node: a 2-GPU trainer fits nowhere.
    a = job("a", 1, 3, 1, res(1, 1, gpu=2))
    pods = [*trainer_pods(a, "n0"), pod("other", "n1", res(1, 1, gpu=3))]
    result = plan([node("n0", gpu=3), node("n1", gpu=4)], pods, [a])
    assert result.changes == ()
    # ...and with one node that has the room, it grows.
    result = plan([node("n0", gpu=3), node("n1", gpu=4)], pods[:1], [a])
    assert targets(result) == {"a": 3}


@pytest.mark.parametrize(
    ("resource", "trainer"), [("cpu", res(cpu=4)), ("memory", res(memory_gi=16))]
)
def test_growth_keeps_cpu_and_memory_under_the_max_load(resource: str, trainer: Resources) -> None:
    # 90% requested; each trainer adds 4%: 94% and 98% would both fit the
    # node, but 98% is over the 97% bound.
    big = node("n0", cpu=100, memory_gi=400, gpu=0)
    a = job("a", 1, 10, 1, trainer)
    filler = res(cpu=86) if resource == "cpu" else res(memory_gi=344)
    pods = [*trainer_pods(a, "n0"), pod("other", "n0", filler)]
    assert targets(plan([big], pods, [a], max_load=0.97)) == {"a": 2}
    assert targets(plan([big], pods, [a], max_load=1.0)) == {"a": 3}


def test_gpus_may_fill_completely() -> None:
    a = job("a", 1, 8, 1, res(0.1, 0.1, gpu=1))
    result = plan([node("n0", gpu=8)], trainer_pods(a, "n0"), [a])
    assert targets(result) == {"a": 8}
    assert result.free_after["n0"].gpu == 0


def test_a_job_that_is_not_running_yet_does_not_grow() -> None:
    a = job("a", 1, 4, 1, res(1, 1, gpu=1), running=False)
    assert plan([node("n0")], trainer_pods(a, "n0"), [a]).changes == ()


def test_a_job_in_the_middle_of_a_change_is_left_alone() -> None:
    # a asks for 3 trainers but only 2 exist yet: their room is kept, no more.
    a = job("a", 1, 8, 3, res(1, 1, gpu=1))
    result = plan([node("n0", gpu=8)], trainer_pods(a, "n0", "n0"), [a])
    assert result.changes == ()
    assert result.free_after["n0"].gpu == 5
    # A trainer still terminating (scaled down) freezes it as well.
    down = job("d", 1, 8, 1, res(1, 1, gpu=1))
    pods = trainer_pods(down, "n0") + trainer_pods(down, "n0", start=1)
    pods[1] = dataclasses.replace(pods[1], terminating=True)
    assert plan([node("n0", gpu=8)], pods, [down]).changes == ()
