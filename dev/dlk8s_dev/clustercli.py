"""`make cluster`: the local cluster (with a real node: --real-node), until a signal stops it.

It prints how to use the cluster, then waits. Ctrl-C, SIGTERM or SIGHUP
stops it and removes everything it started (stopping.py says how a second
and a third signal are taken); the last line says what was removed.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence

from .localcluster import DEFAULT_NODES, REAL_NAMESPACE, LocalCluster, NodeSpec, pinned_versions
from .multicluster import MultiCluster
from .stopping import GRACE, Run, run_until_signal


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def stop_hint(what: str) -> str:
    """The first line of `make cluster` and `make demo`: how to stop them."""
    return (
        f"{what}: Ctrl-C (or `kill {os.getpid()}`, SIGTERM or SIGHUP) stops it and removes "
        f"everything it started; a second Ctrl-C shows the time left, a third (or "
        f"{GRACE:.0f} s) kills what is left at once and still removes its files"
    )


def describe(cluster: LocalCluster) -> str:
    """How to use the cluster: its kubeconfig, and with a real node how to run pods there."""
    lines = [f"export KUBECONFIG={cluster.kubeconfig}"]
    if cluster.kueue_process is not None:
        lines.append(
            f"# Kueue {pinned_versions().get('KUEUE_VERSION', '')} runs (pid "
            f"{cluster.kueue_process.pid}), ready for ResourceFlavors, ClusterQueues and "
            "LocalQueues; its log: " + str(cluster.kueue_process.log_file)
        )
    node = cluster.node
    if node is None:
        return "\n".join(lines)
    # The chart's usual namespace: every pod there (the operator, the `helm
    # test` pod and its smoke TFJob) goes to the real node.
    node.real_namespace(cluster, REAL_NAMESPACE)
    annotations = " ".join(f"{k}='{v}'" for k, v in node.namespace_annotations().items())
    local = ", ".join(sorted(i.local_name for i in node.images.values()))
    lines += [
        f"export PATH={cluster.tools_bin}:$PATH",
        f"# A real node, {node.name}, runs containers beside the kwok nodes. Its images:",
        f"#   {local}",
        f"# Every pod of namespace {REAL_NAMESPACE} runs there; so does the operator of",
        f"#   helm install dlk8s charts/dlk8s -n {REAL_NAMESPACE} --set cloud=gke "
        f"-f values/realnode.yaml --wait && helm test dlk8s -n {REAL_NAMESPACE}",
        "# Another namespace whose pods all go there:",
        f"#   kubectl create namespace NS && kubectl annotate namespace NS {annotations}",
        f"# (or give a pod {json.dumps(node.pod_placement())})",
        "# Load a local image into the node: an oci-archive, e.g. from",
        "# `buildah push IMG oci-archive:FILE:NAME` or `make image` (see README):",
        f"#   {node.load_command()}",
    ]
    return "\n".join(lines)


def serve(run: Run, cluster: LocalCluster) -> int:
    """Start ``cluster``, say how to use it, and keep it until asked to stop."""
    with run.keeping(cluster):
        cluster.start()
        print(describe(cluster), flush=True)
        say("the cluster is up; Ctrl-C stops it")
        run.wait()
        return 0


def serve_multikueue(run: Run, clusters: MultiCluster) -> int:
    """Start a manager and its workers with dlk8s on each, say how to reach
    them, and keep them until asked to stop."""
    with run.keeping(clusters):
        clusters.start()
        for name, cluster in clusters.clusters.items():
            print(f"# {name}: export KUBECONFIG={cluster.kubeconfig}", flush=True)
        print(
            "# Submit to the manager, in a namespace that exists on every cluster with a"
            " LocalQueue `team` (docs/multicluster.md): spec.managedBy:"
            " kueue.x-k8s.io/multikueue and the label kueue.x-k8s.io/queue-name: team",
            flush=True,
        )
        say("the manager and its workers are up; Ctrl-C stops them")
        run.wait()
        return 0


def main(
    argv: Sequence[str] | None = None,
    make_cluster: Callable[..., LocalCluster] = LocalCluster,
) -> int:
    """``make_cluster`` builds the cluster from LocalCluster's arguments (a seam for tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=len(DEFAULT_NODES))
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="also run a real node (containerd, kubelet, ...; needs root and `make tools`)",
    )
    parser.add_argument(
        "--kueue",
        action="store_true",
        help="also run Kueue's manager, its CRDs and webhooks installed (`make cluster KUEUE=1`)",
    )
    parser.add_argument(
        "--multikueue",
        action="store_true",
        help="a MultiKueue manager and two workers, each with Kueue and dlk8s, kwok nodes only"
        " (`make cluster MULTIKUEUE=1`; docs/multicluster.md)",
    )
    args = parser.parse_args(argv)
    nodes = [NodeSpec(f"kwok-node-{i}", gpu=args.gpus_per_node) for i in range(args.nodes)]

    def work(run: Run) -> int:
        if args.multikueue:
            return serve_multikueue(run, MultiCluster(interrupt=run.stopping))
        cluster = make_cluster(
            nodes=nodes, real_node=args.real_node, kueue=args.kueue, interrupt=run.stopping
        )
        return serve(run, cluster)

    return run_until_signal(work, say, stop_hint("make cluster"))


if __name__ == "__main__":
    raise SystemExit(main())
