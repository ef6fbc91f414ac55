"""Which pytest process runs which tests under `make test` (pytest -n 4).

Four groups of end-to-end modules, each run whole by one process, so that
a group's session clusters are shared within it and the processes wait on
different things at once: the modules that run on a session's real node in
two halves (its own tests and the jobs that train there: containers,
TensorFlow, PyTorch), and the kwok modules in two halves. The modules that
start clusters of their own (the demo, a release on a bare node, Kueue,
`make cluster`'s stops) need no session cluster and fill up the groups.
The unit tests go wherever there is room, one by one.

Why so: the suite is bound by its CPU, and a process whose tests wait (for
a pod to start, a lease to expire) leaves a core idle unless another has
work. Run 28 (the real node's modules in one group, the own-cluster
modules in another): the kwok halves were done at 810 s, the other two
went on to 1,157 and 1,133 s. Run 29 (-n 5, the own-cluster modules a
group of their own) took longer (1,243 s) and more CPU (2,391 CPU-seconds
against 2,137): more clusters alive at once, and every one of them costs
CPU for as long as it lives. A session real node costs about 40
CPU-seconds and a minute to start, once per group that asks for one: a
module that asks for it outside its group starts one more, so a real-node
module belongs to one of the real-node halves.

pytest-xdist's own `--dist loadgroup` reads xdist_group markers through
the item's `_nodeid`, which pytest 9 no longer has: every test went to
whichever process was free, and modules of the same group ran side by side.
tests/conftest.py therefore gives xdist a scheduler that groups by scope_of.
"""

from __future__ import annotations

from typing import Final

# Each with its wall time in run 28 (-n 4, one real-node group), in seconds.
GROUPS: Final = {
    "realnode": frozenset(
        {
            "test_demo",  # 216, its own cluster
            "test_train_endings",  # 87
            "test_train_isolation",  # 99
            "test_train_others",  # 67 (with the Paddle stand-in's test, now in test_train_paddle)
            "test_train_paddle",
            "test_train_pytorch",  # 258
            "test_train_tf",  # 156
        }
    ),
    "realnode-2": frozenset(
        {
            "test_gpu_drivers",  # 156
            "test_incluster",  # 175
            "test_publish",  # 375, its own cluster
            "test_realnode",  # 133, with its node's start
            "test_train_kueue",  # 159
        }
    ),
    "kwok-2": frozenset(
        {
            "test_caffe2job",  # 49
            "test_crd_validation",  # 75
            "test_informer",  # 11
            "test_kueue",  # 59, its own cluster
            "test_kueue_jobs",  # 158, its own cluster
            "test_leader",  # 54
            "test_limits",  # 121
            "test_mxjob",  # 40
            "test_paddlejob",  # 106
            "test_pytorchjob",  # 38
            "test_rbac",  # 26
            "test_reads",  # 15
            "test_stopping",  # 192, its own clusters
        }
    ),
}
# Every other end-to-end module: about 710 s.
KWOK: Final = "kwok"


def group_of(module: str) -> str:
    """The group of an end-to-end module, by its name."""
    return next((name for name, modules in GROUPS.items() if module in modules), KWOK)


def scope_of(nodeid: str) -> str:
    """What one process runs whole: an end-to-end test's group; any other
    test is a scope of its own."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/e2e/"):
        return nodeid
    return group_of(path.rsplit("/", 1)[-1].removesuffix(".py"))
