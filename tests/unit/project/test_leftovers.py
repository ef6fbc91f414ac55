"""What a run of the local cluster leaves, and whose it is (dev/dlk8s_dev/leftovers.py,
nodehost.py): what a forced stop kills is gone when the stop says so, and a
process in another node's cgroups is never taken for one of this node's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from dlk8s_dev import leftovers
from dlk8s_dev.nodehost import network_lock, node_tags_in


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


def test_network_lock_excludes_a_node_of_another_process() -> None:
    """Whether the backstop goes is decided under a lock every run's process shares."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from dlk8s_dev.nodehost import network_lock\n"
            "with network_lock():\n"
            "    print('held', flush=True); sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(Path(leftovers.__file__).parents[1])},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        taken = threading.Event()

        def take() -> None:
            with network_lock():
                taken.set()

        waiter = threading.Thread(target=take)
        waiter.start()
        assert not taken.wait(1.0), "taken while another process held it"
        assert holder.stdin is not None
        holder.stdin.close()
        waiter.join(timeout=30)
        assert taken.is_set(), "never taken after the other process let go"
    finally:
        holder.kill()
        holder.wait()
