"""Kubeflow training-operator, the peer of the burst benchmark (`make bench`).

The version in tools/versions.env, built from its Go module by `make
tools-bench` with its CRDs, RBAC and webhook configuration from the same
module. It runs as a local process beside the local cluster, as Kueue does
(dev/dlk8s_dev/kueue.py), and otherwise as its standalone install runs it:
every kind enabled, its ClusterRole bound to its ServiceAccount in
``kubeflow`` (whose token its kubeconfig carries), its validating webhooks
registered with ``failurePolicy: Fail``, its default logging. Stock: its
defaults, 20 QPS (burst 30) and one reconcile thread; tuned: 1000 QPS
(burst 1500) and 8 threads. A fresh process for every measured run, so that
its CPU seconds and peak RSS (/proc) belong to that run.

Webhooks on, as users run it. It has no flag to turn them off, and it starts
its controllers only once its certificate rotator (cert-controller) is
ready: the rotator reads the Secret ``training-operator-webhook-cert`` in
``kubeflow`` (the install creates it empty), fills it with a CA and a
serving certificate for the Service's name, waits until ``tls.crt`` shows
in /tmp/k8s-webhook-server/serving-certs (in a pod, where the Secret is
mounted; its webhook server reads the same folder) and injects the CA into
the webhook configuration. A process on the host is behind no Service, and
the API server calls it at ``https://127.0.0.1:<port>/<path>``; so the
harness creates the Secret filled, with a CA made by nodepki and a serving
certificate for both the Service's name and 127.0.0.1, valid beyond the
rotator's 90-day lookahead, which the rotator checks and keeps (and still
injects). Each start copies the Secret's files to the fixed folder in a
mount namespace of the process's own (dev/dlk8s_dev/mountns.py), as the
kubelet would mount them. One change to its source
(tools/patches/training-operator-webhook-host.patch) adds a flag for the
webhook server's address, which otherwise listens on every interface.
``stop()`` ends it by pid and removes its folder; its log stays in the
benchmark's raw/ folder.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common.devtools import (
    ClusterError,
    LocalCluster,
    die_with_parent,
    free_port,
    http_ok,
    issue,
    make_ca,
    pinned_versions,
    with_files_at,
)

TRAINING_OPERATOR_VERSION = pinned_versions()["TRAINING_OPERATOR_VERSION"]
BINARY = "training-operator"
MANIFESTS = "training-operator-manifests"
# Its install's namespace, where the rotator looks for its Secret (its
# default without MY_POD_NAMESPACE); its Service's name, which the rotator's
# certificate names (<service>.<namespace>.svc); and the names main.go gives
# the Secret, the webhook configuration and the rotator's CA.
NAMESPACE = "kubeflow"
SERVICE_ACCOUNT = SERVICE = "training-operator"
SECRET = "training-operator-webhook-cert"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
CA_NAME = "training-operator-ca"
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
# The rotator renews what expires within 90 days.
CERT_DAYS = 400
CONTROLLER = "tfjob-controller"
# A TFJob only its validating webhook refuses, and its words.
REFUSAL = "must have at least one container with name tensorflow"
ROLES = {"MASTER": "Chief", "WORKER": "Worker", "PS": "PS"}


@dataclass(frozen=True)
class Settings:
    name: str
    qps: int
    burst: int
    threads: int


SETTINGS = {
    "stock": Settings("stock", qps=20, burst=30, threads=1),
    "tuned": Settings("tuned", qps=1000, burst=1500, threads=8),
}


def kubeflow_tfjob(job: dict[str, Any]) -> dict[str, Any]:
    """dlk8s's TFJob as training-operator's of the same shape: MASTER as
    Chief, the same replicas and pod templates, and dlk8s's default restart
    policy (ExitCode: training-operator's default is Never)."""
    specs = {
        ROLES[r["tfReplicaType"]]: {
            "replicas": r["replicas"],
            "restartPolicy": r.get("restartPolicy", "ExitCode"),
            "template": copy.deepcopy(r["template"]),
        }
        for r in job["spec"]["replicaSpecs"]
    }
    spec: dict[str, Any] = {"tfReplicaSpecs": specs}
    if "runPolicy" in job["spec"]:
        spec["runPolicy"] = copy.deepcopy(job["spec"]["runPolicy"])
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": job["metadata"]["name"]},
        "spec": spec,
    }


# --- its metrics (controller-runtime's), in the terms of dlk8s's --------------------

_REQUESTS = re.compile(
    r'^rest_client_requests_total\{[^}]*method="([^"]*)"[^}]*\} ([0-9.e+]+)$', re.M
)
_RECONCILES = re.compile(
    r'^controller_runtime_reconcile_total\{[^}]*controller="'
    + CONTROLLER
    + r'"[^}]*\} ([0-9.e+]+)$',
    re.M,
)
_DEPTH = re.compile(r'^workqueue_depth\{[^}]*name="' + CONTROLLER + r'"[^}]*\} ([0-9.e+]+)$', re.M)


def requests_of(metrics: str) -> Counter[tuple[str, str]]:
    """Its API requests by (verb, "*"): client-go counts them by method only."""
    counts: Counter[tuple[str, str]] = Counter()
    for method, value in _REQUESTS.findall(metrics):
        counts[(method, "*")] += int(float(value))
    return counts


def reconciles_of(metrics: str) -> int:
    return int(sum(float(v) for v in _RECONCILES.findall(metrics)))


def queue_depth_of(metrics: str) -> float:
    return sum(float(v) for v in _DEPTH.findall(metrics))


# --- what its install puts in the cluster ------------------------------------------------


def webhook_configuration(manifests: Path, base_url: str) -> dict[str, Any]:
    """Its ValidatingWebhookConfiguration under the name its kustomization
    gives it (the one the rotator injects into), each webhook at
    ``base_url`` + its path. No caBundle: the rotator's to inject."""
    doc = yaml.safe_load((manifests / "webhook" / "manifests.yaml").read_text())
    doc["metadata"]["name"] = WEBHOOK_CONFIGURATION
    for hook in doc["webhooks"]:
        hook["clientConfig"] = {"url": base_url + hook["clientConfig"]["service"]["path"]}
    return dict(doc)


def rbac(manifests: Path) -> list[dict[str, Any]]:
    """Its ServiceAccount, ClusterRole and binding, in its namespace."""
    docs = []
    for path in sorted((manifests / "rbac").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        if doc["kind"] == "ServiceAccount":
            doc["metadata"]["namespace"] = NAMESPACE
        for subject in doc.get("subjects", []):
            subject["namespace"] = NAMESPACE
    return docs


def make_certificates(pki: Path) -> dict[str, bytes]:
    """The Secret's data: a CA as the rotator makes one (an RSA key, its
    name as a DNS name) and a serving certificate for the Service's name and
    127.0.0.1."""
    make_ca(pki, CA_NAME, days=CERT_DAYS, rsa=True, alt_name=f"DNS:{CA_NAME}")
    name = f"{SERVICE}.{NAMESPACE}.svc"
    issue(
        pki, "tls", f"/CN={name}",
        f"subjectAltName=DNS:{name},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        days=CERT_DAYS,
    )  # fmt: skip
    return {f: (pki / f).read_bytes() for f in ("ca.crt", "ca.key", "tls.crt", "tls.key")}


def install(cluster: LocalCluster) -> None:
    """Its CRDs, namespace, RBAC and (once) its Secret; idempotent."""
    manifests = cluster.tools_bin / MANIFESTS
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(manifests / "crds"))
    crds = [
        f"crd/{p.stem.split('_', 1)[1]}.kubeflow.org"
        for p in (manifests / "crds").glob("kubeflow.org_*.yaml")
    ]
    cluster.wait_established(*crds)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    items = {"apiVersion": "v1", "kind": "List", "items": [namespace, *rbac(manifests)]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(items))
    found = cluster.kubectl("get", "secret", SECRET, "-n", NAMESPACE, check=False)
    if found.returncode == 0:
        return
    pki = Path(tempfile.mkdtemp(prefix="training-operator-pki-", dir=cluster.workdir))
    data = make_certificates(pki)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(secret))
    shutil.rmtree(pki)


# --- the process ------------------------------------------------------------------------


@dataclass
class TrainingOperator:
    """training-operator as a local process. start()/stop()."""

    cluster: LocalCluster
    settings: Settings
    log_path: Path
    start_timeout: float = 120
    dir: Path = field(init=False)
    popen: subprocess.Popen[bytes] | None = field(init=False, default=None)
    ports: dict[str, int] = field(init=False, default_factory=dict)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> TrainingOperator:
        for tool in (BINARY, MANIFESTS):
            if not (self.cluster.tools_bin / tool).exists():
                raise ClusterError(
                    f"{tool} missing in {self.cluster.tools_bin}: `make tools-bench`"
                )
        self.dir = Path(tempfile.mkdtemp(prefix="training-operator-", dir=self.cluster.workdir))
        try:
            install(self.cluster)
            self.ports = {k: free_port() for k in ("webhook", "metrics", "health")}
            self._register_webhooks()
            self._spawn(self._mount_secret())
            self._wait(
                lambda: http_ok(f"http://127.0.0.1:{self.ports['health']}/readyz"), "/readyz"
            )
            self._wait(self._workers_started, f"{CONTROLLER}'s workers")
            self._wait(self._webhook_refuses, "its webhook, through the API server")
            if not self._secret_kept():
                raise ClusterError(
                    "its rotator replaced the certificates: see " + str(self.log_path)
                )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM by pid (SIGKILL after 10 s), then its folder goes."""
        if self.popen is not None:
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.send_signal(signal.SIGTERM)
                try:
                    self.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.popen.kill()
                    self.popen.wait()
            self.popen = None
        if getattr(self, "dir", None) is not None and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)

    def metrics(self) -> str:
        try:
            url = f"http://127.0.0.1:{self.ports['metrics']}/metrics"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return str(resp.read().decode())
        except OSError:
            return ""

    # -- internals -----------------------------------------------------------

    def _register_webhooks(self) -> None:
        doc = webhook_configuration(
            self.cluster.tools_bin / MANIFESTS, f"https://127.0.0.1:{self.ports['webhook']}"
        )
        self.cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(doc))

    def _secret(self) -> dict[str, bytes]:
        out = self.cluster.kubectl("get", "secret", SECRET, "-n", NAMESPACE, "-o", "json")
        return {k: base64.b64decode(v) for k, v in json.loads(out.stdout)["data"].items()}

    def _mount_secret(self) -> Path:
        """The Secret's files in a folder, as the kubelet mounts them."""
        certs = self.dir / "certs"
        certs.mkdir()
        for key, data in self._secret().items():
            (certs / key).write_bytes(data)
        return certs

    def _secret_kept(self) -> bool:
        """The rotator found our certificates valid and left them alone."""
        return all(
            (self.dir / "certs" / key).read_bytes() == data for key, data in self._secret().items()
        )

    def _argv(self, certs: Path) -> list[str]:
        token = self.cluster.kubectl(
            "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=6h"
        ).stdout.strip()
        kubeconfig = self.cluster.write_kubeconfig(self.dir / "kubeconfig", token, SERVICE_ACCOUNT)
        s, ports = self.settings, self.ports
        binary = [
            str(self.cluster.tools_bin / BINARY),
            f"--kubeconfig={kubeconfig}",
            f"--kube-api-qps={s.qps}",
            f"--kube-api-burst={s.burst}",
            f"--controller-threads={s.threads}",
            "--webhook-server-host=127.0.0.1",
            f"--webhook-server-port={ports['webhook']}",
            f"--metrics-bind-address=127.0.0.1:{ports['metrics']}",
            f"--health-probe-bind-address=127.0.0.1:{ports['health']}",
        ]
        mnt = self.dir / "tmp-overlay"
        mnt.mkdir()
        return with_files_at(mnt, CERT_DIR, certs, binary)

    def _spawn(self, certs: Path) -> None:
        argv = self._argv(certs)
        # Not the cluster's KUBECONFIG, nor a namespace to keep to.
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBEFLOW_NAMESPACE")}
        self.log_path.unlink(missing_ok=True)
        with self.log_path.open("wb") as out:
            self.popen = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.dir, start_new_session=True, preexec_fn=die_with_parent(),
            )  # fmt: skip

    def _workers_started(self) -> bool:
        return any(
            "Starting workers" in line and CONTROLLER in line
            for line in self.log_path.read_text(errors="replace").splitlines()
        )

    def _webhook_refuses(self) -> bool:
        container = {"name": "not-tensorflow", "image": "busybox"}
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "webhook-probe", "namespace": NAMESPACE},
            "spec": {
                "tfReplicaSpecs": {"Chief": {"template": {"spec": {"containers": [container]}}}}
            },
        }
        done = self.cluster.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False
        )
        return done.returncode != 0 and REFUSAL in done.stderr

    def _wait(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.popen is not None and self.popen.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise ClusterError(f"training-operator exited {self.popen.returncode}:\n{tail}")
            if predicate():
                return
            time.sleep(0.3)
        raise ClusterError(f"timed out after {self.start_timeout}s waiting for {what}")
