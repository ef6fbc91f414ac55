"""What a real node needs from this machine: Debian's commands, the tools
`make tools` builds into .tools/bin, the CNI plugins, and root."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CNI_BIN = Path("/usr/lib/cni")
# The NetworkPolicy enforcer (tools/install.sh builds it with a patch for
# kernels without nftables' queue expression).
NETPOL = "kube-network-policies"

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
