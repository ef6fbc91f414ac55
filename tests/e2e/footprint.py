"""What one run of the local cluster has on this machine, told apart from everything else.

A run is the process that started a cluster (its pid), the session it was
started in, and the network namespaces its processes were seen in. Its
footprint is each thing on the machine that is one of these, or is named
after the pid the way runs name what they make (runs.py, nodehost.py):
processes, host links, network namespaces, host mounts, directories,
cgroups and host iptables rules. Other activity on the machine (other
helpers, other test processes, a session's own clusters) is left out, so
a footprint taken before a run starts equals one taken after it ends
exactly when the run left nothing behind.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from dlk8s_dev import runs
from dlk8s_dev.nodehost import NODE_PREFIX, TAG_RE, hierarchies, node_tags_in


@dataclass(frozen=True)
class Proc:
    pid: int
    cmdline: str
    cgroup: str
    session: int
    netns: int


@dataclass
class Machine:
    """Everything a footprint may pick from, read at one moment."""

    procs: list[Proc] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    addresses: str = ""  # `ip -o addr`
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (mount point, fs type)
    dirs: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    iptables: list[str] = field(default_factory=list)


def _proc(entry: Path) -> Proc | None:
    try:
        cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        cgroup = (entry / "cgroup").read_text()
        netns = os.stat(entry / "ns" / "net").st_ino
        session = os.getsid(int(entry.name))
    except OSError:
        return None
    return Proc(int(entry.name), cmdline.strip(), cgroup, session, netns)


def _run(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False).stdout


def read_machine(*bases: Path) -> Machine:
    """The machine now; ``bases`` are where runs put directories beside the defaults."""
    m = Machine()
    entries = [e for e in Path("/proc").iterdir() if e.name.isdigit()]
    m.procs = [p for p in map(_proc, entries) if p is not None]
    m.links = [
        line.split(":")[1].strip().split("@")[0] for line in _run("ip", "-o", "link").splitlines()
    ]
    m.addresses = _run("ip", "-o", "addr")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        m.mounts.append((fields[4], fields[fields.index("-") + 1]))
    places = {runs.control_plane_base(), runs.node_base(), Path("/dev/shm"), Path("/var/tmp")}
    for base in places | set(bases):
        m.dirs += [str(p) for p in base.glob("dlk8s-*")]
    for h in hierarchies():
        for pattern in ("", "*/", "*/*/"):
            m.cgroups += [str(p) for p in h.mountpoint.glob(f"{pattern}{NODE_PREFIX}*")]
    m.iptables = _run("iptables-save").splitlines()
    return m


@dataclass(frozen=True)
class Run:
    """Who a run is: its pid and session, and what it was seen to have while up."""

    pid: int
    session: int
    netns: frozenset[int] = frozenset()  # its node's network namespace
    links: frozenset[str] = frozenset()  # its host links (names hold the pid)
    cidrs: frozenset[str] = frozenset()  # its node's pod range

    def learn(self, up: Machine) -> Run:
        """The run, with what ``up`` (the machine while it ran) shows it has."""
        host = os.stat("/proc/self/ns/net").st_ino
        tag = f"/{NODE_PREFIX}{self.pid}-"
        netns = {p.netns for p in up.procs if tag in p.cgroup} - {host}
        links = {n for n in up.links if re.match(rf"^dlk{self.pid}[na]\d+$", n)}
        ks = re.findall(rf"dlk{self.pid}n\d+\s+inet 10\.245\.(\d+)\.", up.addresses)
        cidrs = {f"10.244.{k}.0/24" for k in ks}
        return Run(self.pid, self.session, frozenset(netns), frozenset(links), frozenset(cidrs))


def _of_another_run(p: Proc, run: Run) -> bool:
    """A process in another run's node: a network namespace's inode number is
    used again once it is gone, and another node's pod may have it now."""
    return any(
        (m := TAG_RE.match(tag)) is not None and int(m.group(1)) != run.pid
        for tag in node_tags_in(p.cgroup)
    )


def footprint(m: Machine, run: Run) -> dict[str, set[str]]:
    """What of ``run`` is in ``m``, by kind."""
    names = (f"{runs.WORKDIR_PREFIX}{run.pid}-", f"{NODE_PREFIX}{run.pid}-")
    link = re.compile(rf"^dlk{run.pid}[na]\d+$")
    own = [
        p
        for p in m.procs
        if any(n in p.cmdline or f"/{n}" in p.cgroup for n in names)
        or p.session == run.session
        or (p.netns in run.netns and not _of_another_run(p, run))
        or p.pid == run.pid
    ]
    marks = [*run.links, *run.cidrs]
    return {
        "processes": {f"{p.pid} {p.cmdline[:120]}" for p in own},
        "links": {n for n in m.links if link.match(n) or n in run.links or n == "dlk8s-br"},
        "netns": {
            str(p.netns) for p in m.procs if p.netns in run.netns and not _of_another_run(p, run)
        },
        "mounts": {
            point
            for point, fstype in m.mounts
            if any(n in point for n in names) or (fstype == "nsfs" and "dlk8s" in point)
        },
        "dirs": {d for d in m.dirs if any(Path(d).name.startswith(n) for n in names)},
        "cgroups": {c for c in m.cgroups if any(Path(c).name.startswith(n) for n in names)},
        "iptables": {line for line in m.iptables if any(x in line for x in marks)},
    }
