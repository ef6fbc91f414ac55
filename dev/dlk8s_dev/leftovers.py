"""What runs of the local cluster leave behind, and its removal.

A run that ends cleanly removes all it made (LocalCluster.stop). One that
ends otherwise (SIGKILL, a reboot, the out-of-memory killer) loses its
processes with it (they die with their parent, PR_SET_PDEATHSIG, and the
node's with its PID namespace) but leaves its directories, the node's
cgroups and the link that held the API server's address. The next start
removes those of every run that no longer exists (``clean_dead_runs``),
and never anything of a run that lives (runs.py tells them apart); also
the folders of image builds that were killed before they finished.

The same removal ends a run of our own that a signal is stopping, when its
orderly stop did not finish in time (``kill_own_run``, ``sweep_own_run``).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from . import images, runs
from . import nodehost as host

# How long a kill waits for the processes it killed to be gone (a killed
# process takes milliseconds; one stuck in the kernel must not hold the stop
# past its 60 s).
KILL_WAIT = 3.0


def kill(pids: Iterable[int], timeout: float = KILL_WAIT) -> list[int]:
    """SIGKILL each process, then wait (at most ``timeout``) until each has exited.

    A killed process is not gone at once: it still frees its memory and
    files, and whoever reads the machine right after a run ends must not
    find it half-dead (seen in CI, right after a forced stop). A pidfd is
    the process it was opened on, even if its pid is reused meanwhile, and
    polls readable once the process has exited. Returns the pids killed.
    """
    handles: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            fd = os.pidfd_open(pid)
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                os.close(fd)
                continue
            handles[fd] = pid
    killed = list(handles.values())
    deadline = time.monotonic() + timeout
    try:
        while handles and (left := deadline - time.monotonic()) > 0:
            for fd in select.select(list(handles), [], [], left)[0]:
                del handles[fd]
                os.close(fd)
    finally:
        for fd in handles:
            os.close(fd)
    return killed


def remove_workdir(path: Path) -> list[str]:
    """A control plane's directory, and any process that still runs from it."""
    removed = [
        f"process {pid}" for pid in kill([p for p, _ in runs.processes_mentioning(str(path))])
    ]
    size = runs.size_of(path)
    shutil.rmtree(path, ignore_errors=True)
    removed.append(f"{path} ({runs.human(size)})")
    return removed


def remove_node(root: Path, tag: str) -> list[str]:
    """A real node's processes, host links, mounts, cgroups and folder."""
    running = [pid for pid, _ in host.processes_of(root, tag)]
    removed = [f"process {pid}" for pid in kill(running)]
    links = host.host_links()
    for link in host.host_links_of(tag):
        if link in links:
            subprocess.run(["ip", "link", "delete", link], capture_output=True, check=False)
            removed.append(f"link {link}")
    for point in reversed(host.mounts_under(root)):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        removed.append(f"mount {point}")
    if host.cgroup_dirs(tag):
        host.remove_cgroups(tag, timeout=5)
        removed.append(f"cgroups {tag}")
    if root.exists():
        size = runs.size_of(root)
        shutil.rmtree(root, ignore_errors=True)
        removed.append(f"{root} ({runs.human(size)})")
    return removed


def _node_tags(base: Path) -> set[str]:
    """Tags of every node that has a folder in ``base`` or cgroups on this machine."""
    tags: set[str] = set()
    if base.is_dir():
        tags |= {p.name for p in base.glob(f"{host.NODE_PREFIX}*") if p.is_dir()}
    for h in host.hierarchies():
        for pattern in ("", "*/", "*/*/"):
            with contextlib.suppress(OSError):
                found = h.mountpoint.glob(f"{pattern}{host.NODE_PREFIX}*")
                tags |= {p.name for p in found if p.is_dir()}
    return {t for t in tags if host.TAG_RE.match(t)}


def _owner_pid(tag: str) -> int:
    m = host.TAG_RE.match(tag)
    assert m, tag
    return int(m.group(1))


def _workdirs(base: Path) -> Iterator[tuple[Path, int]]:
    for path in base.glob(f"{runs.WORKDIR_PREFIX}*"):
        owner = path.name[len(runs.WORKDIR_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and path.is_dir():
            yield path, int(owner)


def _tidy_links(dead: Callable[[int], bool]) -> list[str]:
    """Host links whose owner ``dead`` says is gone, and the backstop once no node is left."""
    removed = []
    with host.network_lock():
        for name in host.host_links():
            m = host.HOST_LINK_RE.match(name)
            if m and dead(int(m.group(1))):
                subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)
                removed.append(f"link {name}")
        if host.drop_unused_backstop():
            removed.append("backstop routes")
    return removed


def clean_dead_runs(log: Callable[[str], None] | None = None) -> list[str]:
    """Remove what every run that no longer exists left; say what, through ``log``."""
    removed: list[str] = []
    for path, pid in _workdirs(runs.control_plane_base()):
        if not runs.owned_by_live_run(path, pid):
            removed += remove_workdir(path)
    base = runs.node_base()
    for tag in sorted(_node_tags(base)):
        root = base / tag
        pid = _owner_pid(tag)
        live = runs.owned_by_live_run(root, pid) if root.is_dir() else runs.pid_alive(pid)
        if not live:
            removed += remove_node(root, tag)
    # Once a node's folder is gone, the pid in a link's name is all there is.
    removed += _tidy_links(lambda pid: not runs.pid_alive(pid))
    removed += images.clean_dead_builds()
    if removed and log:
        log(f"[localcluster] removed what runs that are gone left: {', '.join(removed)}")
    return removed


def kill_own_run() -> list[int]:
    """SIGKILL every process of this process's clusters and nodes, at once."""
    me = os.getpid()
    pids = {p for p, _ in runs.processes_mentioning(f"{runs.WORKDIR_PREFIX}{me}-")}
    base = runs.node_base()
    for tag in _node_tags(base):
        if _owner_pid(tag) == me:
            pids |= {p for p, _ in host.processes_of(base / tag, tag)}
    return kill(sorted(pids))


def sweep_own_run() -> list[str]:
    """Remove whatever of this process's clusters and nodes is still there."""
    me = os.getpid()
    removed: list[str] = []
    for path, pid in _workdirs(runs.control_plane_base()):
        if pid == me:
            removed += remove_workdir(path)
    base = runs.node_base()
    for tag in sorted(_node_tags(base)):
        if _owner_pid(tag) == me:
            removed += remove_node(base / tag, tag)
    return removed + _tidy_links(lambda pid: pid == me)
