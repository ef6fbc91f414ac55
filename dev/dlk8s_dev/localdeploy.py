"""The chart installed on a local cluster, with the operator as a local process
or, on a real node, in the cluster from its image.

Under kwok no container runs, so the operator the chart deploys never acts.
Instead the operator runs here, with the chart's ServiceAccount token and the
chart's rendered config, which means the chart's RBAC and config are what is
really exercised. With a real node (``install_in_cluster``) the chart's own
Deployment runs it, from the image built here. Used by the end-to-end tests,
`make demo` and the benchmark.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dlk8s_dev.localcluster import REPO_ROOT, ClusterError, LocalCluster, free_port
from dlk8s_dev.nodepki import issue, make_ca

CHART = REPO_ROOT / "charts" / "dlk8s"
LOCAL_VALUES = REPO_ROOT / "values" / "local.yaml"
REALNODE_VALUES = REPO_ROOT / "values" / "realnode.yaml"
CONFIG_KEY = "controller_config_file.yaml"


@dataclass
class Install:
    """One release of the chart on the local cluster."""

    cluster: LocalCluster
    release: str
    namespace: str

    def deployment(self) -> dict[str, Any]:
        # Read in this process: an operator's start reads it several times.
        query = urllib.parse.urlencode(
            {"labelSelector": f"app.kubernetes.io/instance={self.release}"}
        )
        code, found = self.cluster.api(
            f"/apis/apps/v1/namespaces/{self.namespace}/deployments?{query}"
        )
        if code != 200:
            raise ClusterError(f"listing the operator's Deployment: {code} {found.get('message')}")
        items = found["items"]
        if len(items) != 1:
            raise ClusterError(f"expected one operator Deployment, found {len(items)}")
        deployment: dict[str, Any] = items[0]
        return deployment

    def pod_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment()["spec"]["template"]["spec"]
        return spec

    @property
    def service_account(self) -> str:
        return str(self.pod_spec()["serviceAccountName"])

    def operator_kubeconfig(self, path: Path, server: str = "") -> Path:
        """A kubeconfig that authenticates as the chart's ServiceAccount
        (through ``server`` instead of the API server's address, if given)."""
        token = self.cluster.kubectl(
            "create", "token", self.service_account, "-n", self.namespace, "--duration=6h"
        ).stdout.strip()
        return self.cluster.write_kubeconfig(path, token, user=self.service_account, server=server)

    def operator_env(self) -> dict[str, str]:
        """The DLK8S_* variables the chart sets on the operator container."""
        container = self.pod_spec()["containers"][0]
        return {
            e["name"]: e["value"]
            for e in container.get("env", [])
            if e["name"].startswith("DLK8S_") and "value" in e
        }

    def write_operator_config(self, directory: Path) -> Path:
        """Copy the chart's mounted ConfigMaps to files, pointing paths at the copies."""
        spec = self.pod_spec()
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        files: dict[str, Path] = {}
        for volume in spec["volumes"]:
            source = volume.get("configMap")
            if not source or volume["name"] not in mounts:
                continue
            cm = json.loads(
                self.cluster.kubectl(
                    "get", "configmap", source["name"], "-n", self.namespace, "-o", "json"
                ).stdout
            )
            for key, value in (cm.get("data") or {}).items():
                local = directory / volume["name"] / key
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text(value)
                files[f"{mounts[volume['name']].rstrip('/')}/{key}"] = local
        config_file = next(p for p in files.values() if p.name == CONFIG_KEY)
        config = yaml.safe_load(config_file.read_text()) or {}
        grpc = config.get("grpcServerFilePath")
        if grpc in files:
            config["grpcServerFilePath"] = str(files[grpc])
        config_file.write_text(yaml.safe_dump(config))
        return config_file


def install_chart(
    cluster: LocalCluster,
    release: str = "dlk8s",
    namespace: str = "dlk8s-system",
    sets: Sequence[str] = ("cloud=gke",),
    values: Sequence[Path] = (LOCAL_VALUES,),
    helm: str = "helm4",
    timeout: str = "180s",
) -> Install:
    # --take-ownership: the CRDs are cluster-wide and kept on uninstall, so a
    # cluster that saw another release (another test, an earlier demo) has them.
    argv = ["upgrade", "--install", release, str(CHART), "-n", namespace, "--create-namespace",
            "--take-ownership"]  # fmt: skip
    for path in values:
        argv += ["-f", str(path)]
    for item in sets:
        argv += ["--set", item]
    cluster.helm(*argv, "--wait", f"--timeout={timeout}", helm=helm)
    return Install(cluster, release, namespace)


def install_in_cluster(
    cluster: LocalCluster,
    release: str = "dlk8s",
    namespace: str = "dlk8s-system",
    sets: Sequence[str] = ("cloud=gke",),
    helm: str = "helm4",
    timeout: str = "180s",
) -> Install:
    """The chart with values/realnode.yaml: the operator runs on the real node.

    The release namespace is made one whose pods all go to the real node
    (RealNode.real_namespace), so the `helm test` smoke TFJob runs there too.
    Returns once the Deployment is Available (helm --wait).
    """
    if cluster.node is None:
        raise ClusterError("the operator runs in the cluster only on a real node")
    cluster.node.real_namespace(cluster, namespace)
    return install_chart(
        cluster, release, namespace, sets, (REALNODE_VALUES,), helm=helm, timeout=timeout
    )


def operator_pods(install: Install) -> list[dict[str, Any]]:
    """The operator's pods (not the `helm test` pod), oldest first."""
    out = install.cluster.kubectl(
        "get", "pods", "-n", install.namespace, "-o", "json",
        "-l", f"app.kubernetes.io/instance={install.release},app.kubernetes.io/component=operator",
    )  # fmt: skip
    pods: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return sorted(pods, key=lambda p: str(p["metadata"]["creationTimestamp"]))


def metrics_certs(cluster: LocalCluster) -> Path:
    """tls.crt and tls.key for 127.0.0.1 and ca.crt that signed them, made
    once per cluster: the local operators serve /metrics over TLS as the
    chart's pod does, so the tests go through the real path."""
    folder = cluster.workdir / "operators" / "metrics-pki"
    if (folder / "tls.crt").exists():
        return folder
    making = folder.with_name(f"{folder.name}.{os.getpid()}")
    making.mkdir(parents=True)
    make_ca(making, "dlk8s-metrics-ca")
    ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    issue(making, "tls", "/CN=127.0.0.1", ext, key="tls.key")
    # Another process may have made them first: theirs serve as well.
    with contextlib.suppress(OSError):
        making.rename(folder)
    return folder


@dataclass
class OperatorProcess:
    """`dlk8s-operator run` as a local process, configured like the chart's pod."""

    install: Install
    # Under the cluster's directory by default, so the leak check covers it.
    workdir: Path | None = None
    args: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    name: str = "operator"
    # The API server's address for it, when not the cluster's own: a proxy
    # in between (make chaos cuts the operator off there).
    server: str = ""
    popen: subprocess.Popen[bytes] | None = field(init=False, default=None)
    port: int = field(init=False, default=0)  # /metrics, over TLS
    probe_port: int = field(init=False, default=0)  # /healthz and /readyz
    certs: Path = field(init=False, default=Path())  # ca.crt verifies the metrics port

    def __post_init__(self) -> None:
        if self.workdir is None:
            self.workdir = self.install.cluster.workdir / "operators"

    @property
    def dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir

    @property
    def log_path(self) -> Path:
        return self.dir / f"{self.name}.log"

    def start(self, wait_ready: bool = True) -> OperatorProcess:
        self.dir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.install.operator_kubeconfig(
            self.dir / f"{self.name}.kubeconfig", self.server
        )
        config = self.install.write_operator_config(self.dir / f"{self.name}-config")
        self.port, self.probe_port = free_port(), free_port()
        self.certs = metrics_certs(self.install.cluster)
        env = {
            **os.environ,
            **self.install.operator_env(),
            "DLK8S_CONFIG_FILE": str(config),
            "DLK8S_METRICS_ADDR": f"127.0.0.1:{self.port}",
            "DLK8S_METRICS_CERT_DIR": str(self.certs),
            "DLK8S_PROBE_ADDR": f"127.0.0.1:{self.probe_port}",
            **self.env,
        }
        env.pop("KUBECONFIG", None)
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "dlk8s.cli.main", "--kubeconfig", str(kubeconfig), "run",
                 *self.args],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        if wait_ready:
            try:
                self.wait_ready()
            except ClusterError:
                # A process that never became ready is still running: the
                # caller never gets it to stop (a benchmark's baseline left
                # one behind).
                self.kill()
                raise
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        """GET `path`: /metrics over TLS with `token` (the cluster's admin
        token by default, "" for none), the probes in plain HTTP on their port."""
        if path.startswith("/metrics"):
            url = f"https://127.0.0.1:{self.port}{path}"
            token = self.install.cluster.token if token is None else token
            context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        else:
            url, context = f"http://127.0.0.1:{self.probe_port}{path}", None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=5, context=context) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()
        except OSError:
            return 0, ""

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen is not None and self.popen.poll() is not None:
                raise ClusterError(f"operator exited {self.popen.returncode}:\n{self.tail()}")
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.2)
        raise ClusterError(f"operator not ready after {timeout}s:\n{self.tail()}")

    def metrics(self) -> str:
        return self.get("/metrics")[1]

    def tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM, as Kubernetes would; SIGKILL if it does not stop in time."""
        if self.popen is None or self.popen.poll() is not None:
            return None if self.popen is None else self.popen.returncode
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = _stacks(self.popen.pid)
            self.popen.kill()
            self.popen.wait()
            raise ClusterError(
                f"{self.name} did not stop within {timeout}s of SIGTERM; its threads:\n"
                f"{stacks}\nits log:\n{self.tail()}"
            ) from None

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()


def _stacks(pid: int) -> str:
    """Every thread's stack, read from outside (py-spy, a dev dependency):
    what a process that will not stop is waiting for."""
    spy = Path(sys.executable).with_name("py-spy")
    try:
        done = subprocess.run(
            [str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"(py-spy could not read them: {err})"
    return done.stdout or done.stderr
