"""Where the plan places pods: taints, node selectors, required node
affinity, and the nodes a job's pods may use."""

from __future__ import annotations

import dataclasses

from dlk8s.autoscaler.cluster import ElasticJob, Placement, Pod, Requirement, Taint, Toleration
from dlk8s.autoscaler.plan import plan

from ..support.elastic import job, node, pod, res, targets, trainer_pods


def test_taints_and_node_selectors_are_respected() -> None:
    a = job("a", 1, 4, 1, res(1, 1, gpu=1))
    tainted = node("t", gpu=8, taints=(Taint("dedicated", "x", "NoSchedule"),))
    result = plan([node("n0", gpu=1), tainted], trainer_pods(a, "n0"), [a])
    assert result.changes == ()  # only the tainted node has room
    # A pending pod selecting a label no node has cannot fit anywhere.
    b = job("b", 1, 4, 4, res(1, 1, gpu=1))
    picky = pod("p", "", res(gpu=1), owner_uid="p", placement=Placement({"zone": "mars"}))
    result = plan([node("n0", gpu=4)], [*trainer_pods(b, *["n0"] * 4), picky], [b])
    assert result.changes == ()
    assert result.unplaceable


REAL = {"dlk8s.io/real-node": "true"}
REAL_TAINT = Taint("dlk8s.io/real-node", "", "NoSchedule")
TOLERATE_REAL = (Toleration("dlk8s.io/real-node", "Exists", "", "NoSchedule"),)


def pinned_trainers(j: ElasticJob, *nodes: str) -> list[Pod]:
    """Trainers whose namespace pins them to the real node (selector and
    toleration come from admission plugins, not from the job's spec)."""
    return [
        dataclasses.replace(p, placement=Placement(REAL, TOLERATE_REAL))
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


def expression(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, values)


def test_required_node_affinity_is_one_of_its_terms_all_of_each() -> None:
    a100 = node("a100", labels={"gpu": "a100", "cores": "64"})
    t4 = node("t4", labels={"gpu": "t4", "cores": "8"})
    bare = node("bare")

    def allowed(*terms: tuple[Requirement, ...]) -> set[str]:
        return {n.name for n in (a100, t4, bare) if Placement(node_affinity=terms).allows(n)}

    assert allowed() == {"a100", "t4", "bare"}  # no affinity: anywhere
    assert allowed((expression("gpu", "In", "a100", "h100"),)) == {"a100"}
    # NotIn and DoesNotExist match a node without the label, as label selectors do.
    assert allowed((expression("gpu", "NotIn", "t4"),)) == {"a100", "bare"}
    assert allowed((expression("gpu", "DoesNotExist"),)) == {"bare"}
    assert allowed((expression("gpu", "Exists"), expression("cores", "Gt", "16"))) == {"a100"}
    assert allowed((expression("cores", "Lt", "16"),), (expression("gpu", "In", "a100"),)) == {
        "a100",
        "t4",
    }
    assert allowed((Requirement("metadata.name", "In", ("t4",), field=True),)) == {"t4"}
    # A term with no requirement matches no node; a malformed bound, none either.
    assert allowed(()) == set()
    assert allowed((expression("cores", "Gt", "many"),)) == set()


GPU = {"pool": "gpu"}
GPU_TAINT = Taint("nvidia.com/gpu", "", "NoSchedule")
ON_GPU_NODES = Placement(GPU, (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),))


def test_a_job_without_trainers_yet_is_placed_where_its_trainer_template_allows() -> None:
    # a's four trainers fill the tainted GPU node; the plain node has room.
    a = job("a", 1, 4, 4, res(1, 1, gpu=1), placement=ON_GPU_NODES)
    trainers = [
        dataclasses.replace(p, placement=ON_GPU_NODES) for p in trainer_pods(a, *["gpu"] * 4)
    ]
    nodes = [node("plain", gpu=8), node("gpu", gpu=4, labels=GPU, taints=(GPU_TAINT,))]
    # b, just created, asks for the GPU nodes too: a gives back two trainers.
    b = job("b", 2, 4, 2, res(1, 1, gpu=1), running=False, placement=ON_GPU_NODES)
    assert targets(plan(nodes, trainers, [a, b])) == {"a": 2}
    # Had b no placement, the plain node would take it and a keep its four.
    anywhere = dataclasses.replace(b, placement=Placement())
    assert targets(plan(nodes, trainers, [a, anywhere])) == {}
