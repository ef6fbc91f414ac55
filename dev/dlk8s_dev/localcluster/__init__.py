"""The local cluster: a real control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) with kwok's fake nodes, for tests,
the demo and the benchmark; a real node (realnode/) and Kueue (kueue.py)
join it on request.

- ``cluster``: LocalCluster, which starts and stops it all and is how
  callers reach the API server (kubectl, helm, api, kubeconfigs);
- ``controlplane``: each server's flags and files, and their credentials;
- ``processes``: the servers as processes (start, watch, restart, stop);
- ``kwok``: the fake nodes and the stages that move their pods;
- ``tools``: the tool chain it needs and the versions pinned.

The names below are what code outside (tests, bench/, the demo) imports
from ``dlk8s_dev.localcluster``.
"""

from ..clusterapi import ClusterError
from ..ports import free_port
from ..probes import http_ok as _http_ok
from ..runs import START_WAIT, WORKDIR_PREFIX
from .cluster import REAL_NAMESPACE, LocalCluster, leftover_processes, own_prefix, running_cluster
from .controlplane import API_PORT_ON_NODE, CONTROLLERS
from .kwok import (
    DEFAULT_NODES,
    END_MESSAGE_ANNOTATION,
    END_REASON_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    FAKE_NODE_ANNOTATION,
    RUN_DURATION_ANNOTATION,
    USE_GRACE_ANNOTATION,
    NodeSpec,
    node_manifest,
)
from .lostnode import LosableNode, losable_node
from .tools import (
    DEFAULT_TOOLS_BIN,
    REPO_ROOT,
    REQUIRED_TOOLS,
    VERSIONS_FILE,
    missing_tools,
    pinned_versions,
)

__all__ = [
    "API_PORT_ON_NODE",
    "CONTROLLERS",
    "DEFAULT_NODES",
    "DEFAULT_TOOLS_BIN",
    "END_MESSAGE_ANNOTATION",
    "END_REASON_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "FAKE_NODE_ANNOTATION",
    "REAL_NAMESPACE",
    "REPO_ROOT",
    "REQUIRED_TOOLS",
    "RUN_DURATION_ANNOTATION",
    "START_WAIT",
    "USE_GRACE_ANNOTATION",
    "VERSIONS_FILE",
    "WORKDIR_PREFIX",
    "ClusterError",
    "LocalCluster",
    "LosableNode",
    "NodeSpec",
    "_http_ok",
    "free_port",
    "leftover_processes",
    "losable_node",
    "missing_tools",
    "node_manifest",
    "own_prefix",
    "pinned_versions",
    "running_cluster",
]
