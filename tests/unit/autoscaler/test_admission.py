"""Admission before growth: who gets room, who is passed over, and what
holds growth back.

Three rules, one test each at least: a pending job that can be made to fit
is admitted before anything grows; room is taken from the most fulfilled
job first, never below its minimum; a job that cannot fit even after every
shrink is passed over without holding back the ones behind it.
"""

from __future__ import annotations

import dataclasses

import pytest

from dlk8s.autoscaler.plan import plan

from ..support.elastic import job, newcomer, node, pod, res, targets, trainer_pods


def test_nothing_grows_while_an_admitted_job_waits_for_its_pods_to_be_bound() -> None:
    # The newcomer fits the free room; a could grow into the rest. A new
    # trainer would be tried by kube-scheduler at once while the newcomer's
    # pods wait out their backoff, and could take the node meant for them.
    a = job("a", 1, 8, 1, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0") + newcomer("new", gpu=2)
    result = plan([node("n0", gpu=8)], pods, [a])
    assert result.changes == ()
    assert result.unplaceable == ()
    # Once the newcomer is bound, growth resumes.
    bound = [dataclasses.replace(p, node="n0") if p.owner_uid == "new" else p for p in pods]
    assert targets(plan([node("n0", gpu=8)], bound, [a])) == {"a": 6}


@pytest.mark.parametrize("created", [True, False], ids=["pod-pending", "pod-not-created"])
def test_a_newcomer_goes_before_growth_that_has_no_node_yet(created: bool) -> None:
    # g grew to 2 on an earlier pass; its trainer 1 has no node yet. b is at
    # its max. One GPU is free: it goes to the newcomer, g's growth is given
    # back, and b keeps its running trainer.
    g = job("g", 1, 8, 2, res(1, 1, gpu=1), created="2026-01-01T00:00:00Z")
    b = job("b", 1, 2, 2, res(1, 1, gpu=1))
    pods = trainer_pods(g, "n0") + trainer_pods(b, "n0", "n0")
    if created:
        pods += [
            dataclasses.replace(trainer_pods(g, "", start=1)[0], created="2026-01-01T00:30:00Z")
        ]
    pods += newcomer("new", gpu=1)
    result = plan([node("n0", gpu=4)], pods, [g, b])
    assert targets(result) == {"g": 1}
    assert "trainer 1" in result.changes[0].reason


def test_a_job_whose_pods_are_not_created_yet_is_admitted_by_shrinking() -> None:
    # n is new: it asks for its minimum of two 2-GPU trainers, which the
    # operator has not created yet. a (at its max) gives back two trainers.
    a = job("a", 1, 4, 4, res(1, 1, gpu=1))
    n = job("n", 2, 4, 2, res(1, 1, gpu=2), running=False)
    result = plan([node("n0", gpu=4), node("n1", gpu=4)], trainer_pods(a, *["n0"] * 4), [a, n])
    assert targets(result) == {}
    full = trainer_pods(a, "n0", "n0", "n1", "n1")
    nodes = [node("n0", gpu=4), node("n1", gpu=4)]
    result = plan(nodes, [*full, pod("x", "n1", res(gpu=2))], [a, n])
    assert targets(result) == {"a": 2}
    assert "ns/n" in result.changes[0].reason


def test_the_most_fulfilled_job_gives_first_even_while_it_applies_its_last_change() -> None:
    # a (2 of 3 extra trainers: 0.67) is still deleting trainer 3, whose
    # room already counts as free; b has 1 of 3 (0.33). The newcomer needs
    # one GPU more than is free: a gives it, not b.
    a = job("a", 1, 4, 3, res(1, 1, gpu=1))
    b = job("b", 1, 4, 2, res(1, 1, gpu=1))
    pods = trainer_pods(a, *["n0"] * 4) + trainer_pods(b, "n0", "n0")
    pods[3] = dataclasses.replace(pods[3], terminating=True)
    result = plan([node("n0", gpu=6)], pods + newcomer("new", gpu=2), [a, b])
    assert targets(result) == {"a": 2}


def test_room_is_taken_most_fulfilled_first_and_never_below_the_minimum() -> None:
    # Three GPUs needed on one node, none free. Fulfillment: a 1.0, b 0.5,
    # c 0.0 (at its min). a gives back both extra trainers, b one; c nothing.
    a = job("a", 1, 3, 3, res(1, 1, gpu=1))
    b = job("b", 1, 3, 2, res(1, 1, gpu=1))
    c = job("c", 3, 6, 3, res(1, 1, gpu=1))
    pods = (
        trainer_pods(a, *["n0"] * 3) + trainer_pods(b, *["n0"] * 2) + trainer_pods(c, *["n0"] * 3)
    )
    big = node("n0", cpu=64, gpu=8)
    result = plan([big], pods + newcomer("new", gpu=3), [a, b, c])
    assert targets(result) == {"a": 1, "b": 1}
    # Asking more than all the extra trainers free: nothing is shrunk.
    result = plan([big], pods + newcomer("new", gpu=5), [a, b, c])
    assert result.changes == ()
    assert len(result.unplaceable) == 1


def test_a_job_that_cannot_fit_even_after_every_shrink_does_not_block_the_ones_behind_it() -> None:
    # The oldest pending job needs 4 GPUs on one node; a can free 3 at most.
    # Nothing shrinks for it; the younger 1-GPU job behind it gets a trainer of a.
    a = job("a", 1, 4, 4, res(1, 1, gpu=1))
    pods = trainer_pods(a, *["n0"] * 4)
    pods += newcomer("big", gpu=4, created="2026-01-01T00:00:00Z")
    pods += newcomer("small", gpu=1, created="2026-01-01T00:05:00Z")
    result = plan([node("n0", gpu=4)], pods, [a])
    assert targets(result) == {"a": 3}
    assert [u.split(" ")[0] for u in result.unplaceable] == ["ns/big-trainer-0"]


def test_a_job_that_cannot_fit_does_not_hold_growth_back() -> None:
    a = job("a", 1, 4, 1, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0") + newcomer("huge", gpu=16)
    result = plan([node("n0", gpu=8)], pods, [a])
    assert targets(result) == {"a": 4}
    assert len(result.unplaceable) == 1


def test_room_a_passed_over_job_can_use_now_is_not_grown_into() -> None:
    # big needs three 4-GPU trainers; 7 GPUs are free: it cannot start
    # whole, but one of its trainers fits. Growth would fill that hole with a's
    # small trainers and big would never get a foothold: the hole is kept.
    a = job("a", 1, 8, 1, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0") + newcomer("big", gpu=4, count=3)
    nodes = [node("n0", cpu=32, gpu=8)]
    result = plan(nodes, pods, [a])
    assert result.changes == ()
    assert len(result.unplaceable) == 1
    assert result.free_after["n0"].gpu == 3
    # Once it is bound, the rest of big fits nowhere and a grows into the rest.
    pods[1] = dataclasses.replace(pods[1], node="n0")
    assert targets(plan(nodes, pods, [a])) == {"a": 4}


def test_the_oldest_admissible_job_is_admitted_first() -> None:
    # Room for one of two newcomers, made by shrinking a: the older gets it.
    a = job("a", 1, 3, 3, res(1, 1, gpu=1))
    pods = [*trainer_pods(a, "n0", "n0", "n0"), pod("other", "n0", res(gpu=1))]
    pods += newcomer("young", gpu=2, created="2026-01-01T00:05:00Z")
    pods += newcomer("old", gpu=2, created="2026-01-01T00:00:00Z")
    result = plan([node("n0", gpu=4)], pods, [a])
    assert targets(result) == {"a": 1}
    assert "ns/old" in result.changes[0].reason
    assert [u.split(" ")[0] for u in result.unplaceable] == ["ns/young-trainer-0"]
