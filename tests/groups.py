"""Which pytest process runs which tests under `make test` (pytest -n 4).

Four groups of end-to-end modules, each run whole by one process, so that
a group's session clusters are shared within it and the processes wait on
different things at once: the kwok modules in two halves (kwok's and our
timers: they wait more than they work, and a half costs one more kwok
cluster, seconds of CPU), the modules that train on the session's real
node (containers, TensorFlow, PyTorch), and those that start and stop
clusters of their own (the demo, `make cluster`, a release on a bare node,
Kueue, the node's own tests). Split across processes, a group would start
its session cluster once in each: a real node's costs a minute of CPU.
Each real node takes a free subnet of its own, so the session's real node
and an own cluster's run side by side. The unit tests go wherever there is
room, one by one.

pytest-xdist's own `--dist loadgroup` reads xdist_group markers through
the item's `_nodeid`, which pytest 9 no longer has: every test went to
whichever process was free, and modules of the same group ran side by side.
tests/conftest.py therefore gives xdist a scheduler that groups by scope_of.
"""

from __future__ import annotations

from typing import Final

REAL_NODE_MODULES: Final = frozenset(
    {
        "test_gpu_drivers",
        "test_incluster",
        "test_train_endings",
        "test_train_isolation",
        "test_train_kueue",
        "test_train_others",
        "test_train_pytorch",
        "test_train_tf",
    }
)
OWN_CLUSTER_MODULES: Final = frozenset(
    {
        "test_demo",
        "test_kueue",
        "test_kueue_jobs",
        "test_publish",
        "test_realnode",
        "test_stopping",
    }
)


# The second half of the kwok modules, by their times in the suite (about
# 540 s of 1,170).
KWOK_SECOND_HALF: Final = frozenset(
    {
        "test_caffe2job",
        "test_crd_validation",
        "test_informer",
        "test_leader",
        "test_limits",
        "test_mxjob",
        "test_paddlejob",
        "test_pytorchjob",
        "test_rbac",
        "test_reads",
    }
)


def group_of(module: str) -> str:
    """The group of an end-to-end module, by its name."""
    if module in REAL_NODE_MODULES:
        return "realnode"
    if module in OWN_CLUSTER_MODULES:
        return "ownclusters"
    return "kwok-2" if module in KWOK_SECOND_HALF else "kwok"


def scope_of(nodeid: str) -> str:
    """What one process runs whole: an end-to-end test's group; any other
    test is a scope of its own."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/e2e/"):
        return nodeid
    return group_of(path.rsplit("/", 1)[-1].removesuffix(".py"))
