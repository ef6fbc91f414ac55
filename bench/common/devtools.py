"""bench's only door into the development tooling, dlk8s_dev (dev/): every
name bench uses of it, each for a reason below. No other module of bench
imports ``dlk8s_dev`` (tests/unit/project/test_bench_layout.py).

- ``LocalCluster``, ``NodeSpec``, ``ClusterError``: the local control plane
  with its kwok nodes, and what its failures raise; ``losable_node``: a
  node whose kubelet (a kwok of its own) the chaos suite kills or stops
  (a ``LosableNode``);
- ``EXIT_CODE_ANNOTATION``, ``RUN_DURATION_ANNOTATION``: the annotations on
  which kwok ends a pod, after how long and with which exit code;
  ``USE_GRACE_ANNOTATION``: a pod kwok deletes only at its grace's end;
  ``END_REASON_ANNOTATION``, ``END_MESSAGE_ANNOTATION``: what kwok says of
  such an end instead of Error (a StartError and the runtime's words);
- ``Install``, ``install_chart``, ``OperatorProcess``: the chart installed on
  it, and the operator run as a local process with the chart's
  ServiceAccount and environment;
- ``Kueue``: Kueue's manager beside the cluster (the chaos suite kills it);
- ``MultiCluster``: a MultiKueue manager and its workers (bench.multikueue);
- ``REPO_ROOT``, ``pinned_versions``: the checkout (the chart's values, git)
  and tools/versions.env (the versions of training-operator and Kueue);
- ``free_port``, ``http_ok``, ``make_ca``, ``issue``, ``with_files_at``,
  ``die_with_parent``: what training-operator needs to run as a local
  process (its ports, its readiness, its webhook's certificates, made and
  mounted where it reads them, and its end with ours); the chaos suite's
  slow admission webhook makes its certificate with the same two;
- ``interrupt_on_termination``: SIGTERM and SIGHUP stop a run and its
  cluster as Ctrl-C does;
- ``TcpProxy``: a proxy between the operator and the API server that the
  chaos suite partitions.
"""

from __future__ import annotations

from dlk8s_dev.kueue import Kueue
from dlk8s_dev.localcluster import (
    END_MESSAGE_ANNOTATION,
    END_REASON_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    REPO_ROOT,
    RUN_DURATION_ANNOTATION,
    USE_GRACE_ANNOTATION,
    ClusterError,
    LocalCluster,
    LosableNode,
    NodeSpec,
    free_port,
    losable_node,
    pinned_versions,
)
from dlk8s_dev.localdeploy import Install, OperatorProcess, install_chart
from dlk8s_dev.mountns import with_files_at
from dlk8s_dev.multicluster import MultiCluster
from dlk8s_dev.nodepki import issue, make_ca
from dlk8s_dev.pdeath import die_with_parent
from dlk8s_dev.probes import http_ok
from dlk8s_dev.stopping import interrupt_on_termination
from dlk8s_dev.tcpproxy import TcpProxy

__all__ = [
    "END_MESSAGE_ANNOTATION",
    "END_REASON_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "REPO_ROOT",
    "RUN_DURATION_ANNOTATION",
    "USE_GRACE_ANNOTATION",
    "ClusterError",
    "Install",
    "Kueue",
    "LocalCluster",
    "LosableNode",
    "MultiCluster",
    "NodeSpec",
    "OperatorProcess",
    "TcpProxy",
    "die_with_parent",
    "free_port",
    "http_ok",
    "install_chart",
    "interrupt_on_termination",
    "issue",
    "losable_node",
    "make_ca",
    "pinned_versions",
    "with_files_at",
]
