"""The autoscaler's planning: per-node fit, fulfillment order, the max-load
bound, pending jobs, bounds, and what it must never touch."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from dlk8s.autoscaler.plan import (
    ElasticJob,
    Node,
    Pod,
    Taint,
    Toleration,
    job_from_manifest,
    node_from_manifest,
    plan,
    pod_from_manifest,
)
from dlk8s.job.resources import Resources

GI = 2**30


def node(name: str, cpu: float = 8, memory_gi: int = 32, gpu: int = 4, **kw: Any) -> Node:
    return Node(name, Resources(int(cpu * 1000), memory_gi * GI, gpu), **kw)


def res(cpu: float = 0, memory_gi: float = 0, gpu: int = 0) -> Resources:
    return Resources(int(cpu * 1000), int(memory_gi * GI), gpu)


def job(uid: str, low: int, high: int, trainers: int, trainer: Resources, **kw: Any) -> ElasticJob:
    kw.setdefault("running", True)
    return ElasticJob(uid, f"ns/{uid}", low, high, trainers, trainer, **kw)


def trainer_pods(j: ElasticJob, *nodes: str, start: int = 0) -> list[Pod]:
    """Trainers start..start+len(nodes)-1 of `j`, bound to these nodes ("" = pending)."""
    return [
        Pod("ns", f"{j.uid}-trainer-{i}", n, j.trainer, owner_uid=j.uid, role="trainer", index=i)
        for i, n in enumerate(nodes, start=start)
    ]


def pod(name: str, node_name: str, requests: Resources, **kw: Any) -> Pod:
    return Pod("ns", name, node_name, requests, **kw)


def targets(result: Any) -> dict[str, int]:
    return {c.uid: c.new for c in result.changes}


# --- growth ----------------------------------------------------------------------


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


# --- shrinking ----------------------------------------------------------------------


def test_over_the_bound_the_most_fulfilled_job_shrinks_first() -> None:
    a = job("a", 1, 4, 4, res(cpu=10))  # fulfillment 1.0
    b = job("b", 1, 5, 3, res(cpu=10))  # fulfillment 0.5
    pods = trainer_pods(a, *["n0"] * 4) + trainer_pods(b, *["n0"] * 3)
    # 70 + 28 = 98 of 100 cores requested: one trainer must go, and it is a's.
    pods.append(pod("other", "n0", res(cpu=28)))
    result = plan([node("n0", cpu=100, memory_gi=100, gpu=0)], pods, [a, b])
    assert targets(result) == {"a": 3}
    assert "max load" in result.changes[0].reason


def test_a_pending_job_makes_the_most_fulfilled_job_shrink() -> None:
    a = job("a", 1, 4, 4, res(1, 1, gpu=1))  # fulfillment 1.0
    b = job("b", 1, 5, 3, res(1, 1, gpu=1))  # fulfillment 0.5
    pods = trainer_pods(a, "n0", "n0", "n0", "n1") + trainer_pods(b, "n0", "n1", "n1")
    # The newcomer needs two GPUs on one node; n1 has one free.
    pods.append(pod("new-trainer-0", "", res(1, 1, gpu=2), owner_uid="new", created="z"))
    result = plan([node("n0", gpu=4), node("n1", gpu=4)], pods, [a, b])
    # a's highest trainer (on n1) goes: enough, so b keeps all of its own.
    assert targets(result) == {"a": 3}
    assert "new" in result.changes[0].reason
    assert result.unplaceable == ()


def test_shrinking_for_a_pending_job_takes_only_what_it_needs() -> None:
    # n0: a0 a1 a2 b0 (full); n1: b1 b2 b3 (one GPU free). The newcomer needs
    # two GPUs on one node. a is the most fulfilled, but freeing a2 (on n0)
    # alone does not help; b3 (on n1) does, and then a2 is not needed at all.
    a = job("a", 1, 3, 3, res(1, 1, gpu=1))  # fulfillment 1.0
    b = job("b", 1, 5, 4, res(1, 1, gpu=1))  # fulfillment 0.75
    pods = trainer_pods(a, "n0", "n0", "n0") + trainer_pods(b, "n0", "n1", "n1", "n1")
    pods.append(pod("new-trainer-0", "", res(1, 1, gpu=2), owner_uid="new"))
    result = plan([node("n0", gpu=4), node("n1", gpu=4)], pods, [a, b])
    assert targets(result) == {"b": 3}


def test_a_job_shrunk_twice_for_room_keeps_its_lower_step_when_the_higher_is_needed() -> None:
    # Donors in turn: z (1.0), b (0.67), z again (0.5, ties broken by key).
    # The newcomer needs two GPUs on one node: only z's trainer 1 (on n1)
    # gives them. z's trainer 2 (on n2) cannot come back while trainer 1 is
    # gone, since a job gives up its highest trainers: z goes to 1, not 2.
    z = job("z", 1, 3, 3, res(1, 1, gpu=1))
    b = job("b", 1, 7, 5, res(1, 1, gpu=1))
    pods = trainer_pods(z, "n0", "n1", "n2") + trainer_pods(b, "n0", "n0", "n0", "n3", "n3")
    pods += [
        pod("fill-1", "n1", res(gpu=2)),
        pod("fill-2", "n2", res(gpu=3)),
        pod("fill-3", "n3", res(gpu=2)),
        pod("new-0", "", res(1, 1, gpu=2), owner_uid="new", created="z"),
    ]
    result = plan([node(f"n{i}", gpu=4) for i in range(4)], pods, [z, b])
    assert targets(result)["z"] == 1
    assert result.unplaceable == ()


def test_a_pending_job_that_cannot_fit_anyway_shrinks_nothing() -> None:
    a = job("a", 1, 4, 4, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0", "n0", "n0", "n0")
    pods.append(pod("huge", "", res(1, 1, gpu=16), owner_uid="huge"))
    result = plan([node("n0", gpu=4)], pods, [a])
    assert result.changes == ()
    assert len(result.unplaceable) == 1


def test_pending_pods_keep_their_room_from_growth() -> None:
    a = job("a", 1, 8, 1, res(1, 1, gpu=1))
    pods = [*trainer_pods(a, "n0"), pod("waiting", "", res(1, 1, gpu=2), owner_uid="w")]
    result = plan([node("n0", gpu=8)], pods, [a])
    assert targets(result) == {"a": 6}  # 8 - 1 - 2 reserved = 5 more


def test_room_being_freed_is_not_freed_twice() -> None:
    # The previous pass shrank a from 4 to 3; its trainer 3 is still there
    # (not yet deleted) and the newcomer not yet bound: nothing more to do.
    a = job("a", 1, 4, 3, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0", "n0", "n0", "n0")
    pods.append(pod("new-0", "", res(1, 1, gpu=1), owner_uid="new"))
    assert plan([node("n0", gpu=4)], pods, [a]).changes == ()


def test_an_extra_trainer_that_cannot_be_scheduled_is_given_back() -> None:
    a = job("a", 1, 4, 3, res(1, 1, gpu=2))
    pods = trainer_pods(a, "n0", "n0", "")  # trainer 2 found no room
    result = plan([node("n0", gpu=4)], pods, [a])
    assert targets(result) == {"a": 2}
    assert "trainer 2" in result.changes[0].reason


def test_taints_and_node_selectors_are_respected() -> None:
    a = job("a", 1, 4, 1, res(1, 1, gpu=1))
    tainted = node("t", gpu=8, taints=(Taint("dedicated", "x", "NoSchedule"),))
    result = plan([node("n0", gpu=1), tainted], trainer_pods(a, "n0"), [a])
    assert result.changes == ()  # only the tainted node has room
    # A pending pod selecting a label no node has cannot fit anywhere.
    b = job("b", 1, 4, 4, res(1, 1, gpu=1))
    picky = pod("p", "", res(gpu=1), owner_uid="p", node_selector={"zone": "mars"})
    result = plan([node("n0", gpu=4)], [*trainer_pods(b, *["n0"] * 4), picky], [b])
    assert result.changes == ()
    assert result.unplaceable


# --- admission before growth -------------------------------------------------------------
#
# Three rules, one test each at least: a pending job that can be made to fit
# is admitted before anything grows; room is taken from the most fulfilled
# job first, never below its minimum; a job that cannot fit even after every
# shrink is passed over without holding back the ones behind it.


def newcomer(
    name: str, gpu: int, created: str = "2026-01-01T01:00:00Z", count: int = 1
) -> list[Pod]:
    """A job's pending trainers, as the operator creates them (they carry a role)."""
    return [
        pod(f"{name}-trainer-{i}", "", res(1, 1, gpu=gpu), owner_uid=name, role="trainer",
            index=i, created=created)
        for i in range(count)
    ]  # fmt: skip


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


# --- a job that has waited too long ---------------------------------------------------

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


# --- bounds and what is never touched --------------------------------------------------


def test_jobs_with_min_equal_to_max_are_never_touched() -> None:
    fixed = job("f", 3, 3, 3, res(1, 1, gpu=1))
    pods = trainer_pods(fixed, "n0", "n0", "n0")
    pods.append(pod("new-0", "", res(1, 1, gpu=2), owner_uid="new"))
    result = plan([node("n0", gpu=4)], pods, [fixed])
    assert result.changes == ()
    assert result.unplaceable  # it would have needed fixed's room
    assert plan([node("n0", gpu=64)], pods[:3], [fixed]).changes == ()


def test_pservers_and_other_pods_are_never_given_up() -> None:
    # The cluster is full with a's pserver and its minimum trainers: a newcomer
    # cannot start, and nothing of a is removed for it.
    a = job("a", 2, 4, 2, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0", "n0")
    pods.append(pod("a-pserver-0", "n0", res(1, 1, gpu=2), owner_uid="a", role="pserver", index=0))
    pods.append(pod("new-0", "", res(1, 1, gpu=1), owner_uid="new"))
    result = plan([node("n0", gpu=4)], pods, [a])
    assert result.changes == ()

    # a may give up a trainer now, but only with its pserver's two GPUs would
    # the newcomer's three fit: it waits, and a keeps both trainers.
    a = job("a", 1, 4, 2, res(1, 1, gpu=1))
    pods = trainer_pods(a, "n0", "n0")
    pods.append(pod("a-pserver-0", "n0", res(1, 1, gpu=2), owner_uid="a", role="pserver", index=0))
    pods.append(pod("new-0", "", res(1, 1, gpu=3), owner_uid="new"))
    result = plan([node("n0", gpu=4)], pods, [a])
    assert result.changes == ()
    assert len(result.unplaceable) == 1


def test_random_clusters_keep_every_invariant() -> None:
    rng = random.Random(7)
    for _ in range(300):
        nodes = [
            node(f"n{i}", cpu=rng.choice([4, 8, 16]), gpu=rng.choice([0, 2, 4, 8]))
            for i in range(rng.randint(1, 4))
        ]
        room = {n.name: n.allocatable for n in nodes}
        jobs, pods = [], []
        for j in range(rng.randint(1, 5)):
            low = rng.randint(1, 3)
            high = rng.choice([low, low + rng.randint(1, 5)])
            trainer = res(rng.choice([0.5, 1, 2]), rng.choice([1, 2]), rng.choice([0, 1, 2]))
            placed: list[str] = []
            for _ in range(rng.randint(low, high)):
                fits = [n for n, r in room.items() if trainer.fits_in(r)]
                target = rng.choice(fits) if fits and rng.random() < 0.9 else ""
                if target:
                    room[target] = room[target] - trainer
                placed.append(target)
            elastic = job(f"j{j}", low, high, len(placed), trainer, running=rng.random() < 0.8)
            jobs.append(elastic)
            pods += trainer_pods(elastic, *placed)
        for k in range(rng.randint(0, 3)):
            pods.append(pod(f"p{k}", "", res(1, 1, rng.randint(0, 4)), owner_uid=f"p{k}"))
        result = plan(nodes, pods, jobs, max_load=rng.choice([0.9, 0.97, 1.0]))
        by_uid = {j.uid: j for j in jobs}
        for change in result.changes:
            elastic = by_uid[change.uid]
            assert elastic.min < elastic.max, "a fixed-size job was touched"
            assert elastic.min <= change.new <= elastic.max, change
        for name, free in result.free_after.items():
            assert min(free.cpu, free.memory, free.gpu) >= 0, (name, free)


# --- reading API objects -----------------------------------------------------------------


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


JUNK: list[Any] = [None, 0, -1, True, "x", "", [], {}, [None], {"a": None}, 1.5, "200x", "-1"]


def _mutations(base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """`base` with one to four fields, at any depth, replaced by junk."""
    import copy

    obj = copy.deepcopy(base)
    for _ in range(rng.randint(1, 4)):
        parent: dict[str, Any] = obj
        key = rng.choice(list(parent))
        while isinstance(parent[key], dict) and parent[key] and rng.random() < 0.7:
            parent = parent[key]
            key = rng.choice(list(parent))
        parent[key] = rng.choice(JUNK)
    return obj


def test_malformed_objects_never_raise() -> None:
    rng = random.Random(3)
    bases = [paddlejob(), {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k"}]}}]
    for _ in range(2000):
        junk = _mutations(rng.choice(bases), rng)
        elastic = job_from_manifest(junk)
        if elastic is not None:  # whatever it read, it is something to plan with
            assert 0 <= elastic.min <= elastic.trainers <= elastic.max
            assert elastic.min < elastic.max
            assert min(elastic.trainer.cpu, elastic.trainer.memory, elastic.trainer.gpu) >= 0
        node_from_manifest(junk)
        pod_from_manifest(junk)
    for junk in JUNK:
        assert job_from_manifest(junk) is None
        assert node_from_manifest(junk) is None
        assert pod_from_manifest(junk) is None


# --- where a job's pods may go ---------------------------------------------------------

REAL = {"dlk8s.io/real-node": "true"}
REAL_TAINT = Taint("dlk8s.io/real-node", "", "NoSchedule")
TOLERATE_REAL = (Toleration("dlk8s.io/real-node", "Exists", "", "NoSchedule"),)


def pinned_trainers(j: ElasticJob, *nodes: str) -> list[Pod]:
    """Trainers whose namespace pins them to the real node (selector and
    toleration come from admission plugins, not from the job's spec)."""
    return [
        dataclasses.replace(p, node_selector=REAL, tolerations=TOLERATE_REAL)
        for p in trainer_pods(j, *nodes)
    ]


def test_growth_only_counts_the_nodes_the_jobs_pods_may_use() -> None:
    # Three trainers of 0.6 CPU fill the 2-CPU real node; the big node has
    # room, but the job's pods may not go there: a fourth would stay Pending.
    a = job("a", 1, 4, 3, res(0.6, 0.1))
    nodes = [node("real", cpu=2, gpu=0, labels=REAL, taints=(REAL_TAINT,)), node("big", cpu=32)]
    assert targets(plan(nodes, pinned_trainers(a, "real", "real", "real"), [a])) == {}
    # ...while the room that node has is still used.
    b = job("b", 1, 4, 1, res(0.6, 0.1))
    assert targets(plan(nodes, pinned_trainers(b, "real"), [b])) == {"b": 3}
