"""A real, local Kubernetes control plane for tests, the demo and the benchmark.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as local
processes on free 127.0.0.1 ports; kwok plays the kubelets of fake nodes that
advertise CPU, memory and ``nvidia.com/gpu``. Everything lives in one temporary
directory, and ``stop()`` ends every process it started by pid and removes the
directory.

Pods finish only when asked: annotate a Running pod with
``kwok.dlk8s.io/exit-code`` (optionally ``kwok.dlk8s.io/run-duration``, a Go
duration such as ``5s``) and kwok moves it to Succeeded (code 0) or Failed with
that exit code in every container's status.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .pdeath import die_with_parent

if TYPE_CHECKING:
    from .realnode import RealNode

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOOLS_BIN = REPO_ROOT / ".tools" / "bin"
VERSIONS_FILE = REPO_ROOT / "tools" / "versions.env"

EXIT_CODE_ANNOTATION = "kwok.dlk8s.io/exit-code"
# `make cluster` with a real node: the namespace whose pods all run there.
REAL_NAMESPACE = "dlk8s-system"
RUN_DURATION_ANNOTATION = "kwok.dlk8s.io/run-duration"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Every directory a cluster makes starts with this plus the pid of the process
# that made it, so a leak check finds what this process started and nothing
# that a concurrent run on the same machine owns.
WORKDIR_PREFIX = "dlk8s-cluster-"


def own_prefix() -> str:
    return f"{WORKDIR_PREFIX}{os.getpid()}-"


REQUIRED_TOOLS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: str = "32"
    memory: str = "128Gi"
    gpu: int = 4
    pods: int = 1100


DEFAULT_NODES: tuple[NodeSpec, ...] = (NodeSpec("kwok-node-0"), NodeSpec("kwok-node-1"))


class ClusterError(RuntimeError):
    pass


def missing_tools(tools_bin: Path = DEFAULT_TOOLS_BIN) -> list[str]:
    return [t for t in REQUIRED_TOOLS if not (tools_bin / t).exists()]


def pinned_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    return {k.strip(): v.strip() for k, v in pairs}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kwok_pod_stages() -> list[dict[str, Any]]:
    """Pods go Running at once, and finish only when a test annotates them.

    Giving kwok pod stages replaces its defaults for pods, so the ready and
    delete stages are restated here; node stages stay kwok's defaults.
    """
    not_deleting = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    ready_template = """
{{ $now := Now }}
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: PodScheduled}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
""".replace("\\\n", "")
    finish_template = f"""
{{{{ $now := Now }}}}
{{{{ $code := index .metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}
{{{{ $start := or .status.startTime $now }}}}
conditions:
- {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: Ready}}
- {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: ContainersReady}}
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: {{{{ $code }}}}
      reason: {{{{ if eq $code "0" }}}}Completed{{{{ else }}}}Error{{{{ end }}}}
      startedAt: {{{{ $start | Quote }}}}
      finishedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: {{{{ if eq $code "0" }}}}Succeeded{{{{ else }}}}Failed{{{{ end }}}}
"""
    return [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-ready"},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {
                    "matchExpressions": [
                        not_deleting,
                        {"key": ".status.podIP", "operator": "DoesNotExist"},
                    ]
                },
                "next": {"statusTemplate": ready_template},
            },
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-finish-on-request"},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {
                    "matchExpressions": [
                        not_deleting,
                        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                        {
                            "key": f'.metadata.annotations["{EXIT_CODE_ANNOTATION}"]',
                            "operator": "Exists",
                        },
                    ]
                },
                "delay": {
                    "durationMilliseconds": 0,
                    "durationFrom": {
                        "expressionFrom": f'.metadata.annotations["{RUN_DURATION_ANNOTATION}"]'
                    },
                },
                "next": {"statusTemplate": finish_template},
            },
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-delete"},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
                    ]
                },
                # kwok's delete carries the pod's uid as a precondition, as the
                # kubelet's does (tools/patches/kwok-delete-by-uid.patch).
                "next": {"finalizers": {"empty": True}, "delete": True},
            },
        },
    ]


def node_manifest(spec: NodeSpec) -> dict[str, Any]:
    resources = {
        "cpu": spec.cpu,
        "memory": spec.memory,
        "pods": str(spec.pods),
        "nvidia.com/gpu": str(spec.gpu),
        # The seed operators' examples still ask for the pre-device-plugin name.
        "alpha.kubernetes.io/nvidia-gpu": str(spec.gpu),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": spec.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    argv: list[str] = field(default_factory=list)  # to start it again (restart_process)


@dataclass
class LocalCluster:
    """One local control plane. Use as a context manager, or start()/stop()."""

    nodes: Sequence[NodeSpec] = DEFAULT_NODES
    tools_bin: Path = DEFAULT_TOOLS_BIN
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr))
    # A real node (containerd, kubelet, kube-proxy, CoreDNS; see realnode.py)
    # beside the kwok nodes. It needs root and `make tools`; the API server
    # then binds to the node's veth address instead of 127.0.0.1.
    real_node: bool = False
    # kube-controller-manager deletes the oldest terminated pods past this
    # many (its default); <= 0 keeps them all, as a benchmark of a history
    # of finished jobs with their pods kept needs.
    terminated_pod_gc_threshold: int = 12500
    # kube-scheduler's longest back-off before it retries a pod that did not
    # fit (its default, 10 s). A benchmark that replays a trace faster than
    # real time lowers it: the back-off is wall time, so at 0.08 s per trace
    # second 10 s would count as 125 trace seconds of a pod left pending.
    scheduler_max_backoff_seconds: int = 10
    node: RealNode | None = field(init=False, default=None)
    workdir: Path = field(init=False)
    server: str = field(init=False, default="")
    token: str = field(init=False, default="")
    startup_seconds: float = field(init=False, default=0.0)
    _procs: list[_Proc] = field(init=False, default_factory=list)
    _ports: dict[str, int] = field(init=False, default_factory=dict)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> LocalCluster:
        missing = missing_tools(self.tools_bin)
        if missing:
            raise ClusterError(f"missing tools in {self.tools_bin}: {missing}; run `make tools`")
        base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
        clean_stale_workdirs(Path(base or tempfile.gettempdir()), self.log)
        self.workdir = Path(tempfile.mkdtemp(prefix=own_prefix(), dir=base))
        began = time.monotonic()
        try:
            if self.real_node:
                from .realnode import RealNode

                self.node = RealNode(tools_bin=self.tools_bin, log=self.log).prepare()
            self._write_credentials()
            self._start_etcd()
            self._start_apiserver()
            self._start_controllers()
            self._start_kwok()
            self.create_nodes(self.nodes)
            self._wait_ready()
            self.startup_seconds = time.monotonic() - began
            took = f"{self.startup_seconds:.1f}s"
            self.log(f"[localcluster] control plane ready in {took} at {self.server}")
            if self.node is not None:
                self.node.start(self)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process by pid (TERM, then KILL) and remove the directory."""
        if self.node is not None:
            # The node first: its clients close their connections, so the API
            # server then stops at once. Its address stays until the end.
            self.node.stop(keep_api_address=True)
        for proc in reversed(self._procs):
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGTERM)
        # With a real node the API server's shutdown waits 20 s to take its
        # address out of the `kubernetes` Service's endpoints; nobody is left
        # to care, so it gets a short grace.
        deadline = time.monotonic() + (3 if self.node is not None else 15)
        for proc in reversed(self._procs):
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        self._procs.clear()
        if self.node is not None:
            self.node.release()
        if getattr(self, "workdir", None) and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [p.popen.pid for p in self._procs]

    # -- access --------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "apiserver.crt"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.tools_bin}{os.pathsep}{env.get('PATH', '')}"
        # Helm keeps caches and repository config in $HOME by default; keep
        # them inside the cluster directory so runs never share state.
        for var, sub in (
            ("HELM_CACHE_HOME", "helm/cache"),
            ("HELM_CONFIG_HOME", "helm/config"),
            ("HELM_DATA_HOME", "helm/data"),
        ):
            env[var] = str(self.workdir / sub)
        return env

    def run(
        self, *argv: str, check: bool = True, input: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            list(argv),
            env=self.env,
            input=input,
            text=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise ClusterError(
                f"{' '.join(argv)} exited {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return done

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.tools_bin / "kubectl"), *args, **kw)

    def helm(self, *args: str, helm: str = "helm4", **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.tools_bin / helm), *args, **kw)

    def api_client(self, token: str | None = None) -> Any:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.server
        cfg.ssl_ca_cert = str(self.ca_file)
        cfg.api_key = {"authorization": f"Bearer {token or self.token}"}
        return client.ApiClient(cfg)

    def write_kubeconfig(self, path: Path, token: str, user: str = "admin") -> Path:
        """A kubeconfig that authenticates with ``token``: e.g. a ServiceAccount's."""
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def create_nodes(self, nodes: Sequence[NodeSpec]) -> None:
        manifests = {"apiVersion": "v1", "kind": "List", "items": [node_manifest(n) for n in nodes]}
        self.kubectl("apply", "-f", "-", input=json.dumps(manifests))

    # -- internals -----------------------------------------------------------

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = self.workdir / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("wb") as out:
            popen = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                # Its own process group, so Ctrl-C in a terminal reaches only
                # us and we stop the children in order.
                start_new_session=True,
                # And it dies with us, even when we are killed (SIGKILL, a
                # timeout) and cannot stop it.
                preexec_fn=die_with_parent(),
            )
        self._procs.append(_Proc(name, popen, log, list(argv)))

    def _tool(self, name: str) -> str:
        return str(self.tools_bin / name)

    def _write_credentials(self) -> None:
        pki = self.workdir / "pki"
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
        self.token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        kcm, sched, kwok = (
            base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=") for _ in range(3)
        )
        # The controllers log in as the users the RBAC bootstrap policy grants
        # their permissions to, so RBAC is exercised as in a real cluster.
        (pki / "tokens.csv").write_text(
            f'{self.token},admin,admin-uid,"system:masters"\n'
            f"{kcm},system:kube-controller-manager,kcm-uid\n"
            f"{sched},system:kube-scheduler,sched-uid\n"
            f'{kwok},kwok,kwok-uid,"system:masters"\n'
            + "".join(f"{line}\n" for line in (self.node.token_lines() if self.node else []))
        )
        self._component_tokens = {"kcm": kcm, "sched": sched, "kwok": kwok}

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self._ports["etcd"] = client
        self._spawn(
            "etcd",
            [
                self._tool("etcd"),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{client}",
                f"--advertise-client-urls=http://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        )
        _wait_for(lambda: _http_ok(f"http://127.0.0.1:{client}/health"), 30, "etcd health", self)

    def _start_apiserver(self) -> None:
        port = free_port()
        pki = self.workdir / "pki"
        host = self.node.host_ip if self.node else "127.0.0.1"
        self.server = f"https://{host}:{port}"
        address_flags = (
            self.node.apiserver_flags()
            if self.node
            else ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
        )
        self._spawn(
            "kube-apiserver",
            [
                self._tool("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self._ports['etcd']}",
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
                "--profiling=false",
                # The benchmark creates thousands of objects at once; the
                # defaults (400/200) would make it measure apiserver throttling.
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--event-ttl=1h",
            ],
        )
        self._write_admin_kubeconfig()
        _wait_for(self._apiserver_ready, 90, "kube-apiserver /readyz", self)

    def _write_admin_kubeconfig(self) -> None:
        # The serving certificate appears once the apiserver has generated it.
        _wait_for(self.ca_file.exists, 30, "apiserver certificate", self)
        self.write_kubeconfig(self.kubeconfig, self.token)

    def _apiserver_ready(self) -> bool:
        return _https_ok(f"{self.server}/readyz", self.token, self.ca_file)

    def _component_kubeconfig(self, name: str) -> Path:
        return self.write_kubeconfig(
            self.workdir / f"{name}.kubeconfig", self._component_tokens[name], user=name
        )

    def _start_controllers(self) -> None:
        pki = self.workdir / "pki"
        kcm_port, sched_port = free_port(), free_port()
        self._spawn(
            "kube-controller-manager",
            [
                self._tool("kube-controller-manager"),
                f"--kubeconfig={self._component_kubeconfig('kcm')}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--concurrent-gc-syncs=50",
                f"--terminated-pod-gc-threshold={self.terminated_pod_gc_threshold}",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                self._tool("kube-scheduler"),
                f"--config={self._scheduler_config()}",
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
            ],
        )
        self._ports.update(kcm=kcm_port, sched=sched_port)

    def _scheduler_config(self) -> Path:
        """The back-off is a config-file field only, and with a config file
        its values win over flags: everything goes here."""
        longest = max(1, self.scheduler_max_backoff_seconds)
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {
                "kubeconfig": str(self._component_kubeconfig("sched")),
                "qps": 500,
                "burst": 1000,
            },
            "leaderElection": {"leaderElect": False},
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": longest,
        }
        path = self.workdir / "scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _start_kwok(self) -> None:
        config = self.workdir / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(_kwok_pod_stages()))
        self._spawn(
            "kwok",
            [
                self._tool("kwok"),
                f"--config={config}",
                f"--kubeconfig={self._component_kubeconfig('kwok')}",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                "--cidr=10.0.0.1/16",
                "--node-ip=10.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )

    def _wait_ready(self) -> None:
        for name in ("kcm", "sched"):
            port = self._ports[name]
            _wait_for(
                lambda p=port: _https_ok(f"https://127.0.0.1:{p}/healthz", None, None),  # type: ignore[misc]
                60,
                f"{name} /healthz",
                self,
            )
        _wait_for(self._nodes_ready, 60, "kwok nodes Ready", self)
        # Pods need the default ServiceAccount the controller-manager creates.
        _wait_for(
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            60,
            "default ServiceAccount",
            self,
        )

    # -- faults, for the chaos suite and the fault tests ------------------------

    def restart_process(self, name: str, down: float = 0.0, sig: int = signal.SIGKILL) -> None:
        """Kill one control-plane process (by pid), leave it down `down`
        seconds, and start it again with the same flags (its port, its data)."""
        proc = next(p for p in self._procs if p.name == name)
        with contextlib.suppress(ProcessLookupError):
            proc.popen.send_signal(sig)
        proc.popen.wait(timeout=30)
        time.sleep(down)
        with proc.log.open("ab") as out:
            proc.popen = subprocess.Popen(
                proc.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )

    def restart_apiserver(self, down: float = 3.0) -> None:
        """kube-apiserver killed, refusing connections for `down` seconds,
        then started again; returns once it is ready."""
        self.restart_process("kube-apiserver", down)
        _wait_for(self._apiserver_ready, 90, "kube-apiserver /readyz after a restart", self)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, so that watches from an older
        resourceVersion get 410 Gone; returns the revision compacted to."""
        base = f"http://127.0.0.1:{self._ports['etcd']}/v3/kv"
        header = _post_json(f"{base}/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(header["header"]["revision"])
        _post_json(f"{base}/compaction", {"revision": revision, "physical": True})
        return revision

    def _nodes_ready(self) -> bool:
        out = self.kubectl(
            "get",
            "nodes",
            "-o",
            'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
            check=False,
        )
        states = out.stdout.split()
        return out.returncode == 0 and len(states) >= len(self.nodes) and set(states) == {"True"}


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _https_ok(url: str, token: str | None, ca: Path | None) -> bool:
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, cluster: LocalCluster
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in cluster._procs:
            if proc.popen.poll() is not None:
                tail = proc.log.read_text(errors="replace")[-3000:]
                raise ClusterError(f"{proc.name} exited {proc.popen.returncode}:\n{tail}")
        if predicate():
            return
        time.sleep(0.2)
    raise ClusterError(f"timed out after {timeout}s waiting for {what}")


def leftover_processes(prefix: str | None = None) -> list[tuple[int, str]]:
    """Processes whose command line points into a cluster directory this process made."""
    prefix = prefix or own_prefix()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if prefix in cmdline and int(entry.name) != os.getpid():
            found.append((int(entry.name), cmdline.strip()))
    return found


def clean_stale_workdirs(base: Path, log: Callable[[str], None] | None = None) -> list[Path]:
    """Remove cluster directories whose owner (the pid in their name) is dead.

    Their processes died with their owner (PR_SET_PDEATHSIG); their files
    stay until here.
    """
    removed = []
    for path in base.glob(f"{WORKDIR_PREFIX}*"):
        owner = path.name[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or Path(f"/proc/{owner}").exists():
            continue
        # Processes of runs from before they died with their owner.
        for pid, _ in leftover_processes(str(path)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed and log:
        log(f"[localcluster] removed directories of dead runs: {[str(p) for p in removed]}")
    return removed


@contextlib.contextmanager
def running_cluster(**kw: Any) -> Iterator[LocalCluster]:
    cluster = LocalCluster(**kw)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a local kwok-backed control plane.")
    parser.add_argument("--nodes", type=int, default=len(DEFAULT_NODES))
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="also run a real node (containerd, kubelet, ...; needs root and `make tools`)",
    )
    args = parser.parse_args(argv)
    nodes = [NodeSpec(f"kwok-node-{i}", gpu=args.gpus_per_node) for i in range(args.nodes)]
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with running_cluster(nodes=nodes, real_node=args.real_node) as cluster:
        print(f"export KUBECONFIG={cluster.kubeconfig}", flush=True)
        if cluster.node is not None:
            node = cluster.node
            # The chart's usual namespace: every pod there (the operator, the
            # `helm test` pod and its smoke TFJob) goes to the real node.
            node.real_namespace(cluster, REAL_NAMESPACE)
            annotations = " ".join(f"{k}='{v}'" for k, v in node.namespace_annotations().items())
            local = ", ".join(sorted(i.local_name for i in node.images.values()))
            print(
                f"export PATH={cluster.tools_bin}:$PATH\n"
                f"# A real node, {node.name}, runs containers beside the kwok nodes. Its images:\n"
                f"#   {local}\n"
                f"# Every pod of namespace {REAL_NAMESPACE} runs there; so does the operator of\n"
                f"#   helm install dlk8s charts/dlk8s -n {REAL_NAMESPACE} --set cloud=gke "
                f"-f values/realnode.yaml --wait && helm test dlk8s -n {REAL_NAMESPACE}\n"
                "# Another namespace whose pods all go there:\n"
                f"#   kubectl create namespace NS && kubectl annotate namespace NS {annotations}\n"
                f"# (or give a pod {json.dumps(node.pod_placement())})\n"
                "# Load a local image into the node: an oci-archive, e.g. from\n"
                "# `buildah push IMG oci-archive:FILE:NAME` or `make image` (see README):\n"
                f"#   {node.load_command()}",
                flush=True,
            )
        while not stop:
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
