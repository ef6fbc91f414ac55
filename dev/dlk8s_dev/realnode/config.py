"""The real node's configuration files, written into its folder from ``data/``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .. import datafiles

# Folders the node's programs expect to exist.
FOLDERS = (
    "containerd",
    "containerd-state",
    "cni/net.d",
    "cni/ipam",
    "kubelet",
    "pod-logs",
    "volume-plugins",
    "opt",
    "registry-hosts",  # containerd's registry config_path (registry.py)
)


@dataclass(frozen=True)
class NodeSettings:
    """What one node's files say that another node's do not."""

    root: Path  # the node's folder: every path of its programs is below it
    name: str  # its Node object's name
    node_ip: str  # the kubelet's InternalIP, the node end of the veth
    gateway: str  # the pods' bridge address: CoreDNS and the pods' gateway
    pod_cidr: str
    socket: Path  # containerd's
    pause_image: str  # containerd's sandbox image, built here
    bridge: str  # the pods' bridge's name (in the node's network namespace)
    cni_bin: Path
    cluster_domain: str
    taint_key: str  # the node registers tainted with it


def write(settings: NodeSettings) -> None:
    """containerd.toml, the CNI conflist, kubelet.yaml, kube-proxy.yaml, Corefile, resolv.conf."""
    r = settings.root
    for d in FOLDERS:
        (r / d).mkdir(parents=True, exist_ok=True)
    values = {k: str(v) for k, v in vars(settings).items()}
    (r / "containerd.toml").write_text(datafiles.text("containerd.toml", **values))
    # CNI reads JSON only.
    cni = datafiles.yaml_doc("cni.yaml", **values)
    (r / "cni/net.d/10-dlk8s.conflist").write_text(json.dumps(cni, indent=2))
    (r / "resolv.conf").write_text(f"nameserver {settings.gateway}\n")
    for name in ("kubelet.yaml", "kube-proxy.yaml", "Corefile"):
        (r / name).write_text(datafiles.text(name, **values))


def node_rbac() -> str:
    """What CoreDNS and kube-network-policies may read (ClusterRoles and
    bindings), as JSON for kubectl."""
    return json.dumps(datafiles.yaml_doc("node-rbac.yaml"))
