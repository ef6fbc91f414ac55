"""What a run of the local cluster leaves, and whose it is (dev/dlk8s_dev/leftovers.py,
nodehost.py): what a forced stop kills is gone when the stop says so, and a
process in another node's cgroups is never taken for one of this node's."""

from __future__ import annotations

import os
import signal
import subprocess

from dlk8s_dev import leftovers
from dlk8s_dev.nodehost import node_tags_in


def test_kill_returns_once_each_process_it_killed_has_exited() -> None:
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    os.kill(procs[1].pid, signal.SIGSTOP)  # stopped, as the forced stop's kubelet is
    try:
        assert leftovers.kill([p.pid for p in procs]) == [p.pid for p in procs]
        for proc in procs:
            # Exited already: not waited for here, only read.
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            assert (pid, os.WTERMSIG(status)) == (proc.pid, signal.SIGKILL)
            proc.returncode = -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                proc.wait()


def test_kill_leaves_out_what_is_already_gone() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        assert leftovers.kill([gone.pid, alive.pid]) == [alive.pid]
    finally:
        alive.wait()


def test_node_tags_in_names_the_nodes_of_a_pods_cgroups_in_either_hierarchy() -> None:
    v2 = "0::/dlk8s-node-4242-1/kubepods/besteffort/pod1234/cri-containerd-abc.scope\n"
    v1 = (
        "9:name=systemd:/dlk8s-node-4242-1/kubepods/pod1234/abc\n"
        "4:memory:/dlk8s-node-4242-1/kubepods/pod1234/abc\n"
        "1:cpu:/\n"
    )
    assert node_tags_in(v2) == {"dlk8s-node-4242-1"}
    assert node_tags_in(v1) == {"dlk8s-node-4242-1"}


def test_node_tags_in_names_none_for_a_process_outside_every_node() -> None:
    assert node_tags_in("0::/user.slice/session-1.scope\n") == set()
    # A folder's name that only starts like a tag is none.
    assert node_tags_in("0::/dlk8s-node-4242-1x/kubepods\n") == set()
