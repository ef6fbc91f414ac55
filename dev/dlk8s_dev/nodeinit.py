"""PID 1 of a real node's namespaces (``python -m dlk8s_dev.nodeinit ROOT``).

The node's holder (``unshare --pid --mount --net --cgroup --fork``, see
realnode/namespaces.py) runs this as the first process of the node's PID namespace:
it mounts what must be private to the node, then reaps orphans until it is
told to stop, when it kills every other process of the namespace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import nodehost as host

# Host paths that containerd, runc and the CNI plugins use whatever their
# configuration says; the node's mount namespace covers each with a tmpfs.
PRIVATE_DIRS = ("/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/containers")
# Written into the node's folder once the namespaces are ready.
READY_FILE = "init.ready"


def init_main(root: Path) -> int:
    """PID 1 of the node's namespaces: private mounts, then reap until told to stop."""
    # In its own cgroup namespace, rooted at the node's cgroups: mounted
    # afresh, each hierarchy shows only that subtree, so containerd's default
    # /k8s.io/<id> cgroups land below the node's tag on the host.
    hierarchies = host.hierarchies()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "mode=755", "cgroup", str(host.CONTROLLERS_ROOT)], check=True
    )
    for h in hierarchies:
        h.mountpoint.mkdir(parents=True, exist_ok=True)
        argv = ["mount", "-t", h.fstype]
        if h.controllers:
            argv += ["-o", h.controllers]
        subprocess.run([*argv, h.fstype, str(h.mountpoint)], check=True)
    for path in PRIVATE_DIRS:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", path], check=True)
    for key, value in (
        ("net/ipv4/ip_forward", "1"),
        ("net/bridge/bridge-nf-call-iptables", "1"),
        ("net/bridge/bridge-nf-call-ip6tables", "1"),
    ):
        Path("/proc/sys", key).write_text(value)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

    def on_term(*_: object) -> None:
        # PID 1 of a PID namespace: kill(-1) reaches every other process in it,
        # and when PID 1 exits the kernel kills whatever is left.
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        # Give the kernel a moment to close their sockets while the veth is
        # still there: the API server then sees its watches end (FIN) instead
        # of waiting for peers that vanished with the network namespace.
        time.sleep(0.5)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    (root / READY_FILE).write_text(str(os.getpid()))
    while True:  # reap every orphan (containerd's shims are reparented here)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(init_main(Path(sys.argv[1])))
