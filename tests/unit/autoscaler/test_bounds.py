"""What the plan never does: leave [min, max], touch fixed-size jobs or
pservers, or overfill a node."""

from __future__ import annotations

import random

from dlk8s.autoscaler.plan import Plan, plan

from ..support.elastic import job, node, pod, res, trainer_pods


def test_jobs_with_min_equal_to_max_are_never_touched() -> None:
    fixed = job("f", 3, 3, 3, res(1, 1, gpu=1))
    pods = trainer_pods(fixed, "n0", "n0", "n0")
    pods.append(pod("new-0", "", res(1, 1, gpu=2), owner_uid="new"))
    result = plan([node("n0", gpu=4)], pods, [fixed])
    assert result.changes == ()
    assert result.unplaceable  # it would have needed fixed's room
    assert plan([node("n0", gpu=64)], pods[:3], [fixed]).changes == ()


def test_pservers_and_other_pods_are_never_given_up() -> None:
    def with_pserver(low: int, new_gpu: int) -> Plan:
        """a at 2 trainers beside its 2-GPU pserver on one 4-GPU node, and a
        newcomer asking for `new_gpu` GPUs."""
        a = job("a", low, 4, 2, res(1, 1, gpu=1))
        pserver = pod("a-pserver-0", "n0", res(1, 1, gpu=2), owner_uid="a", role="pserver", index=0)
        newcomer = pod("new-0", "", res(1, 1, gpu=new_gpu), owner_uid="new")
        return plan([node("n0", gpu=4)], [*trainer_pods(a, "n0", "n0"), pserver, newcomer], [a])

    # The cluster is full with a's pserver and its minimum trainers: a newcomer
    # cannot start, and nothing of a is removed for it.
    assert with_pserver(low=2, new_gpu=1).changes == ()

    # a may give up a trainer now, but only with its pserver's two GPUs would
    # the newcomer's three fit: it waits, and a keeps both trainers.
    result = with_pserver(low=1, new_gpu=3)
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
