"""RealNode: one real node beside the kwok nodes, made of the parts in this
package and started in two steps: ``prepare()`` before the control plane (its
folder, namespaces, network and certificates: the API server binds to its
address) and ``start(cluster)`` after it (configuration, images, processes,
until the node is Ready and CoreDNS answers).

On disk the node has one folder, ``/var/tmp/dlk8s-node-<pid>-<k>`` (the pid of
the process that started it; its owner marker, runs.py, says which process
that was), and cgroups named the same (below this process's cgroup in each
hierarchy). ``stop()`` removes them and says what it removed. What a run
that died left goes at the next start (leftovers.py), and nothing whose
owner is alive is touched.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import images as imagelib
from .. import nodehost as host
from .. import runs
from ..clusterapi import Cluster, says_ready
from ..nodehost import NODE_PREFIX, NodeError
from ..nodepki import make_pki
from ..runs import START_WAIT
from . import config, placement
from .images import NodeImages, load_command, load_into
from .namespaces import NodeNamespaces
from .network import BRIDGE, NodeNetwork
from .placement import TAINT_KEY
from .processes import NodeProcesses, containerd_socket
from .tools import CNI_BIN, NETPOL, missing_requirements

CLUSTER_DOMAIN = "cluster.local"
# Who the node's processes are to the API server (token_lines).
IDENTITIES = ("kubelet", "kube-proxy", "coredns", NETPOL)


def _random_token() -> str:
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
    startup_seconds: float = field(init=False, default=0.0)
    tokens: dict[str, str] = field(init=False, default_factory=dict)
    # The parts, by what each manages. The network exists from the start
    # (release() may come without a prepare()); the namespaces and the
    # processes from the moment prepare() has named the node.
    network: NodeNetwork = field(init=False, default_factory=NodeNetwork)
    namespaces: NodeNamespaces = field(init=False)
    processes: NodeProcesses = field(init=False)
    node_images: NodeImages = field(init=False)

    def __post_init__(self) -> None:
        self.node_images = NodeImages(self.preload, self.bare, self.log)

    # -- before the control plane ----------------------------------------------------

    def prepare(self) -> RealNode:
        """Make the node's folder, namespaces, veth and certificates.

        What dead runs left is gone by now: LocalCluster.start() removes it
        (leftovers.py) before the control plane and the node start.
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
        self.namespaces = NodeNamespaces(self.root, self.tag)
        self.processes = NodeProcesses(
            self.root, self.tag, self.tools_bin, self.namespaces, self.interrupt
        )
        self.root.mkdir(parents=True)
        runs.mark(self.root)
        self.network = NodeNetwork(f"dlk{os.getpid()}n{k}", f"dlk{os.getpid()}a{k}")
        for key in IDENTITIES:
            self.tokens[key] = _random_token()
        try:
            self.namespaces.start()
            self.network.setup(self.namespaces)
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

    # -- after the control plane -------------------------------------------------------

    def start(self, cluster: Cluster) -> RealNode:
        began = time.monotonic()
        try:
            with ThreadPoolExecutor(3) as pool:
                # The images are built (or found in the cache) while the
                # configuration is written; the store is linked in before
                # containerd starts, the rest imported once it runs.
                self.node_images.build(pool)
                self._write_configs(cluster)
                cluster.kubectl("apply", "-f", "-", input=config.node_rbac())
                self.node_images.link_store(self.root / "containerd")
                self.processes.start_containerd()
                loads = self.node_images.load(pool, self.containerd_socket)
                self.processes.start_kubelet(self.name, self.node_ip)
                self.processes.start_proxy_and_dns(self.name)
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

    def _write_configs(self, cluster: Cluster) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for who in IDENTITIES:
            cluster.write_kubeconfig(self.root / f"{who}.kubeconfig", self.tokens[who], user=who)
        config.write(
            config.NodeSettings(
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

    def _node_ready(self, cluster: Cluster) -> bool:
        status, node = cluster.api(f"/api/v1/nodes/{self.name}")
        return status == 200 and says_ready(node) is True

    def _dns_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.gateway}:8181/ready", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        self.processes.wait(predicate, timeout, what)

    # -- what callers see of the parts ---------------------------------------------------

    @property
    def host_ip(self) -> str:
        """The host end of the veth: the API server."""
        return self.network.host_ip

    @property
    def node_ip(self) -> str:
        """The node end of the veth: kubelet's InternalIP."""
        return self.network.node_ip

    @property
    def gateway(self) -> str:
        """The pods' bridge: CoreDNS, the pods' gateway."""
        return self.network.gateway

    @property
    def pod_cidr(self) -> str:
        return self.network.pod_cidr

    @property
    def netns_inode(self) -> int:
        return self.namespaces.netns_inode

    @property
    def images(self) -> dict[str, imagelib.Image]:
        return self.node_images.loaded

    @property
    def containerd_socket(self) -> Path:
        return containerd_socket(self.root)

    @property
    def netns(self) -> Path:
        """The node's network namespace, for what must listen inside it (registry.py)."""
        return self.namespaces.netns

    def load_image(self, image: imagelib.Image) -> None:
        """Import an oci-archive into the node's containerd (namespace k8s.io),
        under its name and its ``local_name``."""
        load_into(self.containerd_socket, image)

    def image(self, which: str) -> str:
        return self.images[which].name

    def load_command(self) -> str:
        """How to load another image into this node (an oci-archive, e.g. from
        `buildah push IMG oci-archive:FILE:NAME` or `skopeo copy`)."""
        return load_command(self.containerd_socket)

    def namespace_annotations(self) -> dict[str, str]:
        """What makes a namespace's pods land here (see ``real_namespace``)."""
        return placement.namespace_annotations()

    def real_namespace(self, cluster: Cluster, name: str) -> str:
        """Create (or annotate) namespace ``name`` so that all its pods run here.

        The API server's PodNodeSelector and PodTolerationRestriction admission
        plugins add the node selector and the toleration of
        ``pod_placement()`` to every pod created in it.
        """
        return placement.real_namespace(cluster, name)

    def pod_placement(self) -> dict[str, Any]:
        """Pod spec fields that put a pod on this node (merge into ``spec``)."""
        return placement.pod_placement()

    # -- what tests give the node ------------------------------------------------------

    def advertise(self, cluster: Cluster, resources: Mapping[str, str]) -> None:
        """Offer extended resources, e.g. ``{"nvidia.com/gpu": "4"}``, with no device plugin.

        As Kubernetes documents it: a JSON patch of the node's
        ``status.capacity``. Returns once the kubelet has copied them into
        ``status.allocatable``, which only it does: it has taken them over
        (its status updates keep them) and the scheduler can place pods that
        ask for them.
        """
        placement.advertise(cluster, self.name, resources, self._wait)

    def withdraw(self, cluster: Cluster, names: Sequence[str]) -> None:
        """Undo ``advertise``: from capacity and allocatable both, since the
        kubelet drops from allocatable only names outside ``*kubernetes.io/``."""
        placement.withdraw(cluster, self.name, names)

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

    # -- stop ----------------------------------------------------------------------------

    def stop(self, keep_api_address: bool = False) -> list[str]:
        """End every process, then remove cgroups and the folder; the kernel does the rest.

        ``keep_api_address``: leave the API server's address (the dummy link)
        for a control plane that still runs; ``release()`` removes it after.
        Returns what this call removed (and adds it to ``removed``).
        """
        if not self.tag:  # never prepared: nothing of it exists
            return []
        before = len(self.removed)
        removed = self.removed
        if self.namespaces.holder is not None:
            count = len(host.processes_of(self.root, self.tag, self.netns_inode))
            removed.append(
                f"the real node's {count} processes (containerd, kubelet, kube-proxy, "
                "CoreDNS, kube-network-policies, the pods) and its network, mount and PID "
                "namespaces"
            )
        self.processes.end()
        removed += self.network.remove_veth()
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

    def release(self) -> None:
        """Remove the API server's address (once no control plane uses it)."""
        self.removed += self.network.release()

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
        found |= self.network.leftovers()
        found["cgroups"] = [str(d) for d in host.cgroup_dirs(self.tag)]
        found["folders"] = [str(self.root)] if self.root.exists() else []
        return {k: v for k, v in found.items() if v}
