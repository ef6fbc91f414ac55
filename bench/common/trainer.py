"""Kubeflow Trainer v2 with JobSet, the second peer of the burst benchmark
(`make bench`).

The versions in tools/versions.env, built from their Go modules by `make
tools-bench` with their CRDs, RBAC and webhook configurations from the same
modules (trainer_manifests.py renders what the cluster and their config
files get). Both managers run as local processes beside the local cluster,
as training-operator does (training_operator.py), and otherwise as their
installs run them: each with its own ServiceAccount (Trainer's in
``kubeflow-system``, JobSet's in ``jobset-system``) bound to its ClusterRole,
whose token its kubeconfig carries; their webhooks registered as shipped,
``failurePolicy: Fail`` (JobSet's pod webhooks with its objectSelector);
their default logging. The settings (trainer_manifests.SETTINGS): stock,
their defaults; tuned, 1000 QPS (burst 1500) and 8 concurrent reconciles for
both (a flag each, tools/patches/: neither config reaches the controllers'
concurrency). A fresh pair of processes for every measured run, so that their CPU
seconds and peak RSS (/proc) belong to that run; the peer's controller CPU
is the two summed.

Webhooks on, as users run them, each server on 127.0.0.1 with a certificate
for 127.0.0.1 that the harness makes (nodepki) and the webhook
configurations trust: both managers' own certificate management is off in
their config, which they document for certificates "provided externally".
JobSet reads them from the folder its config names; Trainer from
controller-runtime's default folder under the temporary directory, which
TMPDIR points into the process's own folder. JobSet serves its metrics over
HTTPS only, behind authentication: they are read with the admin's token.
``stop()`` ends both by pid and removes their folder; their logs stay in
the benchmark's raw/ folder.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import shutil
import signal
import ssl
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

from bench.common import trainer_manifests as m
from bench.common.devtools import (
    ClusterError,
    LocalCluster,
    die_with_parent,
    free_port,
    http_ok,
    issue,
    make_ca,
    pinned_versions,
)

VERSIONS = pinned_versions()
TRAINER_VERSION = VERSIONS["TRAINER_VERSION"]
JOBSET_VERSION = VERSIONS["JOBSET_VERSION"]
TRAINER, JOBSET = "trainer-controller-manager", "jobset-controller-manager"
TRAINER_MANIFESTS, JOBSET_MANIFESTS = "trainer-manifests", "jobset-manifests"
TOOLS = (TRAINER, JOBSET, TRAINER_MANIFESTS, JOBSET_MANIFESTS)
Settings = m.Settings
SETTINGS = m.SETTINGS


def install(cluster: LocalCluster, tfjob: dict[str, Any]) -> None:
    """Their CRDs, namespaces and RBAC; idempotent. The runtime of `tfjob`'s
    shape is created once Trainer's webhook answers (start())."""
    jobset, trainer = cluster.tools_bin / JOBSET_MANIFESTS, cluster.tools_bin / TRAINER_MANIFESTS
    crd = m.jobset_crd(jobset / "crd")
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(crd))
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-k", str(trainer / "crds")
    )  # fmt: skip
    cluster.wait_established(
        "crd/jobsets.jobset.x-k8s.io",
        *(f"crd/{_crd_name(p)}" for p in (trainer / "crds").glob("trainer.*.yaml")),
    )
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in (m.TRAINER_NAMESPACE, m.JOBSET_NAMESPACE)
    ]
    items += m.rbac(trainer / "rbac", m.TRAINER_NAMESPACE)
    items += m.rbac(jobset / "rbac", m.JOBSET_NAMESPACE, m.JOBSET_PREFIX)
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )


def _crd_name(path: Path) -> str:
    """trainer.kubeflow.org_trainjobs.yaml: trainjobs.trainer.kubeflow.org."""
    group, _, plural = path.stem.partition("_")
    return f"{plural}.{group}"


def make_certificates(pki: Path) -> tuple[Path, str]:
    """A CA and a serving certificate for 127.0.0.1 (certs/tls.{crt,key});
    the folder, and the CA as a caBundle."""
    (pki / "certs").mkdir(parents=True)
    make_ca(pki, "dlk8s-bench-trainer-ca")
    extensions = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    issue(pki, "serving", "/CN=127.0.0.1", extensions, key="certs/tls.key")
    (pki / "serving.crt").rename(pki / "certs" / "tls.crt")
    return pki / "certs", base64.b64encode((pki / "ca.crt").read_bytes()).decode()


@dataclass
class Trainer:
    """JobSet's and Trainer's managers as local processes, for TrainJobs of
    `tfjob`'s shape. start()/stop()."""

    cluster: LocalCluster
    settings: Settings
    log_dir: Path
    tfjob: dict[str, Any]
    label: str = "trainer"
    start_timeout: float = 180
    dir: Path = field(init=False)
    procs: dict[str, subprocess.Popen[bytes]] = field(init=False, default_factory=dict)
    ports: dict[str, int] = field(init=False, default_factory=dict)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    @property
    def pid(self) -> int:
        """Trainer's (the one a profile would look at)."""
        return self.procs[TRAINER].pid

    def log_path(self, binary: str) -> Path:
        return self.log_dir / f"{self.label}-{binary.split('-')[0]}.log"

    def start(self) -> Trainer:
        missing = [t for t in TOOLS if not (self.cluster.tools_bin / t).exists()]
        if missing:
            raise ClusterError(
                f"{', '.join(missing)} missing in {self.cluster.tools_bin}: `make tools-bench`"
            )
        self.dir = Path(tempfile.mkdtemp(prefix="trainer-", dir=self.cluster.workdir))
        try:
            install(self.cluster, self.tfjob)
            names = ("webhook", "metrics", "health")
            self.ports = {f"{w}-{n}": free_port() for w in ("jobset", "trainer") for n in names}
            certs, ca = make_certificates(self.dir / "pki")
            self._register_webhooks(ca)
            self._spawn(JOBSET, self._jobset_argv(certs))
            self._spawn(TRAINER, self._trainer_argv(certs))
            for who in ("jobset", "trainer"):
                url = f"http://127.0.0.1:{self.ports[who + '-health']}/readyz"
                self._wait(functools.partial(http_ok, url), f"{who}'s /readyz")
            self._wait(lambda: self._workers_started(JOBSET, "JobSet"), "JobSet's workers")
            self._wait(
                lambda: self._workers_started(TRAINER, "trainjob_controller"), "TrainJob's workers"
            )
            self._wait(self._runtime_applied, "the runtime, through Trainer's webhook")
            self._wait(self._jobs_admitted, "a TrainJob and a JobSet, through their webhooks")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM by pid (SIGKILL after 10 s), then their folder goes."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = {}
        if getattr(self, "dir", None) is not None and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)

    def metrics(self) -> str:
        """Both managers' metrics, one text (Trainer's over HTTP, JobSet's
        over HTTPS with the admin's token)."""
        return self._get(
            f"http://127.0.0.1:{self.ports.get('trainer-metrics')}/metrics"
        ) + self._get(
            f"https://127.0.0.1:{self.ports.get('jobset-metrics')}/metrics",
            token=self.cluster.token,
        )

    def requests(self) -> Counter[tuple[str, str]]:
        return Counter({(k, "*"): v for k, v in m.requests_of(self.metrics()).items()})

    # -- internals -----------------------------------------------------------

    def _get(self, url: str, token: str = "") -> str:
        context = None
        if url.startswith("https:"):
            context = ssl.create_default_context(cafile=str(self.dir / "pki" / "ca.crt"))
        request = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {token}"} if token else {}
        )
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as resp:
                return str(resp.read().decode())
        except OSError:
            return ""

    def _register_webhooks(self, ca: str) -> None:
        bin_ = self.cluster.tools_bin
        jobset = bin_ / JOBSET_MANIFESTS / "webhook"
        docs = m.webhook_configurations(
            jobset,
            {
                k: m.JOBSET_PREFIX + n
                for k, n in (
                    ("MutatingWebhookConfiguration", "mutating-webhook-configuration"),
                    ("ValidatingWebhookConfiguration", "validating-webhook-configuration"),
                )
            },
            f"https://127.0.0.1:{self.ports['jobset-webhook']}",
            ca,
            {
                "MutatingWebhookConfiguration": jobset / "patches" / "mutating-patch.yaml",
                "ValidatingWebhookConfiguration": jobset / "patches" / "validating-patch.yaml",
            },
        )
        trainer = bin_ / TRAINER_MANIFESTS / "webhook"
        docs += m.webhook_configurations(
            trainer,
            m.TRAINER_WEBHOOKS,
            f"https://127.0.0.1:{self.ports['trainer-webhook']}",
            ca,
            {
                "MutatingWebhookConfiguration": trainer / "patch_mutating.yaml",
                "ValidatingWebhookConfiguration": trainer / "patch_validating.yaml",
            },
        )
        items = {"apiVersion": "v1", "kind": "List", "items": docs}
        self.cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(items)
        )

    def _kubeconfig(self, account: str, namespace: str) -> Path:
        token = self.cluster.kubectl(
            "create", "token", account, "-n", namespace, "--duration=6h"
        ).stdout.strip()
        return self.cluster.write_kubeconfig(self.dir / f"{account}.kubeconfig", token, account)

    def _jobset_argv(self, certs: Path) -> list[str]:
        config = self.dir / "jobset-config.yaml"
        config.write_text(yaml.safe_dump(m.jobset_config(self.settings, self.ports, certs)))
        kubeconfig = self._kubeconfig(m.JOBSET_SERVICE_ACCOUNT, m.JOBSET_NAMESPACE)
        return [
            str(self.cluster.tools_bin / JOBSET),
            f"--kubeconfig={kubeconfig}",
            f"--config={config}",
            *m.jobset_flags(self.settings),
        ]

    def _trainer_argv(self, certs: Path) -> list[str]:
        config = self.dir / "trainer-config.yaml"
        config.write_text(yaml.safe_dump(m.trainer_config(self.settings, self.ports)))
        # controller-runtime's default certificate folder, under TMPDIR (_spawn).
        serving = self.dir / "tmp" / "k8s-webhook-server" / "serving-certs"
        serving.mkdir(parents=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(certs / name, serving / name)
        kubeconfig = self._kubeconfig(m.TRAINER_SERVICE_ACCOUNT, m.TRAINER_NAMESPACE)
        return [
            str(self.cluster.tools_bin / TRAINER),
            f"--kubeconfig={kubeconfig}",
            f"--config={config}",
            *m.trainer_flags(self.settings),
        ]

    def _spawn(self, binary: str, argv: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["TMPDIR"] = str(self.dir / "tmp")
        (self.dir / "tmp").mkdir(exist_ok=True)
        log_path = self.log_path(binary)
        log_path.unlink(missing_ok=True)
        with log_path.open("wb") as out:
            self.procs[binary] = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.dir, start_new_session=True, preexec_fn=die_with_parent(),
            )  # fmt: skip

    def _workers_started(self, binary: str, name: str) -> bool:
        """Its log says the controller `name` (or of kind `name`) started its workers."""
        return any(
            "Starting workers" in line and f'"{name}"' in line
            for line in self.log_path(binary).read_text(errors="replace").splitlines()
        )

    def _runtime_applied(self) -> bool:
        runtime = m.cluster_training_runtime(self.tfjob)
        done = self.cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input=json.dumps(runtime),
            check=False,
        )
        return done.returncode == 0

    def _jobs_admitted(self) -> bool:
        """A TrainJob and a JobSet pass their webhooks (dry run)."""
        job = m.trainjob(self.tfjob | {"metadata": {"name": "webhook-probe"}})
        job["metadata"]["namespace"] = m.TRAINER_NAMESPACE
        jobset = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "webhook-probe", "namespace": m.JOBSET_NAMESPACE},
            "spec": m.cluster_training_runtime(self.tfjob)["spec"]["template"]["spec"],
        }
        return all(
            self.cluster.kubectl(
                "create", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False
            ).returncode
            == 0
            for doc in (job, jobset)
        )

    def _wait(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for binary, proc in self.procs.items():
                if proc.poll() is not None:
                    tail = self.log_path(binary).read_text(errors="replace")[-3000:]
                    raise ClusterError(f"{binary} exited {proc.returncode}:\n{tail}")
            if predicate():
                return
            time.sleep(0.3)
        raise ClusterError(f"timed out after {self.start_timeout}s waiting for {what}")
