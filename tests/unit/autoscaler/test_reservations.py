"""A job that has waited too long: the nodes kept for it, and the room
the most fulfilled jobs give back to it."""

from __future__ import annotations

import dataclasses
from typing import Any

from dlk8s.autoscaler.cluster import Pod
from dlk8s.autoscaler.plan import plan

from ..support.elastic import job, newcomer, node, pod, res, targets, trainer_pods

T0 = "2026-01-01T00:00:00Z"
EPOCH_T0 = 1767225600.0  # T0 in epoch seconds


def waiting(name: str, gpu: int, count: int = 1, created: str = T0, **kw: Any) -> list[Pod]:
    return [dataclasses.replace(p, **kw) for p in newcomer(name, gpu, created, count)]


def test_a_job_waiting_too_long_has_the_closest_node_kept_from_newcomers() -> None:
    # big needs a 4-GPU node; n0 lacks 3 GPUs for it, n1 lacks 2. The gated
    # newcomer small fits only n1's hole; e may grow into both.
    e = job("e", 1, 8, 1, res(1, 1, gpu=1))
    small = job("small", 1, 3, 1, res(1, 1, gpu=2), running=False, admitted=False,
                created="2026-01-01T00:05:00Z")  # fmt: skip
    pods = [pod("x0", "n0", res(gpu=2)), pod("x1", "n1", res(gpu=2)), *trainer_pods(e, "n0")]
    pods += waiting("big", gpu=4) + waiting("small", gpu=2, created=small.created, gated=True)
    nodes = [node("n0", gpu=4), node("n1", gpu=4)]
    # Before it has waited reserve_after, the newcomer is admitted into n1.
    early = plan(nodes, pods, [e, small], now=EPOCH_T0 + 500, reserve_after=600)
    assert (targets(early), early.kept) == ({"small": 1}, {})
    assert early.changes[0].reason.startswith("admitted at 1 trainers")
    late = plan(nodes, pods, [e, small], now=EPOCH_T0 + 700, reserve_after=600)
    assert late.kept == {"ns/big": ("n1",)}
    # small stays gated; growth borrows the kept room (given back on demand).
    assert targets(late) == {"e": 4}


def test_a_longer_wait_keeps_one_more_node_per_period_up_to_one_per_trainer() -> None:
    nodes = [node(f"n{i}", gpu=4) for i in range(4)]
    pods = [pod(f"x{i}", f"n{i}", res(gpu=1 + i % 3)) for i in range(4)]  # n0, n3 closest
    pods += waiting("big", gpu=4, count=2)
    kept = {
        wait: plan(nodes, pods, [], now=EPOCH_T0 + wait, reserve_after=600).kept.get("ns/big")
        for wait in (599, 600, 1200, 3000)
    }
    assert kept == {599: None, 600: ("n0",), 1200: ("n0", "n3"), 3000: ("n0", "n3")}


def test_starving_jobs_keep_nodes_oldest_first_each_its_own() -> None:
    # n0 lacks 1 GPU of a 4-GPU trainer, n1 2, n2 3: the older job keeps n0.
    nodes = [node(f"n{i}", gpu=4) for i in range(3)]
    pods = [pod(f"x{i}", f"n{i}", res(gpu=1 + i)) for i in range(3)]
    pods += waiting("young", gpu=4, created="2026-01-01T00:01:00Z") + waiting("old", gpu=4)
    result = plan(nodes, pods, [], now=EPOCH_T0 + 700, reserve_after=600)
    assert result.kept == {"ns/old": ("n0",), "ns/young": ("n1",)}


def test_the_node_kept_is_the_closest_with_growth_given_back() -> None:
    # n0 has 1 GPU free; n1 none, but e's two trainers there above its
    # minimum (growth that borrowed the room) would give back 2: n1 is
    # closer, and stays kept as growth comes and goes, where free room alone
    # would move the kept node to wherever a job ended last.
    e = job("e", 1, 4, 4, res(1, 1, gpu=1))
    pods = [
        pod("x0", "n0", res(gpu=3)),
        pod("x1", "n1", res(gpu=1)),
        pod("x2", "n2", res(gpu=3)),
        *trainer_pods(e, "n1", "n1", "n1", "n2"),
        *waiting("big", gpu=4),
    ]
    nodes = [node(f"n{i}", gpu=4) for i in range(3)]
    result = plan(nodes, pods, [e], now=EPOCH_T0 + 700, reserve_after=600)
    assert result.kept == {"ns/big": ("n1",)}


def test_a_job_no_node_can_hold_keeps_nothing_and_gates_nobody() -> None:
    # Keeping nodes for it would idle them and gate every newcomer for ever.
    a = job("a", 1, 4, 1, res(1, 1, gpu=1))
    pods = [*trainer_pods(a, "n0"), *waiting("huge", gpu=16)]
    result = plan([node("n0", gpu=8)], pods, [a], now=EPOCH_T0 + 7000, reserve_after=600)
    assert (result.kept, targets(result)) == ({}, {"a": 4})
    assert len(result.unplaceable) == 1


def test_a_starving_jobs_trainers_take_room_from_the_most_fulfilled_one_by_one() -> None:
    # big's two 4-GPU trainers never fit together (n1 is full for good), so
    # it is passed over and nothing shrinks for it; once it has waited too
    # long, a (fully grown) gives back trainers down to 1 for one of them.
    a = job("a", 1, 5, 5, res(1, 1, gpu=1))
    pods = [*trainer_pods(a, *["n0"] * 5), pod("x", "n1", res(gpu=4)), *waiting("big", 4, 2)]
    nodes = [node("n0", gpu=5), node("n1", gpu=4)]
    assert plan(nodes, pods, [a], now=EPOCH_T0 + 60, reserve_after=600).changes == ()
    result = plan(nodes, pods, [a], now=EPOCH_T0 + 600, reserve_after=600)
    assert targets(result) == {"a": 1}
    assert result.kept == {"ns/big": ("n0",)}  # for its other trainer


def test_a_running_jobs_missing_trainer_makes_nobody_shrink() -> None:
    # a's trainer 0 exited 0 and left the pod list before a's status said so.
    # It is not a trainer waiting for room: b keeps its extra trainers.
    a = job("a", 2, 4, 2, res(1, 1, gpu=1))
    b = job("b", 1, 4, 3, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0", start=1) + trainer_pods(b, "n0", "n0", "n0")
    assert plan([node("n0", gpu=4)], pods, [a, b]).changes == ()


def test_a_younger_gated_job_that_starves_too_waits_behind_its_gate() -> None:
    # hog fills n0 and 3 of n1's 4 GPUs: big (4 GPUs) has n1 kept. small's
    # gated trainer fits only n1's free GPU; once small too has waited
    # reserve_after, lifting its gate would let kube-scheduler bind it there.
    nodes = [node("n0", gpu=4), node("n1", gpu=4)]
    pods = [pod(f"hog-{i}", "n0" if i < 4 else "n1", res(gpu=1)) for i in range(7)]
    small = job("small", 1, 2, 1, res(1, 1, gpu=1), running=False, admitted=False,
                created="2026-01-01T00:05:00Z")  # fmt: skip
    pods += waiting("big", gpu=4) + waiting("small", gpu=1, created=small.created, gated=True)
    for wait in (400, 700, 3000):  # small waited 100, 400 and 2,700 s; reserve_after 300
        result = plan(nodes, pods, [small], now=EPOCH_T0 + wait, reserve_after=300)
        assert result.kept["ns/big"] == ("n1",), wait
        assert targets(result) == {}, wait
    # A GPU free off the node kept for big: small goes, though big still starves.
    pods = [p for p in pods if p.name != "hog-0"]
    result = plan(nodes, pods, [small], now=EPOCH_T0 + 700, reserve_after=300)
    assert targets(result) == {"small": 1}
    assert len(result.kept["ns/big"]) == 1
