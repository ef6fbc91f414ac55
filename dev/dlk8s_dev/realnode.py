"""A real node beside the kwok nodes: containerd, runc, CNI, kubelet, kube-proxy, CoreDNS,
and a NetworkPolicy enforcer.

Everything the node is lives in namespaces of its own, made by one holder
process (``unshare --pid --mount --net --fork``) whose PID 1 is
nodeinit.py:

- **PID namespace**: containerd, its shims, every container, kubelet,
  kube-proxy, CoreDNS and kube-network-policies run in it. When its PID 1
  dies the kernel kills all of them, so nothing outlives the node, however
  it stops. The holder dies with the process that started it
  (``PR_SET_PDEATHSIG``), and takes PID 1 with it (``unshare --kill-child``).
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
  CNI portmap plugin's iptables chains, kube-network-policies' nftables
  table (NetworkPolicy: a pod's new connections go through it, as on a
  cluster whose nodes run it as a DaemonSet), the node's sysctls (ip_forward,
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
the process that started it; its owner marker, runs.py, says which process
that was), and cgroups named the same (below this process's cgroup in each
hierarchy). ``stop()`` removes them and says what it removed. What a run
that died left goes at the next start (leftovers.py), and nothing whose
owner is alive is touched. Its configuration files come from ``data/``
(nodeconfig.py); its PID 1 is nodeinit.py; the host side of it (cgroups,
links, routes, mounts) nodehost.py.

The node registers with the taint ``dlk8s.io/real-node:NoSchedule`` and the
label ``dlk8s.io/real-node=true``, so the kwok-based tests never land on it
by accident; pods meant for it carry the toleration and node selector
(``RealNode.pod_placement()``), or are created in a namespace that
``RealNode.real_namespace()`` annotated, whose pods get both from the API
server's PodNodeSelector and PodTolerationRestriction admission plugins
(what a pod nobody can edit needs, such as `helm test`'s smoke TFJob).

Images (dlk8s_dev.images): the big ones (pause, base, runtime, pytorch, paddle) come with a
per-user containerd root in which they are already unpacked, hard-linked
into the node's own root at start (a few seconds, where importing the
runtime image takes a minute); the rest (the operator, rebuilt with every
edit of hooks/) are imported. Each is there under its hash tag and as
``localhost/dlk8s/<image>:local``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import images as imagelib
from . import nodeconfig, runs
from . import nodehost as host
from .goruntime import server_env
from .leftovers import clean_dead_runs
from .nodehost import HOST_LINK_RE, NODE_PREFIX, SERVICE_CIDR, NodeError
from .nodeinit import PRIVATE_DIRS, READY_FILE
from .nodepki import make_pki
from .pdeath import die_with_parent
from .runs import START_WAIT

if TYPE_CHECKING:
    from .localcluster import LocalCluster

DEFAULT_BASE = Path("/var/tmp")  # where nodes go unless DLK8S_DEV_SCRATCH says (runs.py)
TAINT_KEY = "dlk8s.io/real-node"
LABEL_KEY = "dlk8s.io/real-node"
BRIDGE = "dlk8s-br"
CLUSTER_DOMAIN = "cluster.local"
CNI_BIN = Path("/usr/lib/cni")
# The NetworkPolicy enforcer (tools/install.sh builds it with a patch for
# kernels without nftables' queue expression).
NETPOL = "kube-network-policies"
# Its metrics, on the node's own loopback (nothing reads them; the default
# would be every address of the node).
NETPOL_METRICS = "127.0.0.1:9080"
# Processes that need another signal than SIGTERM to stop cleanly:
# kube-network-policies removes its nftables table on SIGINT only.
STOP_SIGNALS = {NETPOL: signal.SIGINT}

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
REQUIRED_TOOLS = ("kubelet", "kube-proxy", "coredns", NETPOL)


def missing_requirements(tools_bin: Path) -> list[str]:
    """What this machine lacks to run a real node (empty when it can)."""
    missing = [t for t in REQUIRED_TOOLS if not (tools_bin / t).exists()]
    missing += [c for c in REQUIRED_COMMANDS if not shutil.which(c)]
    if not (CNI_BIN / "bridge").exists():
        missing.append(f"{CNI_BIN}/bridge (containernetworking-plugins)")
    if os.geteuid() != 0:
        missing.append("root")
    return missing


# -- the node ------------------------------------------------------------------------


# Who the node's processes are to the API server (token_lines).
IDENTITIES = ("kubelet", "kube-proxy", "coredns", NETPOL)

# What containerd's CRI answers before it serves (containerd 1.6 to 2.x).
CRI_NOT_READY = "server is not initialized yet"


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
    base: Path = field(default_factory=runs.node_base)
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr))
    # Images the node has beside imagelib.STORE_IMAGES (pause, base, runtime, pytorch, paddle),
    # imported at start (names in imagelib.BUILDERS).
    preload: Sequence[str] = ("operator",)
    # Only the pause image (no store, no preload): the node pulls every other
    # image from a registry, as a user's node does (registry.py, test_publish).
    bare: bool = False
    # Set when the run is asked to stop (a signal): a start still waiting
    # for the node gives up at once instead of finishing first.
    interrupt: threading.Event | None = None
    # What stop() and release() removed, to tell the user (LocalCluster
    # passes its own list, which then has it all).
    removed: list[str] = field(default_factory=list)
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
    # Kubelets started again because containerd's CRI was not ready (_respawned).
    _kubelet_retries: int = field(init=False, default=0)

    # -- before the control plane ----------------------------------------------------

    def prepare(self) -> RealNode:
        """Make the node's folder, namespaces, veth and certificates.

        What dead runs left is gone by now: LocalCluster.start() removes it
        (deadruns.py) before the control plane and the node start.
        """
        missing = missing_requirements(self.tools_bin)
        if missing:
            raise NodeError(f"a real node needs {missing}; run `make tools` as root")
        began = time.monotonic()
        k = 0
        while self._tag_in_use(f"{NODE_PREFIX}{os.getpid()}-{k}"):
            k += 1
        self.tag = f"{NODE_PREFIX}{os.getpid()}-{k}"
        self.root = self.base / self.tag
        self.root.mkdir(parents=True)
        runs.mark(self.root)
        self.host_veth = f"dlk{os.getpid()}n{k}"
        self.host_dummy = f"dlk{os.getpid()}a{k}"
        for key in IDENTITIES:
            self.tokens[key] = _random_token()
        try:
            self._start_holder()
            self._setup_network()
            make_pki(self.root / "pki", self.name, self.node_ip)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _tag_in_use(self, tag: str) -> bool:
        # Not the folder alone: a node of ours whose folder went early (a
        # cleanup, a hand) still runs under that tag, and stop() of a node
        # that shared it would count that node's processes as its own.
        root = self.base / tag
        return root.exists() or bool(host.cgroup_dirs(tag)) or bool(host.processes_of(root, tag))

    def token_lines(self) -> list[str]:
        """Lines for the API server's token file: the node's components' identities."""
        return [
            f'{self.tokens["kubelet"]},system:node:{self.name},node-{self.name},"system:nodes"',
            f"{self.tokens['kube-proxy']},system:kube-proxy,kube-proxy-uid",
            f"{self.tokens['coredns']},dlk8s:coredns,coredns-uid",
            f"{self.tokens[NETPOL]},dlk8s:network-policies,network-policies-uid",
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
            "dlk8s_dev.nodeinit",
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
        ready = self.root / READY_FILE
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
            self._cgroups = host.make_cgroups(self.tag)
        paths = self._cgroups

        def preexec() -> None:
            die()
            host.enter_cgroups(paths)

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
        host.add_backstop()
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
                store = None if self.bare else pool.submit(imagelib.node_store, self.log)
                extra = [n for n in self.preload if n not in imagelib.STORE_IMAGES]
                wanted = ["pause"] if self.bare else [*imagelib.STORE_IMAGES, *extra]
                built = {n: pool.submit(imagelib.BUILDERS[n]) for n in wanted}
                self._write_configs(cluster)
                self._apply_rbac(cluster)
                linked = store is not None and imagelib.link_store(
                    store.result(), self.root / "containerd"
                )
                if store is not None and not linked:
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
            self._wait(lambda: self._node_ready(cluster), START_WAIT, "the real node Ready")
            self._wait(self._dns_ready, START_WAIT, "CoreDNS ready")
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

    @property
    def netns(self) -> Path:
        """The node's network namespace, for what must listen inside it (registry.py)."""
        return Path(f"/proc/{self._init_pid}/ns/net")

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
        self.root.mkdir(parents=True, exist_ok=True)
        for who in IDENTITIES:
            cluster.write_kubeconfig(self.root / f"{who}.kubeconfig", self.tokens[who], user=who)
        nodeconfig.write(
            nodeconfig.NodeSettings(
                root=self.root,
                name=self.name,
                node_ip=self.node_ip,
                gateway=self.gateway,
                pod_cidr=self.pod_cidr,
                socket=self.containerd_socket,
                pause_image=imagelib.pause_image().name,
                bridge=BRIDGE,
                cni_bin=CNI_BIN,
                cluster_domain=CLUSTER_DOMAIN,
                taint_key=TAINT_KEY,
            )
        )

    def _apply_rbac(self, cluster: LocalCluster) -> None:
        cluster.kubectl("apply", "-f", "-", input=nodeconfig.node_rbac())

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
                env=server_env(),
                preexec_fn=self._holder_preexec(),
            )
        self._procs.append(_Proc(name, popen, log))

    def _start_containerd(self) -> None:
        self._spawn("containerd", ["containerd", "--config", str(self.root / "containerd.toml")])
        self._wait(self.containerd_socket.exists, START_WAIT, "containerd's socket")

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
        self._spawn(
            NETPOL,
            [
                str(bin_ / NETPOL),
                f"--kubeconfig={r / f'{NETPOL}.kubeconfig'}",
                f"--hostname-override={self.name}",
                f"--metrics-bind-address={NETPOL_METRICS}",
                # Pod addresses from the API: NRI's socket would be the
                # host's (/run/nri is not the node's own), not this containerd's.
                "--disable-nri",
            ],
        )

    def _node_ready(self, cluster: LocalCluster) -> bool:
        status, node = cluster.api(f"/api/v1/nodes/{self.name}")
        return status == 200 and cluster.says_ready(node) is True

    def _dns_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.gateway}:8181/ready", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def _respawned(self, proc: _Proc) -> bool:
        """Starts the kubelet again if it ended only because containerd's CRI
        was not serving yet: containerd answers on its socket before its CRI
        plugin has recovered its state (longer under load), and the kubelet
        checks the CRI once at its start and exits 1. Anything else ends the start."""
        if proc.name != "kubelet" or self._kubelet_retries >= 20:
            return False
        if CRI_NOT_READY not in proc.log.read_text(errors="replace")[-3000:]:
            return False
        self._kubelet_retries += 1
        self._procs.remove(proc)
        time.sleep(0.5)
        self._start_kubelet()
        return True

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.interrupt is not None and self.interrupt.is_set():
                raise NodeError(f"asked to stop while waiting for {what}")
            for proc in list(self._procs):
                if proc.popen.poll() is not None and not self._respawned(proc):
                    tail = proc.log.read_text(errors="replace")[-3000:]
                    raise NodeError(f"{proc.name} exited {proc.popen.returncode}:\n{tail}")
            if predicate():
                return
            time.sleep(0.2)
        raise NodeError(f"timed out after {timeout}s waiting for {what}")

    # -- stop ----------------------------------------------------------------------------

    def stop(self, keep_api_address: bool = False) -> list[str]:
        """End every process, then remove cgroups and the folder; the kernel does the rest.

        ``keep_api_address``: leave the API server's address (the dummy link)
        for a control plane that still runs; ``release()`` removes it after.
        Returns what this call removed (and adds it to ``removed``).
        """
        before = len(self.removed)
        removed = self.removed
        if self._holder is not None:
            count = len(host.processes_of(self.root, self.tag, self.netns_inode))
            removed.append(
                f"the real node's {count} processes (containerd, kubelet, kube-proxy, "
                "CoreDNS, kube-network-policies, the pods) and its network, mount and PID "
                "namespaces"
            )
        self._end_processes()
        if not self.tag:
            return removed[before:]
        if self.host_veth in host.host_links():
            subprocess.run(["ip", "link", "delete", self.host_veth], capture_output=True)
            removed.append(f"link {self.host_veth}")
        if not keep_api_address:
            self.release()
        if host.cgroup_dirs(self.tag):
            host.remove_cgroups(self.tag)
            removed.append(f"cgroups {self.tag}")
        if self.root.exists():
            for point in reversed(host.mounts_under(self.root)):
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)
            size = runs.size_of(self.root)
            shutil.rmtree(self.root, ignore_errors=True)
            removed.append(f"{self.root} ({runs.human(size)})")
        return removed[before:]

    def _end_processes(self) -> None:
        # The API server's clients first, each by SIGTERM: closing their
        # connections while the network is there lets the API server stop at
        # once later (it waits a long time for peers that just vanished).
        clients = [p for p in self._procs if p.name != "containerd"]
        for proc in clients:
            for pid in host.children(proc.popen.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, STOP_SIGNALS.get(proc.name, signal.SIGTERM))
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
        self._kill_stragglers()

    def _kill_stragglers(self, timeout: float = 10) -> None:
        # What the PID namespace's end should have taken and did not (seen
        # once in CI: the holder and its init outlived stop()). Found by the
        # node's folder in the command line or its cgroups, never its network
        # namespace: that inode may already belong to someone else.
        if not self.tag:
            return
        deadline = time.monotonic() + timeout
        while left := host.processes_of(self.root, self.tag):
            for pid, _ in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return  # leftovers() names them; the rest of stop() still runs
            time.sleep(0.1)

    def release(self) -> None:
        """Remove the API server's address (once no control plane uses it)."""
        if self.host_dummy and self.host_dummy in host.host_links():
            subprocess.run(["ip", "link", "delete", self.host_dummy], capture_output=True)
            self.removed.append(f"link {self.host_dummy}")
        if not any(HOST_LINK_RE.match(name) for name in host.host_links()):
            host.remove_backstop()  # the last node of any run on this machine is gone

    def leftovers(self) -> dict[str, list[str]]:
        """What of this node still exists on the machine (all empty after ``stop()``)."""
        found: dict[str, list[str]] = {}
        found["processes"] = [
            f"{pid} {cmd}" for pid, cmd in host.processes_of(self.root, self.tag, self.netns_inode)
        ]
        found["mounts"] = host.mounts_under(self.root)
        found["netns"] = [
            f"/run/netns/{n.name}"
            for n in (Path("/run/netns").iterdir() if Path("/run/netns").is_dir() else [])
            if self.tag in n.name
        ]
        links = host.host_links()
        found["links"] = [n for n in links if n in (self.host_veth, self.host_dummy)]
        found["bridges"] = [n for n in links if n == BRIDGE]
        if not any(HOST_LINK_RE.match(name) for name in links):
            found["routes"] = host.backstop_routes()
        save = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        found["iptables"] = [
            line for line in save.splitlines() if self.pod_cidr in line or self.host_veth in line
        ]
        found["cgroups"] = [str(d) for d in host.cgroup_dirs(self.tag)]
        found["folders"] = [str(self.root)] if self.root.exists() else []
        return {k: v for k, v in found.items() if v}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("clean", help="remove what runs that no longer exist left")
    parser.parse_args(argv)
    if not clean_dead_runs(print):
        print("nothing to clean")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
