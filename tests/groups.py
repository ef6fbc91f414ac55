"""Which pytest process runs which tests under `make test` (pytest -n 3).

Three groups of end-to-end modules, each run whole by one process, so that
a group's session clusters are shared within it and the processes wait on
different things at once: the kwok modules (kwok's and our timers), the
modules that train on the session's real node (containers, TensorFlow,
PyTorch), and those that start and stop clusters of their own (the demo,
`make cluster`, a release on a bare node, Kueue, the node's own tests).
Split across processes, a group would start its session cluster once in
each. Each real node takes a free subnet of its own, so the session's real
node and an own cluster's run side by side. The unit tests go wherever
there is room, one by one.

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


def group_of(module: str) -> str:
    """The group of an end-to-end module, by its name."""
    if module in REAL_NODE_MODULES:
        return "realnode"
    return "ownclusters" if module in OWN_CLUSTER_MODULES else "kwok"


def scope_of(nodeid: str) -> str:
    """What one process runs whole: an end-to-end test's group; any other
    test is a scope of its own."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/e2e/"):
        return nodeid
    return group_of(path.rsplit("/", 1)[-1].removesuffix(".py"))
