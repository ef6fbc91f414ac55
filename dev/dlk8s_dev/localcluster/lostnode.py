"""A fake node that can be lost the way a powered-off machine is, or cut
off from the API server for a while.

The cluster's kwok plays the kubelet of every node annotated as fake, and
goes on playing it whatever happens to the annotation (its informer filters
annotations on its side and never hears that a node stopped matching). So
such a node is played by a kwok of its own, managing it alone; killing that
process (by pid) leaves the node with nothing to confirm that a pod there
stopped: a pod deleted there stays Terminating, as on a node that no longer
answers, until the node and its pods are removed at the block's end.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..ports import free_port
from ..runs import START_WAIT
from . import processes
from .cluster import LocalCluster
from .controlplane import kwok_argv
from .kwok import FAKE_NODE_ANNOTATION, NodeSpec, node_manifest


@dataclass
class LosableNode:
    name: str
    process: processes.Process

    def lose(self) -> None:
        """Its kubelet is gone: SIGKILL, as a node's power cut ends it."""
        processes.end(self.process)

    @contextlib.contextmanager
    def cut_off(self) -> Iterator[None]:
        """Its kubelet cut off from the API server for the block (SIGSTOP: it
        renews nothing and confirms nothing, while its pods, as far as they
        know, run on), then back (SIGCONT), as a partition heals."""
        self.process.popen.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.popen.send_signal(signal.SIGCONT)


@contextlib.contextmanager
def losable_node(
    cluster: LocalCluster, spec: NodeSpec, labels: dict[str, str], taints: list[dict[str, str]]
) -> Iterator[LosableNode]:
    """The node `spec` with `labels` and `taints`, Ready, played by a kwok of its own."""
    node = node_manifest(spec)
    node["metadata"]["annotations"][FAKE_NODE_ANNOTATION] = "own"  # not the cluster's kwok's
    node["metadata"]["labels"] |= labels
    node["spec"]["taints"] = taints
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
    kwok, stages, kubeconfig = cluster.kwok_files()
    argv = kwok_argv(kwok, stages, kubeconfig, free_port(), node=spec.name)
    proc = processes.spawn(cluster.workdir, f"kwok-{spec.name}", argv)
    try:
        _wait_ready(cluster, spec.name, proc)
        yield LosableNode(spec.name, proc)
    finally:
        processes.stop_all([proc], grace=3)
        _remove(cluster, spec.name)


def _wait_ready(cluster: LocalCluster, name: str, proc: processes.Process) -> None:
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        status, node = cluster.api(f"/api/v1/nodes/{name}")
        if status == 200 and cluster.says_ready(node):
            return
        if proc.popen.poll() is not None:
            raise RuntimeError(f"kwok for {name} exited: see {proc.log}")
        time.sleep(0.2)
    raise TimeoutError(f"node {name} not Ready in {START_WAIT}s: see {proc.log}")


def _remove(cluster: LocalCluster, name: str) -> None:
    """The node, and (force: nothing confirms them) the pods bound to it."""
    pods = json.loads(
        cluster.kubectl(
            "get", "pods", "-A", "--field-selector", f"spec.nodeName={name}", "-o", "json"
        ).stdout
    )
    for pod in pods["items"]:
        meta = pod["metadata"]
        cluster.kubectl(
            "delete", "pod", meta["name"], "-n", meta["namespace"],
            "--force", "--grace-period=0", "--wait=false",
        )  # fmt: skip
    cluster.kubectl("delete", "node", name, "--wait=false")
