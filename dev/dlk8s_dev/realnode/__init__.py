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
  which the kernel deletes with the namespace).

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

The package, by what each part manages; ``node.RealNode`` composes them:

- ``namespaces``: the holder, PID 1, the node's cgroups, entering them;
- ``network``: the veth, the pods' bridge, the API server's address, routes;
- ``processes``: containerd, kubelet, kube-proxy, CoreDNS, kube-network-policies;
- ``images``: the image store linked in, the other images imported;
- ``placement``: taint, label and namespaces that bring pods to the node,
  extended resources it offers;
- ``config``: its configuration files (from ``data/``);
- ``tools``: what the machine needs to run one.

Outside the package, because others use them too: nodeinit.py (PID 1,
which must stay small: it imports nodehost.py alone), nodehost.py (the
host's side: cgroups, links, routes, mounts; leftovers.py reads it too) and
nodepki.py (certificates). ``python -m dlk8s_dev.realnode clean`` removes
what dead runs left (__main__.py).
"""

from ..nodehost import NodeError
from .images import NodeImages
from .namespaces import NodeNamespaces
from .network import BRIDGE, NodeNetwork
from .node import CLUSTER_DOMAIN, IDENTITIES, RealNode
from .placement import LABEL_KEY, TAINT_KEY
from .processes import CRI_NOT_READY, NETPOL_METRICS, STOP_SIGNALS, NodeProcesses
from .tools import CNI_BIN, NETPOL, REQUIRED_COMMANDS, REQUIRED_TOOLS, missing_requirements

__all__ = [
    "BRIDGE",
    "CLUSTER_DOMAIN",
    "CNI_BIN",
    "CRI_NOT_READY",
    "IDENTITIES",
    "LABEL_KEY",
    "NETPOL",
    "NETPOL_METRICS",
    "REQUIRED_COMMANDS",
    "REQUIRED_TOOLS",
    "STOP_SIGNALS",
    "TAINT_KEY",
    "NodeError",
    "NodeImages",
    "NodeNamespaces",
    "NodeNetwork",
    "NodeProcesses",
    "RealNode",
    "missing_requirements",
]
