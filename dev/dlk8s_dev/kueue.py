"""Kueue's manager (sigs.k8s.io/kueue, tools/versions.env) beside the local control plane.

A local process, not a pod: most clusters here have kwok nodes only, whose
pods never run, and on the real node a Kueue pod would need an image built
here first. A process on the host works beside both, its webhooks reached as
envtest (and Kueue's own integration tests) reach theirs: webhook
configurations pointing at ``https://127.0.0.1:<port>/<path>`` with a CA made
here. Everything else is as a user installs it: the module's CRDs, its
webhook configurations (with the selectors its kustomization adds), and its
manager with a Configuration file, using the admin kubeconfig (so Kueue's
RBAC does not matter). ``stop()`` ends it by pid and removes its folder.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .clusterapi import Cluster, ClusterError
from .goruntime import server_env
from .mountns import with_files_at
from .nodepki import issue, make_ca
from .pdeath import die_with_parent
from .ports import free_port
from .probes import http_ok

NAMESPACE = "kueue-system"
# dlk8s's kinds, listed as users list them (docs/kueue.md): Kueue's pod
# webhook then leaves a queued job's pods to dlk8s.
EXTERNAL_FRAMEWORKS = tuple(
    f"{kind}.v1alpha1.dlk8s.io"
    for kind in ("TFJob", "MXJob", "Caffe2Job", "PaddleJob", "PyTorchJob")
)
# What tools/install.sh puts in the cache (and links into .tools/bin): the
# manager, and the module's config/components/{crd/bases,webhook} files.
BINARY = "kueue"
MANIFESTS = "kueue-manifests"
KUEUE_TOOLS = (BINARY, MANIFESTS)
# kustomize gives every object of Kueue's default install this prefix.
NAME_PREFIX = "kueue-"
# config/components/webhook/kustomization.yaml keeps the webhooks of pods,
# deployments and statefulsets away from these namespaces.
SYSTEM_NAMESPACES = ["kube-system", NAMESPACE]
SELECTED_WEBHOOKS = {
    f"{kind}{what}.kb.io" for kind in ("m", "v") for what in ("pod", "deployment", "statefulset")
}
# Kueue's own words when its validating webhook refuses a Workload.
MIN_COUNT_REFUSAL = "at most one podSet can use minCount"
# With internal certificates off, Kueue reads its metrics certificate from
# this fixed path (cmd/kueue/main.go), as a pod gets it from a mounted Secret.
METRICS_CERT_DIR = "/etc/kueue/metrics/certs"


KUEUE_API = "kueue.x-k8s.io/v1beta2"


def kueue_object(kind: str, name: str, spec: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    """One of Kueue's objects (a ResourceFlavor, a ClusterQueue, ...) as a manifest."""
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": meta, "spec": spec}


def missing_tools(tools_bin: Path) -> list[str]:
    return [t for t in KUEUE_TOOLS if not (tools_bin / t).exists()]


def webhook_configurations(
    manifests: Sequence[dict[str, Any]], base_url: str, ca_bundle: bytes
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, renamed as its install names them,
    each webhook at ``base_url`` + its path, trusting ``ca_bundle``."""
    out = []
    for doc in manifests:
        doc = copy.deepcopy(doc)
        doc["metadata"]["name"] = NAME_PREFIX + doc["metadata"]["name"]
        for hook in doc.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": base_url + path,
                "caBundle": base64.b64encode(ca_bundle).decode(),
            }
            if hook["name"] in SELECTED_WEBHOOKS:
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": SYSTEM_NAMESPACES,
                        }
                    ]
                }
        out.append(doc)
    return out


def refused_workload(namespace: str, name: str = "kueue-probe") -> dict[str, Any]:
    """A Workload that only Kueue's validating webhook refuses: two podSets with minCount."""
    template = {"spec": {"containers": [{"name": "c", "image": "pause"}]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podSets": [
                {"name": ps, "count": 2, "minCount": 1, "template": template}
                for ps in ("first", "second")
            ]
        },
    }


def make_serving_cert(pki: Path) -> None:
    """ca.crt, and certs/tls.crt + certs/tls.key for 127.0.0.1 signed by it."""
    (pki / "certs").mkdir(parents=True)
    make_ca(pki, "dlk8s-kueue-ca")
    issue(
        pki,
        "serving",
        "/CN=127.0.0.1",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        key="certs/tls.key",
    )
    (pki / "serving.crt").rename(pki / "certs" / "tls.crt")


@dataclass
class Kueue:
    """Kueue's manager for one LocalCluster. start()/stop(), or a context manager."""

    cluster: Cluster
    # Only batch/job: dlk8s will integrate as an external framework, and
    # every framework listed here is one more controller on 2 cores.
    frameworks: Sequence[str] = ("batch/job",)
    # The Configuration's waitForPodsReady (e.g. {"timeout": "5m"}); Kueue
    # turns it on by its mere presence, so None leaves it out.
    wait_for_pods_ready: dict[str, Any] | None = None
    # The Configuration's multiKueue section, on a MultiKueue manager
    # (multicluster.py): the kinds its generic adapter dispatches, how long
    # a lost worker keeps its jobs. None leaves it out.
    multi_kueue: dict[str, Any] | None = None
    start_timeout: float = 180
    dir: Path = field(init=False)
    popen: subprocess.Popen[bytes] | None = field(init=False, default=None)
    webhook_port: int = field(init=False, default=0)
    health_port: int = field(init=False, default=0)
    metrics_port: int = field(init=False, default=0)
    startup_seconds: float = field(init=False, default=0.0)

    @property
    def log(self) -> Callable[[str], None]:
        return self.cluster.log

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def manifests(self) -> Path:
        return self.cluster.tools_bin / MANIFESTS

    @property
    def log_file(self) -> Path:
        return self.dir / "kueue.log"

    def start(self) -> Kueue:
        missing = missing_tools(self.cluster.tools_bin)
        if missing:
            raise ClusterError(
                f"missing tools in {self.cluster.tools_bin}: {missing}; run `make tools`"
            )
        began = time.monotonic()
        self.dir = self.cluster.workdir / "kueue"
        self.dir.mkdir()
        try:
            make_serving_cert(self.dir / "pki")
            self._install_crds()
            self._spawn()
            self._wait(self._healthy, "Kueue /readyz")
            self._register_webhooks()
            self._wait(self._webhooks_answer, "Kueue's webhooks, through the API server")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self.log(f"[kueue] ready in {self.startup_seconds:.1f}s, pid {self.pid}")
        return self

    def stop(self) -> list[str]:
        """Unregister the webhooks, end the process by pid, remove the folder.
        Returns what it removed; stopping twice is harmless."""
        removed: list[str] = []
        if self.popen is not None:
            if self.popen.poll() is None:
                # Failing webhooks with nobody behind them would refuse
                # every pod: they go first, if the API server is still there.
                self.cluster.kubectl(
                    "delete",
                    "--ignore-not-found",
                    "--request-timeout=5s",
                    f"mutatingwebhookconfiguration/{NAME_PREFIX}mutating-webhook-configuration",
                    f"validatingwebhookconfiguration/{NAME_PREFIX}validating-webhook-configuration",
                    check=False,
                    timeout=20,
                )
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.log("[kueue] still running 10 s after SIGTERM: killed")
                self.popen.kill()
                self.popen.wait()
            removed.append(f"process kueue (pid {self.popen.pid})")
            self.popen = None
        if getattr(self, "dir", None) and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
            removed.append(str(self.dir))
        return removed

    def kill(self) -> None:
        """SIGKILL, as a node or the OOM killer ends a manager (bench/chaos/scenarios/kueue.py).
        Unlike stop(), it leaves the webhooks registered with nobody behind
        them, as a crashed Kueue's are (its Service without an endpoint), so
        that every call they catch fails until the next start(). To restart:
        stop() (which then only removes the folder), then start(), from a
        thread that outlives Kueue (it dies with the thread that started it)."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def __enter__(self) -> Kueue:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------

    def _install_crds(self) -> None:
        crds = str(self.manifests / "crd")
        # Server-side: the Workload CRD is too big for the last-applied annotation.
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
        self.cluster.wait_established("-f", crds)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(namespace))

    def _config(self) -> Path:
        self.webhook_port, self.health_port, self.metrics_port = (free_port() for _ in range(3))
        config: dict[str, Any] = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.dir / "pki" / "certs"),
            },
            "leaderElection": {"leaderElect": False},
            # Its own certificates are for a Service's DNS name, and it waits
            # to inject them into conversion webhooks the bases/ CRDs lack.
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {
                "frameworks": list(self.frameworks),
                "externalFrameworks": list(EXTERNAL_FRAMEWORKS),
            },
        }
        if self.wait_for_pods_ready is not None:
            config["waitForPodsReady"] = self.wait_for_pods_ready
        if self.multi_kueue is not None:
            config["multiKueue"] = self.multi_kueue
        path = self.dir / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _argv(self) -> list[str]:
        """Kueue in a mount namespace of its own, its metrics certificate
        at the fixed path (mountns.py)."""
        mnt = self.dir / "etc-overlay"
        mnt.mkdir()
        kueue = [
            str(self.cluster.tools_bin / BINARY),
            f"--config={self._config()}",
            f"--kubeconfig={self.cluster.kubeconfig}",
            # Its visibility API server wants certificates of its own and
            # exits the process on any error; nothing here asks it.
            "--feature-gates=VisibilityOnDemand=false",
        ]
        return with_files_at(mnt, METRICS_CERT_DIR, self.dir / "pki" / "certs", kueue)

    def _spawn(self) -> None:
        argv = self._argv()
        # Appended: a Kueue killed and started again (make chaos) keeps the
        # log of its earlier lives, which is where a fault's story is.
        with self.log_file.open("ab") as out:
            self.popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
                start_new_session=True,
                env=server_env(),
                preexec_fn=die_with_parent(),
            )

    def _healthy(self) -> bool:
        return http_ok(f"http://127.0.0.1:{self.health_port}/readyz")

    def _register_webhooks(self) -> None:
        # Once Kueue listens: registered earlier, its failing webhooks would
        # refuse every pod meanwhile.
        manifests = yaml.safe_load_all((self.manifests / "webhook.yaml").read_text())
        docs = webhook_configurations(
            [d for d in manifests if d],
            f"https://127.0.0.1:{self.webhook_port}",
            (self.dir / "pki" / "ca.crt").read_bytes(),
        )
        items = {"apiVersion": "v1", "kind": "List", "items": docs}
        self.cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(items))

    def _webhooks_answer(self) -> bool:
        """The API server calls the validating webhook, and Kueue refuses."""
        path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads?dryRun=All"
        status, answer = self.cluster.api(path, refused_workload(NAMESPACE))
        return status >= 400 and MIN_COUNT_REFUSAL in str(answer.get("message"))

    def _wait(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        interrupt = self.cluster.interrupt
        while time.monotonic() < deadline:
            if interrupt is not None and interrupt.is_set():
                raise ClusterError(f"asked to stop while waiting for {what}")
            if self.popen is not None and self.popen.poll() is not None:
                tail = self.log_file.read_text(errors="replace")[-3000:]
                raise ClusterError(f"kueue exited {self.popen.returncode}:\n{tail}")
            if predicate():
                return
            time.sleep(0.5)
        raise ClusterError(f"timed out after {self.start_timeout}s waiting for {what}")
