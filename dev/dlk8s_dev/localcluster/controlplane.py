"""What each server of the control plane runs with: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok's flags and files, and the
credentials they share (the service-account keys, the token file).
LocalCluster (cluster.py) starts them in this order."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .kwok import FAKE_NODE_ANNOTATION

# The API server's port in a cluster with a real node (apiserver_argv).
API_PORT_ON_NODE = 6443

# The controllers of kube-controller-manager a dlk8s cluster uses, not all
# of them: each one enabled watches (the garbage collector and the quota
# controller every resource) and costs CPU while the cluster lives, idle
# kcm 1.0 CPU-s a minute with all, 0.55 with these (issue 43). Owner
# references, namespaces and their ServiceAccounts and CA bundle, the
# chart's Deployment, Services' endpoints (CoreDNS and kube-proxy on the
# real node), pod GC, PodDisruptionBudgets (the Eviction API), nodes gone
# NotReady and NoExecute taints (make chaos), the chart's aggregated roles.
# No batch Jobs, StatefulSets, DaemonSets, volumes or HPAs run here.
CONTROLLERS: Final = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "deployment-controller",
    "replicaset-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "pod-garbage-collector-controller",
    "disruption-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "clusterrole-aggregation-controller",
)


def new_token() -> str:
    return base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")


def write_credentials(pki: Path, node_token_lines: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The service-account key pair and the API server's token file in ``pki``.

    Returns the admin's token and the components' (kcm, sched, kwok).
    """
    pki.mkdir()
    subprocess.run(
        ["openssl", "genrsa", "-out", str(pki / "sa.key"), "2048"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")],
        check=True,
        capture_output=True,
    )
    admin = new_token()
    kcm, sched, kwok = (new_token() for _ in range(3))
    # The controllers log in as the users the RBAC bootstrap policy grants
    # their permissions to, so RBAC is exercised as in a real cluster.
    (pki / "tokens.csv").write_text(
        f'{admin},admin,admin-uid,"system:masters"\n'
        f"{kcm},system:kube-controller-manager,kcm-uid\n"
        f"{sched},system:kube-scheduler,sched-uid\n"
        f'{kwok},kwok,kwok-uid,"system:masters"\n'
        + "".join(f"{line}\n" for line in node_token_lines)
    )
    return admin, {"kcm": kcm, "sched": sched, "kwok": kwok}


def etcd_argv(etcd: str, workdir: Path, client: int, peer: int) -> list[str]:
    return [
        etcd,
        "--name=default",
        f"--data-dir={workdir / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{client}",
        f"--advertise-client-urls=http://127.0.0.1:{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=default=http://127.0.0.1:{peer}",
        "--unsafe-no-fsync=true",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def apiserver_argv(
    apiserver: str,
    workdir: Path,
    etcd_port: int,
    port: int,
    address_flags: Sequence[str],
    profiling: bool,
    audited_groups: Sequence[str] = (),
) -> list[str]:
    pki = workdir / "pki"
    return [
        apiserver,
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        *address_flags,
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--token-auth-file={pki / 'tokens.csv'}",
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        f"--profiling={str(profiling).lower()}",
        # The benchmark creates thousands of objects at once; the
        # defaults (400/200) would make it measure apiserver throttling.
        "--max-requests-inflight=2000",
        "--max-mutating-requests-inflight=1000",
        "--event-ttl=1h",
        *audit_flags(workdir, audited_groups),
    ]


def audit_flags(workdir: Path, groups: Sequence[str]) -> list[str]:
    """kube-apiserver's flags for an audit log (workdir/audit.log, one JSON
    event a line) of the writes of these groups' users, with each request's
    user agent: what make chaos reads to tell two operators' writes apart."""
    if not groups:
        return []
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {
                "level": "Metadata",
                "userGroups": list(groups),
                "verbs": ["create", "update", "patch", "delete", "deletecollection"],
            },
            {"level": "None"},
        ],
    }
    path = workdir / "audit-policy.yaml"
    path.write_text(json.dumps(policy))  # JSON is YAML
    return [
        f"--audit-policy-file={path}",
        f"--audit-log-path={workdir / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-maxsize=0",
    ]


def controller_manager_argv(
    kcm: str,
    workdir: Path,
    kubeconfig: Path,
    port: int,
    ca_file: Path,
    gc_threshold: int,
    extra_controllers: Sequence[str] = (),
) -> list[str]:
    """`extra_controllers`: beyond CONTROLLERS, e.g. the job controller for
    a peer whose jobs are batch Jobs (bench's Trainer on JobSet)."""
    return [
        kcm,
        f"--kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        # Its metrics (make bench reads its controllers' work) to
        # anyone on 127.0.0.1, as its health checks already are.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={workdir / 'pki' / 'sa.key'}",
        f"--root-ca-file={ca_file}",
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        "--concurrent-gc-syncs=50",
        f"--terminated-pod-gc-threshold={gc_threshold}",
        f"--controllers={','.join((*CONTROLLERS, *extra_controllers))}",
    ]


def scheduler_config(kubeconfig: Path, max_backoff_seconds: int) -> dict[str, Any]:
    """The back-off is a config-file field only, and with a config file
    its values win over flags: everything goes here."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": max(1, max_backoff_seconds),
    }


def scheduler_argv(scheduler: str, config: Path, port: int) -> list[str]:
    return [scheduler, f"--config={config}", "--bind-address=127.0.0.1", f"--secure-port={port}"]


def kwok_argv(
    kwok: str, config: Path, kubeconfig: Path, server_port: int, node: str | None = None
) -> list[str]:
    """`node`: the one node this kwok plays (lostnode.py), else every fake node."""
    manage = (
        f"--manage-single-node={node}"
        if node
        else f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake"
    )
    return [
        kwok,
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        manage,
        "--cidr=10.0.0.1/16",
        "--node-ip=10.0.0.1",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{server_port}",
    ]
