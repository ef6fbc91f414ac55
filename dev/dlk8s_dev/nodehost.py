"""What a real node is on the host: its cgroups, links, routes, mounts and processes.

Read and changed by the node as it starts and stops (realnode/) and by the
clean-up of runs that are gone (leftovers.py); nothing here decides whose a
thing is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

NODE_PREFIX = "dlk8s-node-"
SERVICE_CIDR = "10.96.0.0/16"
# Every address a node of ours uses comes from these ranges. While a node
# exists, the host refuses any dial into them that no more specific route of
# a node claims ("unreachable", at the lowest priority, so it never hides a
# route of anyone else's): a late dial after a node went away, or one from a
# run that crashed before its links were set up, fails at once instead of
# following the default route off the machine.
BACKSTOP_RANGES = ("10.244.0.0/16", "10.245.0.0/16", SERVICE_CIDR)
BACKSTOP_METRIC = "4294967294"
# Whether the backstop stays depends on every node of every run on the
# machine, so one lock serializes the moments that decide it: a node adding
# its links and the backstop, a node removing its last link and asking
# whether the backstop goes, and a check of what a stopped node left.
# Without it, two nodes stopping at once could each see the other's links
# and both keep the backstop (CI run 61).
NETWORK_LOCK = Path("/run/lock/dlk8s-node-network.lock")
CONTROLLERS_ROOT = Path("/sys/fs/cgroup")
# Host links of a node: dlk<pid>n<k> (the veth) and dlk<pid>a<k> (a portless
# bridge holding the API server's address).
HOST_LINK_RE = re.compile(r"^dlk(\d+)[na](\d+)$")
# A node's tag: its folder's and its cgroups' name.
TAG_RE = re.compile(rf"^{NODE_PREFIX}(\d+)-(\d+)$")


class NodeError(RuntimeError):
    pass


def host_links_of(tag: str) -> tuple[str, str]:
    """The veth's and the API address bridge's names of the node ``tag``."""
    m = TAG_RE.match(tag)
    assert m, tag
    return f"dlk{m.group(1)}n{m.group(2)}", f"dlk{m.group(1)}a{m.group(2)}"


@dataclass(frozen=True)
class Hierarchy:
    mountpoint: Path
    fstype: str  # cgroup (v1) or cgroup2
    controllers: str  # e.g. "cpu", "name=systemd"; "" for cgroup2


def hierarchies() -> list[Hierarchy]:
    """The cgroup hierarchies mounted under /sys/fs/cgroup, as /proc/self/mountinfo says."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        point, fstype, superopts = Path(fields[4]), fields[sep + 1], fields[sep + 3]
        if fstype not in ("cgroup", "cgroup2") or CONTROLLERS_ROOT not in point.parents:
            continue
        opts = superopts.split(",")
        controllers = [o for o in opts if o not in ("rw", "ro") and "=" not in o]
        controllers += [o for o in opts if o.startswith("name=")]
        found.append(Hierarchy(point, fstype, ",".join(controllers) if fstype == "cgroup" else ""))
    return found


def own_cgroup_paths(tag: str) -> list[Path]:
    """``<hierarchy>/<this process's cgroup>/<tag>`` in every hierarchy: the node's cgroups.

    Nested under wherever this process runs, so whatever limits or accounts
    for this process covers the node and its pods too.
    """
    current: dict[frozenset[str], str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        current[frozenset(controllers.split(",")) if controllers else frozenset()] = path
    paths = []
    for h in hierarchies():
        key = frozenset(h.controllers.split(",")) if h.controllers else frozenset()
        rel = current.get(key, "/")
        paths.append(h.mountpoint / rel.lstrip("/") / tag)
    return paths


def cgroup_dirs(tag: str) -> list[Path]:
    """Cgroups named ``tag``, up to three levels below each hierarchy's root."""
    found: list[Path] = []
    for h in hierarchies():
        for pattern in (tag, f"*/{tag}", f"*/*/{tag}"):
            with contextlib.suppress(OSError):
                found += [p for p in h.mountpoint.glob(pattern) if p.is_dir()]
    return found


def remove_cgroups(tag: str, timeout: float = 10) -> list[str]:
    """rmdir every cgroup under each ``tag`` cgroup (deepest first); returns what stayed."""
    deadline = time.monotonic() + timeout
    left: list[str] = []
    while True:
        left = []
        for top in cgroup_dirs(tag):
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for d in [*dirs, top]:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
                        left.append(str(d))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def make_cgroups(tag: str) -> list[Path]:
    paths = own_cgroup_paths(tag)
    for path in paths:
        path.mkdir(exist_ok=True)
        if (path / "cpuset.cpus").exists():  # a new cpuset v1 cgroup starts empty
            for f in ("cpuset.cpus", "cpuset.mems"):
                (path / f).write_text((path.parent / f).read_text())
    return paths


def enter_cgroups(paths: Sequence[Path]) -> None:
    pid = str(os.getpid())
    for path in paths:
        (path / "cgroup.procs").write_text(pid)


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def host_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    return [line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()]


def backstop_routes() -> list[str]:
    out = subprocess.run(
        ["ip", "-o", "route", "show", "type", "unreachable"], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in out.splitlines()
        if f"metric {BACKSTOP_METRIC}" in line and line.split()[1] in BACKSTOP_RANGES
    ]


def add_backstop() -> None:
    for cidr in BACKSTOP_RANGES:
        subprocess.run(
            ["ip", "route", "replace", "unreachable", cidr, "metric", BACKSTOP_METRIC],
            check=True,
            capture_output=True,
        )


def remove_backstop() -> None:
    for cidr in BACKSTOP_RANGES:
        subprocess.run(
            ["ip", "route", "delete", "unreachable", cidr, "metric", BACKSTOP_METRIC],
            capture_output=True,
        )


@contextlib.contextmanager
def network_lock() -> Iterator[None]:
    """Hold NETWORK_LOCK (across processes) for the block."""
    NETWORK_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(NETWORK_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def unused_backstop() -> list[str]:
    """The backstop routes, if no node's link is left to need them (hold network_lock)."""
    if any(HOST_LINK_RE.match(name) for name in host_links()):
        return []
    return backstop_routes()


def drop_unused_backstop() -> bool:
    """Remove the backstop once the last node of any run is gone (hold network_lock)."""
    if not unused_backstop():
        return False
    remove_backstop()
    return True


def mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(path) or point.startswith(prefix):
            found.append(point)
    return found


def processes_of(root: Path, tag: str, netns_inode: int | None = None) -> list[tuple[int, str]]:
    """Processes of a node: command line under its root, cgroup under its tag, or in its netns."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroup = (entry / "cgroup").read_text()
            netns = os.stat(entry / "ns" / "net").st_ino if netns_inode else None
        except OSError:
            continue
        ours = str(root) in cmdline or f"/{tag}/" in cgroup or f"/{tag}\n" in cgroup
        # Once a node's network namespace is gone its inode number can be a
        # new one's, another node's pod's (seen in CI): no process of ours.
        if ours or (netns_inode and netns == netns_inode and not node_tags_in(cgroup) - {tag}):
            found.append((int(entry.name), cmdline.strip()))
    return found


def node_tags_in(cgroup: str) -> set[str]:
    """The tags of the nodes whose cgroups a process is in (its /proc/PID/cgroup)."""
    return {
        part
        for line in cgroup.splitlines()
        for part in line.split(":", 2)[-1].split("/")
        if TAG_RE.match(part)
    }
