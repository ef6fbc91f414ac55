"""A real node beside the kwok nodes: containerd, runc, CNI, kubelet, kube-proxy, CoreDNS.

Everything the node is lives in namespaces of its own, made by one holder
process (``unshare --pid --mount --net --fork``) whose PID 1 is this module's
``init``:

- **PID namespace**: containerd, its shims, every container, kubelet,
  kube-proxy and CoreDNS run in it. When its PID 1 dies the kernel kills all
  of them, so nothing outlives the node, however it stops. The holder dies
  with the process that started it (``PR_SET_PDEATHSIG``), and takes PID 1
  with it (``unshare --kill-child``).
- **cgroup namespace**, rooted at the node's cgroups (``<tag>`` below this
  process's own cgroup in every hierarchy): containerd's cgroups for pods
  (``/k8s.io/<id>`` as the node sees them) are nested there on the host.
- **Mount namespace** (private propagation): every mount containerd and
  kubelet make (overlay root filesystems, shm, projected volumes, pod network
  namespaces) exists only there and vanishes with it. The fixed host paths
  containerd and the CNI plugins write to regardless of their configuration
  (``/run/containerd``, ``/run/netns``, ``/var/lib/cni``,
  ``/var/log/containers``) get a tmpfs of their own inside it.
- **Network namespace**: the pods' bridge, their veths, kube-proxy's and the
  CNI portmap plugin's iptables chains, the node's sysctls (ip_forward,
  bridge-nf-call-iptables) all live there and disappear with it. The node
  reaches the host through one veth pair (host end named ``dlk<pid>n<k>``,
  which the kernel deletes with the namespace). The node namespace has no
  default route: a pod can reach other pods, the node, Services (through
  kube-proxy) and the API server on the host end of the veth, and nothing
  else. The host has no forwarding to do (it routes the pod /24 to the veth,
  a route that goes with the device), so nothing leaves the machine.

The API server has to be reachable from pods, so a cluster with a real node
binds and advertises it on the host end of the veth (see
``LocalCluster(real_node=True)``); the ``kubernetes`` Service then leads there
through kube-proxy. That address also sits on a portless bridge
``dlk<pid>a<k>`` in the host namespace, which carries low-priority routes for
the node's subnets too: it outlives the node until the control plane has
stopped, so no late dial to the API server, a pod or the kubelet ever
follows the default route off the machine. CoreDNS listens on the bridge's address, the kubelet's
``clusterDNS``; it answers the cluster domain from the API and NXDOMAIN for
every other name (it forwards nothing).

On disk the node has one folder, ``/var/tmp/dlk8s-node-<pid>-<k>`` (the pid of
the process that started it), and cgroups named the same (below this
process's cgroup in each hierarchy). ``stop()`` removes them; ``RealNode.prepare()`` first removes
whatever a dead process's node left behind and touches nothing whose owner
is alive.

The node registers with the taint ``dlk8s.io/real-node:NoSchedule`` and the
label ``dlk8s.io/real-node=true``, so the kwok-based tests never land on it
by accident; pods meant for it carry the toleration and node selector
(``RealNode.pod_placement()``), or are created in a namespace that
``RealNode.real_namespace()`` annotated, whose pods get both from the API
server's PodNodeSelector and PodTolerationRestriction admission plugins
(what a pod nobody can edit needs, such as `helm test`'s smoke TFJob).

Images (dlk8s_dev.images): the big ones (pause, base, runtime) come with a
per-user containerd root in which they are already unpacked, hard-linked
into the node's own root at start (a few seconds, where importing the
runtime image takes a minute); the rest (the operator, rebuilt with every
edit of hooks/) are imported. Each is there under its hash tag and as
``localhost/dlk8s/<image>:local``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import images as imagelib
from .pdeath import die_with_parent

if TYPE_CHECKING:
    from .localcluster import LocalCluster

NODE_PREFIX = "dlk8s-node-"
DEFAULT_BASE = Path("/var/tmp")
TAINT_KEY = "dlk8s.io/real-node"
LABEL_KEY = "dlk8s.io/real-node"
BRIDGE = "dlk8s-br"
CLUSTER_DOMAIN = "cluster.local"
SERVICE_CIDR = "10.96.0.0/16"
# Every address a node of ours uses comes from these ranges. While a node
# exists, the host refuses any dial into them that no more specific route of
# a node claims ("unreachable", at the lowest priority, so it never hides a
# route of anyone else's): a late dial after a node went away, or one from a
# run that crashed before its links were set up, fails at once instead of
# following the default route off the machine.
BACKSTOP_RANGES = ("10.244.0.0/16", "10.245.0.0/16", SERVICE_CIDR)
BACKSTOP_METRIC = "4294967294"
CNI_BIN = Path("/usr/lib/cni")
# Host paths that containerd, runc and the CNI plugins use whatever their
# configuration says; the node's mount namespace covers each with a tmpfs.
PRIVATE_DIRS = ("/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/containers")
CONTROLLERS_ROOT = Path("/sys/fs/cgroup")
# Host links of a node: dlk<pid>n<k> (the veth) and dlk<pid>a<k> (a portless
# bridge holding the API server's address).
HOST_LINK_RE = re.compile(r"^dlk(\d+)[na](\d+)$")

REQUIRED_COMMANDS = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "unshare",
    "nsenter",
    "ip",
    "iptables",
    "conntrack",
    "openssl",
)
REQUIRED_TOOLS = ("kubelet", "kube-proxy", "coredns")


class NodeError(RuntimeError):
    pass


def missing_requirements(tools_bin: Path) -> list[str]:
    """What this machine lacks to run a real node (empty when it can)."""
    missing = [t for t in REQUIRED_TOOLS if not (tools_bin / t).exists()]
    missing += [c for c in REQUIRED_COMMANDS if not shutil.which(c)]
    if not (CNI_BIN / "bridge").exists():
        missing.append(f"{CNI_BIN}/bridge (containernetworking-plugins)")
    if os.geteuid() != 0:
        missing.append("root")
    return missing


# -- the namespaces' PID 1 -------------------------------------------------------


def _init_main(root: Path) -> int:
    """PID 1 of the node's namespaces: private mounts, then reap until told to stop."""
    # In its own cgroup namespace, rooted at the node's cgroups: mounted
    # afresh, each hierarchy shows only that subtree, so containerd's default
    # /k8s.io/<id> cgroups land below the node's tag on the host.
    hierarchies = _hierarchies()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "mode=755", "cgroup", str(CONTROLLERS_ROOT)], check=True
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
    (root / "init.ready").write_text(str(os.getpid()))
    while True:  # reap every orphan (containerd's shims are reparented here)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.5)


# -- naming and leftovers ---------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class _Hierarchy:
    mountpoint: Path
    fstype: str  # cgroup (v1) or cgroup2
    controllers: str  # e.g. "cpu", "name=systemd"; "" for cgroup2


def _hierarchies() -> list[_Hierarchy]:
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
        found.append(_Hierarchy(point, fstype, ",".join(controllers) if fstype == "cgroup" else ""))
    return found


def _own_cgroup_paths(tag: str) -> list[Path]:
    """``<hierarchy>/<this process's cgroup>/<tag>`` in every hierarchy: the node's cgroups.

    Nested under wherever this process runs, so whatever limits or accounts
    for this process covers the node and its pods too.
    """
    current: dict[frozenset[str], str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        current[frozenset(controllers.split(",")) if controllers else frozenset()] = path
    paths = []
    for h in _hierarchies():
        key = frozenset(h.controllers.split(",")) if h.controllers else frozenset()
        rel = current.get(key, "/")
        paths.append(h.mountpoint / rel.lstrip("/") / tag)
    return paths


def _cgroup_dirs(tag: str) -> list[Path]:
    """Cgroups named ``tag``, up to three levels below each hierarchy's root."""
    found: list[Path] = []
    for h in _hierarchies():
        for pattern in (tag, f"*/{tag}", f"*/*/{tag}"):
            with contextlib.suppress(OSError):
                found += [p for p in h.mountpoint.glob(pattern) if p.is_dir()]
    return found


def _remove_cgroups(tag: str, timeout: float = 10) -> list[str]:
    """rmdir every cgroup under each ``tag`` cgroup (deepest first); returns what stayed."""
    deadline = time.monotonic() + timeout
    left: list[str] = []
    while True:
        left = []
        for top in _cgroup_dirs(tag):
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


def _make_cgroups(tag: str) -> list[Path]:
    paths = _own_cgroup_paths(tag)
    for path in paths:
        path.mkdir(exist_ok=True)
        if (path / "cpuset.cpus").exists():  # a new cpuset v1 cgroup starts empty
            for f in ("cpuset.cpus", "cpuset.mems"):
                (path / f).write_text((path.parent / f).read_text())
    return paths


def _enter_cgroups(paths: Sequence[Path]) -> None:
    pid = str(os.getpid())
    for path in paths:
        (path / "cgroup.procs").write_text(pid)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _host_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    return [line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()]


def _backstop_routes() -> list[str]:
    out = subprocess.run(
        ["ip", "-o", "route", "show", "type", "unreachable"], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in out.splitlines()
        if f"metric {BACKSTOP_METRIC}" in line and line.split()[1] in BACKSTOP_RANGES
    ]


def _add_backstop() -> None:
    for cidr in BACKSTOP_RANGES:
        subprocess.run(
            ["ip", "route", "replace", "unreachable", cidr, "metric", BACKSTOP_METRIC],
            check=True,
            capture_output=True,
        )


def _remove_backstop() -> None:
    for cidr in BACKSTOP_RANGES:
        subprocess.run(
            ["ip", "route", "delete", "unreachable", cidr, "metric", BACKSTOP_METRIC],
            capture_output=True,
        )


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(path) or point.startswith(prefix):
            found.append(point)
    return found


def _processes_of(root: Path, tag: str, netns_inode: int | None = None) -> list[tuple[int, str]]:
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
        if (
            str(root) in cmdline
            or f"/{tag}/" in cgroup
            or f"/{tag}\n" in cgroup
            or (netns_inode and netns == netns_inode)
        ):
            found.append((int(entry.name), cmdline.strip()))
    return found


def clean_stale(base: Path = DEFAULT_BASE, log: Callable[[str], None] | None = None) -> list[str]:
    """Remove what nodes of dead processes left: processes, mounts, veths, cgroups, folders.

    A node belongs to the process whose pid is in its name; while that process
    lives, its node is left alone.
    """
    removed: list[str] = []
    tags: set[str] = set()
    if base.is_dir():
        tags |= {p.name for p in base.glob(f"{NODE_PREFIX}*") if p.is_dir()}
    for h in _hierarchies():
        for pattern in ("", "*/", "*/*/"):
            with contextlib.suppress(OSError):
                tags |= {
                    p.name for p in h.mountpoint.glob(f"{pattern}{NODE_PREFIX}*") if p.is_dir()
                }
    for tag in sorted(tags):
        m = re.match(rf"^{NODE_PREFIX}(\d+)-(\d+)$", tag)
        if not m or _pid_alive(int(m.group(1))):
            continue
        root = base / tag
        for pid, _ in _processes_of(root, tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                removed.append(f"process {pid}")
        for link in (f"dlk{m.group(1)}n{m.group(2)}", f"dlk{m.group(1)}a{m.group(2)}"):
            if link in _host_links():
                subprocess.run(["ip", "link", "delete", link], capture_output=True, check=False)
                removed.append(f"link {link}")
        for point in reversed(_mounts_under(root)):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
            removed.append(f"mount {point}")
        if _cgroup_dirs(tag):
            _remove_cgroups(tag)
            removed.append(f"cgroups /{tag}")
        if root.exists():
            shutil.rmtree(root, ignore_errors=True)
            removed.append(f"folder {root}")
    # Host links of dead owners whose folder is gone already.
    for name in _host_links():
        m = HOST_LINK_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)
            removed.append(f"link {name}")
    if not any(HOST_LINK_RE.match(name) for name in _host_links()) and _backstop_routes():
        _remove_backstop()
        removed.append("backstop routes")
    if removed and log:
        log(f"[realnode] removed what a dead run left: {', '.join(removed)}")
    return removed


# -- certificates --------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NodeError(f"openssl {' '.join(args)}: {done.stderr}")


def _make_pki(pki: Path, node_name: str, node_ip: str) -> None:
    """A CA for the kubelet's serving certificate and the apiserver's client certificate."""
    pki.mkdir(parents=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "30",
        "-subj",
        "/CN=dlk8s-node-ca",
        cwd=pki,
    )
    for name, subj, ext in (
        (
            "kubelet",
            f"/CN=system:node:{node_name}/O=system:nodes",
            f"subjectAltName=IP:{node_ip},DNS:{node_name}\nextendedKeyUsage=serverAuth\n",
        ),
        (
            "apiserver-kubelet-client",
            "/CN=kube-apiserver-kubelet-client/O=system:masters",
            "extendedKeyUsage=clientAuth\n",
        ),
    ):
        (pki / f"{name}.ext").write_text(ext)
        _openssl(
            "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=pki
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
            cwd=pki,
        )


# -- the node ------------------------------------------------------------------------


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


def _pointer(name: str) -> str:
    """A resource name as one JSON Pointer token: nvidia.com/gpu -> nvidia.com~1gpu."""
    return name.replace("~", "~0").replace("/", "~1")


def _random_token() -> str:
    import base64

    return base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")


@dataclass
class RealNode:
    """One real node. ``prepare()`` before the control plane, ``start()`` after it."""

    name: str = "real-node-0"
    tools_bin: Path = Path(".tools/bin")
    base: Path = DEFAULT_BASE
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr))
    # Images the node has beside imagelib.STORE_IMAGES (pause, base, runtime),
    # imported at start (names in imagelib.BUILDERS).
    preload: Sequence[str] = ("operator",)
    tag: str = field(init=False, default="")
    root: Path = field(init=False)
    host_ip: str = field(init=False, default="")  # the host end of the veth: the API server
    node_ip: str = field(init=False, default="")  # the node end: kubelet's InternalIP
    gateway: str = field(init=False, default="")  # the bridge: CoreDNS, pods' gateway
    pod_cidr: str = field(init=False, default="")
    host_veth: str = field(init=False, default="")
    host_dummy: str = field(init=False, default="")
    netns_inode: int = field(init=False, default=0)
    images: dict[str, imagelib.Image] = field(init=False, default_factory=dict)
    startup_seconds: float = field(init=False, default=0.0)
    tokens: dict[str, str] = field(init=False, default_factory=dict)
    _holder: subprocess.Popen[bytes] | None = field(init=False, default=None)
    _init_pid: int = field(init=False, default=0)
    _procs: list[_Proc] = field(init=False, default_factory=list)
    _cgroups: list[Path] = field(init=False, default_factory=list)

    # -- before the control plane ----------------------------------------------------

    def prepare(self) -> RealNode:
        """Clean up after dead runs, make the namespaces, the veth and the certificates."""
        missing = missing_requirements(self.tools_bin)
        if missing:
            raise NodeError(f"a real node needs {missing}; run `make tools` as root")
        began = time.monotonic()
        clean_stale(self.base, self.log)
        k = 0
        while (self.base / f"{NODE_PREFIX}{os.getpid()}-{k}").exists():
            k += 1
        self.tag = f"{NODE_PREFIX}{os.getpid()}-{k}"
        self.root = self.base / self.tag
        self.root.mkdir(parents=True)
        self.host_veth = f"dlk{os.getpid()}n{k}"
        self.host_dummy = f"dlk{os.getpid()}a{k}"
        for key in ("kubelet", "kube-proxy", "coredns"):
            self.tokens[key] = _random_token()
        try:
            self._start_holder()
            self._setup_network()
            _make_pki(self.root / "pki", self.name, self.node_ip)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def token_lines(self) -> list[str]:
        """Lines for the API server's token file: the node's components' identities."""
        return [
            f'{self.tokens["kubelet"]},system:node:{self.name},node-{self.name},"system:nodes"',
            f"{self.tokens['kube-proxy']},system:kube-proxy,kube-proxy-uid",
            f"{self.tokens['coredns']},dlk8s:coredns,coredns-uid",
        ]

    def apiserver_flags(self) -> list[str]:
        pki = self.root / "pki"
        return [
            f"--bind-address={self.host_ip}",
            f"--advertise-address={self.host_ip}",
            # Namespaces annotated by real_namespace() send every pod of theirs
            # here: pods that nobody can change (the smoke TFJob of `helm
            # test`, a job's replicas) get the node selector and toleration
            # from their namespace. Other namespaces are left as they are.
            "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        ]

    def _start_holder(self) -> None:
        argv = [
            "unshare",
            "--pid",
            "--mount",
            "--net",
            "--cgroup",
            "--fork",
            "--kill-child=SIGKILL",
            "--mount-proc",
            "--propagation",
            "private",
            sys.executable,
            "-m",
            "dlk8s_dev.realnode",
            "init",
            str(self.root),
        ]
        for path in PRIVATE_DIRS:  # mount points must exist (empty, standard folders)
            Path(path).mkdir(parents=True, exist_ok=True)
        log = self.root / "logs" / "init.log"
        log.parent.mkdir(parents=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]
        )
        with log.open("wb") as out:
            self._holder = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=self._holder_preexec(),
            )
        (self.root / "holder.pid").write_text(str(self._holder.pid))
        ready = self.root / "init.ready"
        deadline = time.monotonic() + 20
        while not ready.exists():
            if self._holder.poll() is not None:
                raise NodeError(f"node init exited: {log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise NodeError("timed out waiting for the node's namespaces")
            time.sleep(0.05)
        # The holder's one child is the namespaces' PID 1.
        children = Path(f"/proc/{self._holder.pid}/task/{self._holder.pid}/children").read_text()
        self._init_pid = int(children.split()[0])
        self.netns_inode = os.stat(f"/proc/{self._init_pid}/ns/net").st_ino

    def _holder_preexec(self) -> Callable[[], None]:
        """Die with us, and start in the node's cgroups (the cgroup namespace's root)."""
        die = die_with_parent()
        if not self._cgroups:
            self._cgroups = _make_cgroups(self.tag)
        paths = self._cgroups

        def preexec() -> None:
            die()
            _enter_cgroups(paths)

        return preexec

    def _in_node(self, *argv: str, net_only: bool = False) -> list[str]:
        ns = ["-n"] if net_only else ["-p", "-m", "-n", "-C"]
        return ["nsenter", "-t", str(self._init_pid), *ns, "--", *argv]

    def _ip(self, *args: str, node: bool = False) -> None:
        argv = ["ip", *args]
        if node:
            argv = self._in_node(*argv, net_only=True)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NodeError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def _free_subnet(self) -> int:
        """A k for 10.244.k.0/24 (pods) and 10.245.k.0/30 (veth) that nothing on the host uses."""
        used = (
            subprocess.run(
                ["ip", "-o", "route", "show", "table", "all"], capture_output=True, text=True
            ).stdout
            + subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        )
        for k in [*range(os.getpid() % 200, 250), *range(0, os.getpid() % 200)]:
            if f"10.244.{k}." not in used and f"10.245.{k}." not in used:
                return k
        raise NodeError("no free 10.244.k.0/24 for the node's pods")

    def _setup_network(self) -> None:
        for _ in range(5):
            k = self._free_subnet()
            self.host_ip, self.node_ip = f"10.245.{k}.1", f"10.245.{k}.2"
            self.gateway, self.pod_cidr = f"10.244.{k}.1", f"10.244.{k}.0/24"
            try:
                self._ip(
                    "link",
                    "add",
                    self.host_veth,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    str(self._init_pid),
                )
                self._ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_veth)
                break
            except NodeError:  # a concurrent run took it: try another
                subprocess.run(["ip", "link", "delete", self.host_veth], capture_output=True)
        else:
            raise NodeError("could not set up the node's veth")
        self._ip("link", "set", self.host_veth, "up")
        # The API server's address also sits on a link of its own that
        # outlives the node: the control plane stops after the node, and
        # while it runs its address must stay local (a vanished local address
        # would send every dial to it along the default route, off the
        # machine). A bridge with no ports: this kernel has no dummy links.
        _add_backstop()
        self._ip("link", "add", self.host_dummy, "type", "bridge")
        self._ip("addr", "add", f"{self.host_ip}/32", "dev", self.host_dummy)
        self._ip("link", "set", self.host_dummy, "up")
        # Likewise the node's subnets: once the veth (and its routes) is gone,
        # a late dial to a pod or to the kubelet ends on this portless link
        # instead of following the default route out.
        for subnet in (self.pod_cidr, f"{self.node_ip.rsplit('.', 1)[0]}.0/30"):
            self._ip("route", "add", subnet, "dev", self.host_dummy, "metric", "1000")
        for args in (
            ("addr", "add", f"{self.node_ip}/30", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("link", "add", BRIDGE, "type", "bridge"),
            ("addr", "add", f"{self.gateway}/24", "dev", BRIDGE),
            ("link", "set", BRIDGE, "up"),
            # Service IPs that node processes dial get DNATed by kube-proxy in
            # OUTPUT; they only need a route to exist. No default route.
            ("route", "add", SERVICE_CIDR, "dev", BRIDGE),
        ):
            self._ip(*args, node=True)
        # The host reaches pods (and CoreDNS on the gateway) through the veth.
        self._ip("route", "add", self.pod_cidr, "via", self.node_ip, "dev", self.host_veth)

    # -- after the control plane -------------------------------------------------------

    def start(self, cluster: LocalCluster) -> RealNode:
        began = time.monotonic()
        try:
            with ThreadPoolExecutor(3) as pool:
                # The big images come with the per-user store (linked in a
                # few seconds); the others are imported, each in a second or
                # two.
                store = pool.submit(imagelib.node_store, self.log)
                extra = [n for n in self.preload if n not in imagelib.STORE_IMAGES]
                wanted = [*imagelib.STORE_IMAGES, *extra]
                built = {n: pool.submit(imagelib.BUILDERS[n]) for n in wanted}
                self._write_configs(cluster)
                self._apply_rbac(cluster)
                linked = imagelib.link_store(store.result(), self.root / "containerd")
                if not linked:
                    self.log("[realnode] cannot link the image store here: importing every image")
                self._start_containerd()
                for n, fut in built.items():
                    self.images[n] = fut.result()
                loads = [
                    pool.submit(self.load_image, img)
                    for n, img in self.images.items()
                    if n in extra or not linked
                ]
                self._start_kubelet()
                self._start_proxy_and_dns()
                for load in loads:
                    load.result()
            self._wait(lambda: self._node_ready(cluster), 90, "the real node Ready")
            self._wait(self._dns_ready, 30, "CoreDNS ready")
        except BaseException:
            self.stop()
            raise
        took = time.monotonic() - began
        self.startup_seconds += took
        self.log(
            f"[realnode] {self.name} Ready in {self.startup_seconds:.1f}s "
            f"(pods {self.pod_cidr}, API at {self.host_ip}, images {sorted(self.images)})"
        )
        return self

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    def load_image(self, image: imagelib.Image) -> None:
        """Import an oci-archive into the node's containerd (namespace k8s.io),
        under its name and its ``local_name``."""
        ctr = ["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", "images"]
        for argv in (
            [*ctr, "import", str(image.archive)],
            [*ctr, "tag", "--force", image.name, image.local_name],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise NodeError(f"{' '.join(argv)}: {done.stderr}")

    def image(self, which: str) -> str:
        return self.images[which].name

    def load_command(self) -> str:
        """How to load another image into this node (an oci-archive, e.g. from
        `buildah push IMG oci-archive:FILE:NAME` or `skopeo copy`)."""
        return f"ctr --address {self.containerd_socket} -n k8s.io images import FILE"

    def namespace_annotations(self) -> dict[str, str]:
        """What makes a namespace's pods land here (see ``real_namespace``)."""
        toleration = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        return {
            "scheduler.alpha.kubernetes.io/node-selector": f"{LABEL_KEY}=true",
            "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps([toleration]),
        }

    def real_namespace(self, cluster: LocalCluster, name: str) -> str:
        """Create (or annotate) namespace ``name`` so that all its pods run here.

        The API server's PodNodeSelector and PodTolerationRestriction admission
        plugins add the node selector and the toleration of
        ``pod_placement()`` to every pod created in it.
        """
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "annotations": self.namespace_annotations()},
        }
        cluster.kubectl("apply", "-f", "-", input=json.dumps(namespace))
        return name

    def pod_placement(self) -> dict[str, Any]:
        """Pod spec fields that put a pod on this node (merge into ``spec``)."""
        return {
            "nodeSelector": {LABEL_KEY: "true"},
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        }

    # -- what tests give the node ------------------------------------------------------

    def advertise(self, cluster: LocalCluster, resources: Mapping[str, str]) -> None:
        """Offer extended resources, e.g. ``{"nvidia.com/gpu": "4"}``, with no device plugin.

        As Kubernetes documents it: a JSON patch of the node's
        ``status.capacity``. Returns once the kubelet has copied them into
        ``status.allocatable``, which only it does: it has taken them over
        (its status updates keep them) and the scheduler can place pods that
        ask for them.
        """
        patch = [
            {"op": "add", "path": f"/status/capacity/{_pointer(name)}", "value": str(count)}
            for name, count in resources.items()
        ]
        self._patch_status(cluster, patch)
        want = {name: str(count) for name, count in resources.items()}
        self._wait(
            lambda: self._resources(cluster, "allocatable", list(want)) == want,
            30,
            f"the kubelet to offer {want}",
        )

    def withdraw(self, cluster: LocalCluster, names: Sequence[str]) -> None:
        """Undo ``advertise``: from capacity and allocatable both, since the
        kubelet drops from allocatable only names outside ``*kubernetes.io/``."""
        patch = [
            {"op": "remove", "path": f"/status/{part}/{_pointer(name)}"}
            for name in names
            for part in ("capacity", "allocatable")
        ]
        self._patch_status(cluster, patch)

    def _patch_status(self, cluster: LocalCluster, patch: list[dict[str, str]]) -> None:
        cluster.kubectl(
            "patch", "node", self.name, "--subresource=status", "--type=json",
            "-p", json.dumps(patch),
        )  # fmt: skip

    def _resources(self, cluster: LocalCluster, part: str, names: Sequence[str]) -> dict[str, str]:
        """Of ``names``, those in the node's ``status.<part>``, with their counts."""
        node = json.loads(cluster.kubectl("get", "node", self.name, "-o", "json").stdout)
        found = node["status"].get(part) or {}
        return {name: found[name] for name in names if name in found}

    def host_dir(self, name: str) -> Path:
        """A folder on the node's host filesystem, e.g. for a hostPath volume.

        Inside the node's own folder, so ``stop()`` (or the next run's
        cleanup after a crash) removes it with everything else.
        """
        if not name or "/" in name or name in (".", ".."):
            raise NodeError(f"host_dir({name!r}): one plain folder name, please")
        path = self.root / "host" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _write_configs(self, cluster: LocalCluster) -> None:
        r = self.root
        for d in (
            "containerd",
            "containerd-state",
            "cni/net.d",
            "cni/ipam",
            "kubelet",
            "pod-logs",
            "volume-plugins",
            "opt",
        ):
            (r / d).mkdir(parents=True, exist_ok=True)
        for who in ("kubelet", "kube-proxy", "coredns"):
            cluster.write_kubeconfig(r / f"{who}.kubeconfig", self.tokens[who], user=who)
        pause = imagelib.pause_image().name
        (r / "containerd.toml").write_text(
            f"""version = 2
root = "{r / "containerd"}"
state = "{r / "containerd-state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{self.containerd_socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{r / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # This VM refuses a negative oom_score_adj; without this every sandbox
  # fails with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{r / "cni/net.d"}"
    max_conf_num = 1
"""
        )
        cni = {
            "cniVersion": "1.0.0",
            "name": "dlk8s",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr, "gateway": self.gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(r / "cni/ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (r / "cni/net.d/10-dlk8s.conflist").write_text(json.dumps(cni, indent=2))
        (r / "resolv.conf").write_text(f"nameserver {self.gateway}\n")
        pki = r / "pki"
        kubelet = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.node_ip,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "tlsCertFile": str(pki / "kubelet.crt"),
            "tlsPrivateKeyFile": str(pki / "kubelet.key"),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "cgroupDriver": "cgroupfs",
            # cgroup v1 here, QoS cgroups off: containerd puts each container
            # in /k8s.io/<id> of the node's cgroup namespace, i.e. below the
            # node's tagged cgroups on the host.
            "failCgroupV1": False,
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failSwapOn": False,
            "localStorageCapacityIsolation": False,
            "podLogsDir": str(r / "pod-logs"),
            "volumePluginDir": str(r / "volume-plugins"),
            "resolvConf": str(r / "resolv.conf"),
            "clusterDNS": [self.gateway],
            "clusterDomain": CLUSTER_DOMAIN,
            "registerWithTaints": [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}],
            "serializeImagePulls": False,
            # Images come from local archives and cannot be pulled again:
            # never collect them, never evict for disk.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "maxPods": 110,
            "nodeStatusUpdateFrequency": "5s",
            "syncFrequency": "10s",
        }
        (r / "kubelet.yaml").write_text(yaml.safe_dump(kubelet))
        proxy = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(r / "kube-proxy.kubeconfig")},
            "mode": "iptables",
            "hostnameOverride": self.name,
            "clusterCIDR": self.pod_cidr,
            "bindAddress": self.node_ip,
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # Global conntrack sysctls are the host's: leave them alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
        }
        (r / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy))
        (r / "Corefile").write_text(
            f""".:53 {{
    bind {self.gateway}
    errors
    ready {self.gateway}:8181
    # Nothing is forwarded: names outside the cluster do not exist here.
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {self.gateway}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {r / "coredns.kubeconfig"} local
        pods insecure
        ttl 5
    }}
    cache 5
    loadbalance
}}
"""
        )

    def _apply_rbac(self, cluster: LocalCluster) -> None:
        rbac = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": "dlk8s:coredns"},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "resources": ["endpoints", "services", "pods", "namespaces"],
                            "verbs": ["list", "watch"],
                        },
                        {
                            "apiGroups": ["discovery.k8s.io"],
                            "resources": ["endpointslices"],
                            "verbs": ["list", "watch"],
                        },
                    ],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": "dlk8s:coredns"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "dlk8s:coredns",
                    },
                    "subjects": [
                        {
                            "apiGroup": "rbac.authorization.k8s.io",
                            "kind": "User",
                            "name": "dlk8s:coredns",
                        }
                    ],
                },
            ],
        }
        cluster.kubectl("apply", "-f", "-", input=json.dumps(rbac))

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = self.root / "logs" / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                self._in_node(*argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
                preexec_fn=self._holder_preexec(),
            )
        self._procs.append(_Proc(name, popen, log))

    def _start_containerd(self) -> None:
        self._spawn("containerd", ["containerd", "--config", str(self.root / "containerd.toml")])
        self._wait(self.containerd_socket.exists, 30, "containerd's socket")

    def _start_kubelet(self) -> None:
        r = self.root
        self._spawn(
            "kubelet",
            [
                str(self.tools_bin.resolve() / "kubelet"),
                f"--config={r / 'kubelet.yaml'}",
                f"--kubeconfig={r / 'kubelet.kubeconfig'}",
                f"--root-dir={r / 'kubelet'}",
                f"--cert-dir={r / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.node_ip}",
                f"--node-labels={LABEL_KEY}=true,type=real",
                "--v=1",
            ],
        )

    def _start_proxy_and_dns(self) -> None:
        r = self.root
        bin_ = self.tools_bin.resolve()
        self._spawn("kube-proxy", [str(bin_ / "kube-proxy"), f"--config={r / 'kube-proxy.yaml'}"])
        self._spawn("coredns", [str(bin_ / "coredns"), "-conf", str(r / "Corefile")])

    def _node_ready(self, cluster: LocalCluster) -> bool:
        out = cluster.kubectl(
            "get",
            "node",
            self.name,
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
            check=False,
        )
        return out.returncode == 0 and out.stdout.strip() == "True"

    def _dns_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.gateway}:8181/ready", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.popen.poll() is not None:
                    tail = proc.log.read_text(errors="replace")[-3000:]
                    raise NodeError(f"{proc.name} exited {proc.popen.returncode}:\n{tail}")
            if predicate():
                return
            time.sleep(0.2)
        raise NodeError(f"timed out after {timeout}s waiting for {what}")

    # -- stop ----------------------------------------------------------------------------

    def stop(self, keep_api_address: bool = False) -> None:
        """End every process, then remove cgroups and the folder; the kernel does the rest.

        ``keep_api_address``: leave the API server's address (the dummy link)
        for a control plane that still runs; ``release()`` removes it after.
        """
        # The API server's clients first, each by SIGTERM: closing their
        # connections while the network is there lets the API server stop at
        # once later (it waits a long time for peers that just vanished).
        clients = [p for p in self._procs if p.name != "containerd"]
        for proc in clients:
            for pid in _children(proc.popen.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        for proc in clients:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)
        if self._init_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._init_pid, signal.SIGTERM)
        if self._holder is not None:
            try:
                self._holder.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._holder.kill()  # --kill-child takes PID 1 and so everything with it
                self._holder.wait()
        for proc in self._procs:
            try:
                proc.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        self._procs.clear()
        self._holder = None
        self._init_pid = 0
        if not self.tag:
            return
        if self.host_veth in _host_links():
            subprocess.run(["ip", "link", "delete", self.host_veth], capture_output=True)
        if not keep_api_address:
            self.release()
        _remove_cgroups(self.tag)
        if self.root.exists():
            for point in reversed(_mounts_under(self.root)):
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)
            shutil.rmtree(self.root, ignore_errors=True)

    def release(self) -> None:
        """Remove the API server's address (once no control plane uses it)."""
        if self.host_dummy and self.host_dummy in _host_links():
            subprocess.run(["ip", "link", "delete", self.host_dummy], capture_output=True)
        if not any(HOST_LINK_RE.match(name) for name in _host_links()):
            _remove_backstop()  # the last node of any run on this machine is gone

    def leftovers(self) -> dict[str, list[str]]:
        """What of this node still exists on the machine (all empty after ``stop()``)."""
        found: dict[str, list[str]] = {}
        found["processes"] = [
            f"{pid} {cmd}" for pid, cmd in _processes_of(self.root, self.tag, self.netns_inode)
        ]
        found["mounts"] = _mounts_under(self.root)
        found["netns"] = [
            f"/run/netns/{n.name}"
            for n in (Path("/run/netns").iterdir() if Path("/run/netns").is_dir() else [])
            if self.tag in n.name
        ]
        links = _host_links()
        found["links"] = [n for n in links if n in (self.host_veth, self.host_dummy)]
        found["bridges"] = [n for n in links if n == BRIDGE]
        if not any(HOST_LINK_RE.match(name) for name in links):
            found["routes"] = _backstop_routes()
        save = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        found["iptables"] = [
            line for line in save.splitlines() if self.pod_cidr in line or self.host_veth in line
        ]
        found["cgroups"] = [str(d) for d in _cgroup_dirs(self.tag)]
        found["folders"] = [str(self.root)] if self.root.exists() else []
        return {k: v for k, v in found.items() if v}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    init = sub.add_parser("init", help="(internal) PID 1 of a node's namespaces")
    init.add_argument("root", type=Path)
    clean = sub.add_parser("clean", help="remove what nodes of dead runs left")
    clean.add_argument("--base", type=Path, default=DEFAULT_BASE)
    args = parser.parse_args(argv)
    if args.cmd == "init":
        return _init_main(args.root)
    removed = clean_stale(args.base, print)
    if not removed:
        print("nothing to clean")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
