"""The node's network: the veth pair between the host and the node's network
namespace, the pods' bridge and routes inside it, and on the host the API
server's address on a link of its own, with the routes that keep late dials
on the machine.

The node namespace has no default route: a pod can reach other pods, the
node, Services (through kube-proxy) and the API server on the host end of
the veth, and nothing else. The host has no forwarding to do (it routes the
pod /24 to the veth, a route that goes with the device), so nothing leaves
the machine. The veth's host end is named ``dlk<pid>n<k>``; the kernel
deletes it with the namespace.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from .. import nodehost as host
from ..nodehost import SERVICE_CIDR, NodeError
from .namespaces import NodeNamespaces

# The pods' bridge, in the node's network namespace.
BRIDGE = "dlk8s-br"


def _ip(*args: str, inside: NodeNamespaces | None = None) -> None:
    argv = ["ip", *args]
    if inside is not None:
        argv = inside.enter(*argv, net_only=True)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NodeError(f"{' '.join(argv)}: {done.stderr.strip()}")


def _free_subnet() -> int:
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


@dataclass
class NodeNetwork:
    host_veth: str = ""  # the veth's host end, dlk<pid>n<k>
    host_dummy: str = ""  # the API server's address link, dlk<pid>a<k>
    host_ip: str = ""  # the host end of the veth: the API server
    node_ip: str = ""  # the node end: kubelet's InternalIP
    gateway: str = ""  # the bridge: CoreDNS, pods' gateway
    pod_cidr: str = ""

    def setup(self, namespaces: NodeNamespaces) -> None:
        with host.network_lock():
            self._add_veth(namespaces)
            host.add_backstop()
        _ip("link", "set", self.host_veth, "up")
        # The API server's address also sits on a link of its own that
        # outlives the node: the control plane stops after the node, and
        # while it runs its address must stay local (a vanished local address
        # would send every dial to it along the default route, off the
        # machine). A bridge with no ports: this kernel has no dummy links.
        _ip("link", "add", self.host_dummy, "type", "bridge")
        _ip("addr", "add", f"{self.host_ip}/32", "dev", self.host_dummy)
        _ip("link", "set", self.host_dummy, "up")
        # Likewise the node's subnets: once the veth (and its routes) is gone,
        # a late dial to a pod or to the kubelet ends on this portless link
        # instead of following the default route out.
        for subnet in (self.pod_cidr, f"{self.node_ip.rsplit('.', 1)[0]}.0/30"):
            _ip("route", "add", subnet, "dev", self.host_dummy, "metric", "1000")
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
            _ip(*args, inside=namespaces)
        # The host reaches pods (and CoreDNS on the gateway) through the veth.
        _ip("route", "add", self.pod_cidr, "via", self.node_ip, "dev", self.host_veth)

    def _add_veth(self, namespaces: NodeNamespaces) -> None:
        """The veth pair, its node end ``eth0`` in the node's namespace, on free subnets."""
        for _ in range(5):
            k = _free_subnet()
            self.host_ip, self.node_ip = f"10.245.{k}.1", f"10.245.{k}.2"
            self.gateway, self.pod_cidr = f"10.244.{k}.1", f"10.244.{k}.0/24"
            try:
                _ip(
                    "link",
                    "add",
                    self.host_veth,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    str(namespaces.init_pid),
                )
                _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_veth)
                return
            except NodeError:  # a concurrent run took it: try another
                subprocess.run(["ip", "link", "delete", self.host_veth], capture_output=True)
        raise NodeError("could not set up the node's veth")

    def remove_veth(self) -> list[str]:
        """The veth, if the end of the node's namespace has not taken it already."""
        if self.host_veth not in host.host_links():
            return []
        subprocess.run(["ip", "link", "delete", self.host_veth], capture_output=True)
        return [f"link {self.host_veth}"]

    def release(self) -> list[str]:
        """Remove the API server's address (once no control plane uses it)."""
        removed = []
        with host.network_lock():
            if self.host_dummy and self.host_dummy in host.host_links():
                subprocess.run(["ip", "link", "delete", self.host_dummy], capture_output=True)
                removed.append(f"link {self.host_dummy}")
            host.drop_unused_backstop()
        return removed

    def leftovers(self) -> dict[str, list[str]]:
        """What of the node's network is still on the host (all empty once it stopped)."""
        found: dict[str, list[str]] = {}
        links = host.host_links()
        found["links"] = [n for n in links if n in (self.host_veth, self.host_dummy)]
        found["bridges"] = [n for n in links if n == BRIDGE]
        with host.network_lock():
            found["routes"] = host.unused_backstop()
        save = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        found["iptables"] = [
            line for line in save.splitlines() if self.pod_cidr in line or self.host_veth in line
        ]
        return found
