"""The autoscaler's shrinking: over the max-load bound, for a pending job
(only what it needs, most fulfilled first), and growth given back."""

from __future__ import annotations

from dlk8s.autoscaler.plan import plan

from ..support.elastic import job, node, pod, res, targets, trainer_pods


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
