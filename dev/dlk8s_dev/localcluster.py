"""A real, local Kubernetes control plane for tests, the demo and the benchmark.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as local
processes on free 127.0.0.1 ports; kwok plays the kubelets of fake nodes that
advertise CPU, memory and ``nvidia.com/gpu``. Everything lives in one temporary
directory, and ``stop()`` ends every process it started by pid and removes the
directory. ``start()`` first removes what runs that no longer exist left
behind (leftovers.py); a run that lives is never touched (runs.py).

Pods finish only when asked: annotate a Running pod with
``kwok.dlk8s.io/exit-code`` (optionally ``kwok.dlk8s.io/run-duration``, a Go
duration such as ``5s``) and kwok moves it to Succeeded (code 0) or Failed with
that exit code in every container's status.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from . import datafiles, leftovers, runs
from .goruntime import server_env
from .pdeath import die_with_parent
from .ports import free_port
from .runs import START_WAIT, WORKDIR_PREFIX

if TYPE_CHECKING:
    from .kueue import Kueue
    from .realnode import RealNode

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOOLS_BIN = REPO_ROOT / ".tools" / "bin"
VERSIONS_FILE = REPO_ROOT / "tools" / "versions.env"

EXIT_CODE_ANNOTATION = "kwok.dlk8s.io/exit-code"
# `make cluster` with a real node: the namespace whose pods all run there.
REAL_NAMESPACE = "dlk8s-system"
RUN_DURATION_ANNOTATION = "kwok.dlk8s.io/run-duration"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# The API server's port in a cluster with a real node (_start_apiserver).
API_PORT_ON_NODE = 6443


def own_prefix() -> str:
    return f"{WORKDIR_PREFIX}{os.getpid()}-"


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


def _kwok_pod_stages() -> list[dict[str, Any]]:
    """Pods go Running at once, and finish only when a test annotates them."""
    return datafiles.yaml_docs(
        "kwok-stages.yaml",
        exit_code_annotation=EXIT_CODE_ANNOTATION,
        run_duration_annotation=RUN_DURATION_ANNOTATION,
    )


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
    # That node given no image but the pause sandbox: it pulls the rest from
    # a registry, as a user's node does (RealNode.bare; test_publish.py).
    bare_node: bool = False
    # kube-controller-manager deletes the oldest terminated pods past this
    # many (its default); <= 0 keeps them all, as a benchmark of a history
    # of finished jobs with their pods kept needs.
    terminated_pod_gc_threshold: int = 12500
    # kube-scheduler's longest back-off before it retries a pod that did not
    # fit (its default, 10 s). A benchmark that replays a trace faster than
    # real time lowers it: the back-off is wall time, so at 0.08 s per trace
    # second 10 s would count as 125 trace seconds of a pod left pending.
    scheduler_max_backoff_seconds: int = 10
    # Set when the run is asked to stop (a signal): start() gives up at its
    # next wait instead of finishing first (stopping.py).
    interrupt: threading.Event | None = None
    # Kueue's manager beside the control plane once it is up (kueue.py),
    # its webhooks registered and answering; stop() ends it first.
    kueue: bool = False
    # Kueue's settings beyond the defaults (kueue.Kueue's fields, e.g.
    # wait_for_pods_ready={"timeout": "30s"}).
    kueue_options: dict[str, Any] = field(default_factory=dict)
    # kube-apiserver's /debug/pprof served (make bench's profile of the API
    # server's CPU); off elsewhere, as on most clusters.
    profiling: bool = False
    node: RealNode | None = field(init=False, default=None)
    kueue_process: Kueue | None = field(init=False, default=None)
    workdir: Path = field(init=False)
    server: str = field(init=False, default="")
    token: str = field(init=False, default="")
    startup_seconds: float = field(init=False, default=0.0)
    # What every stop() so far removed (its real node's too), to tell the
    # user: a failed start stops, and its caller stops again.
    removed: list[str] = field(init=False, default_factory=list)
    _procs: list[_Proc] = field(init=False, default_factory=list)
    _ports: dict[str, int] = field(init=False, default_factory=dict)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> LocalCluster:
        missing = missing_tools(self.tools_bin)
        if self.kueue:
            from . import kueue

            missing += kueue.missing_tools(self.tools_bin)
        if missing:
            raise ClusterError(f"missing tools in {self.tools_bin}: {missing}; run `make tools`")
        leftovers.clean_dead_runs(self.log)
        self.workdir = Path(tempfile.mkdtemp(prefix=own_prefix(), dir=runs.control_plane_base()))
        runs.mark(self.workdir)
        began = time.monotonic()
        try:
            if self.real_node:
                from .realnode import RealNode

                self.node = RealNode(
                    tools_bin=self.tools_bin,
                    log=self.log,
                    interrupt=self.interrupt,
                    removed=self.removed,
                    bare=self.bare_node,
                )
                self.node.prepare()
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
            if self.kueue:
                from .kueue import Kueue

                self.kueue_process = Kueue(self, **self.kueue_options)
                self.kueue_process.start()
            if self.node is not None:
                self.node.start(self)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> list[str]:
        """Stop every process by pid (TERM, then KILL) and remove the directory.

        Returns what this call removed (``removed`` has what every call
        did), to tell the user. Stopping twice is harmless.
        """
        before = len(self.removed)
        if self.kueue_process is not None:
            # While the API server still answers: it unregisters its webhooks.
            self.removed.extend(self.kueue_process.stop())
            self.kueue_process = None
        if self.node is not None:
            # The node first: its clients close their connections, so the API
            # server then stops at once. Its address stays until the end.
            self.node.stop(keep_api_address=True)
        if self._procs:
            self.removed.append(f"processes {', '.join(p.name for p in self._procs)}")
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
            size = runs.size_of(self.workdir)
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.removed.append(f"{self.workdir} ({runs.human(size)})")
        return self.removed[before:]

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        kueue = self.kueue_process.pid if self.kueue_process else None
        return [p.popen.pid for p in self._procs] + ([kueue] if kueue else [])

    @property
    def controller_manager_metrics(self) -> str:
        """kube-controller-manager's /metrics (HTTPS, its own certificate)."""
        return f"https://127.0.0.1:{self._ports['kcm']}/metrics"

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

    def wait_established(self, *targets: str, seconds: float = 90) -> None:
        """Wait until the CRDs in `targets` (`crd/NAME`s, or `-f PATH`) serve.

        `kubectl wait` fails at once, instead of waiting, on a CRD whose status
        has no conditions yet (a CRD just applied under load), so it is asked
        again until the deadline; the last answer is the error."""
        deadline = time.monotonic() + seconds
        while True:
            done = self.kubectl(
                "wait", "--for=condition=Established", f"--timeout={min(seconds, 10):.0f}s",
                *targets,
                check=False, timeout=30,
            )  # fmt: skip
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"CRDs not established in {seconds:.0f}s: {' '.join(targets)}\n"
                    f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
                )
            time.sleep(0.5)

    def api(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """GET `path` (POST `body` to it) as the admin, in this process: the
        answer's status (0: no answer) and JSON. The waits poll with it, five
        times a second: a kubectl run costs a tenth of a CPU-second. urllib,
        as the /readyz check: the kubernetes client (api_client) is the
        tests', loaded only when one asks for it."""
        return _https_json(f"{self.server}{path}", self.token, self.ca_file, body)

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
                env=server_env(),
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
        _wait_for(
            lambda: _http_ok(f"http://127.0.0.1:{client}/health"), START_WAIT, "etcd health", self
        )

    def _start_apiserver(self) -> None:
        # With a real node the API server has an address of its own (the
        # veth's host end), so it takes the usual port: what pods reach
        # through the `kubernetes` Service is then the port a cluster's API
        # server has, and the chart's NetworkPolicy for the operator (egress
        # to 443 and 6443) holds as it is.
        port = API_PORT_ON_NODE if self.node else free_port()
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
                f"--profiling={str(self.profiling).lower()}",
                # The benchmark creates thousands of objects at once; the
                # defaults (400/200) would make it measure apiserver throttling.
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--event-ttl=1h",
            ],
        )
        self._write_admin_kubeconfig()
        _wait_for(self._apiserver_ready, START_WAIT, "kube-apiserver /readyz", self)

    def _write_admin_kubeconfig(self) -> None:
        # The serving certificate appears once the apiserver has generated it.
        _wait_for(self.ca_file.exists, START_WAIT, "apiserver certificate", self)
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
                # Its metrics (make bench reads its controllers' work) to
                # anyone on 127.0.0.1, as its health checks already are.
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--concurrent-gc-syncs=50",
                f"--terminated-pod-gc-threshold={self.terminated_pod_gc_threshold}",
                f"--controllers={','.join(CONTROLLERS)}",
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
                START_WAIT,
                f"{name} /healthz",
                self,
            )
        _wait_for(self._nodes_ready, START_WAIT, "kwok nodes Ready", self)
        # Pods need the default ServiceAccount the controller-manager creates.
        _wait_for(
            lambda: self.api("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            START_WAIT,
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
                env=server_env(),
                preexec_fn=die_with_parent(),
            )

    def restart_apiserver(self, down: float = 3.0) -> None:
        """kube-apiserver killed, refusing connections for `down` seconds,
        then started again; returns once it is ready."""
        self.restart_process("kube-apiserver", down)
        _wait_for(self._apiserver_ready, START_WAIT, "kube-apiserver /readyz after a restart", self)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, so that watches from an older
        resourceVersion get 410 Gone; returns the revision compacted to."""
        base = f"http://127.0.0.1:{self._ports['etcd']}/v3/kv"
        header = _post_json(f"{base}/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(header["header"]["revision"])
        _post_json(f"{base}/compaction", {"revision": revision, "physical": True})
        return revision

    @staticmethod
    def says_ready(node: dict[str, Any]) -> bool | None:
        """Whether a node says it is Ready; None before it says either."""
        conditions = node.get("status", {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        return None if ready is None else ready.get("status") == "True"

    def _nodes_ready(self) -> bool:
        status, nodes = self.api("/api/v1/nodes")
        # A node with no Ready condition yet is not counted, neither way.
        said = [self.says_ready(node) for node in nodes.get("items") or []]
        states = [ready for ready in said if ready is not None]
        return status == 200 and len(states) >= len(self.nodes) and all(states)


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
    return _https_json(url, token, ca)[0] == 200


def _https_json(
    url: str, token: str | None, ca: Path | None, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return int(resp.status), _json_or_empty(resp.read())
    except urllib.error.HTTPError as err:
        return int(err.code), _json_or_empty(err.read())
    except OSError:
        return 0, {}


def _json_or_empty(raw: bytes) -> dict[str, Any]:
    """The JSON object of an answer; {} for anything else (/healthz says "ok")."""
    try:
        loaded = json.loads(raw)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, cluster: LocalCluster
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.interrupt is not None and cluster.interrupt.is_set():
            raise ClusterError(f"asked to stop while waiting for {what}")
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
    return runs.processes_mentioning(prefix or own_prefix())


@contextlib.contextmanager
def running_cluster(**kw: Any) -> Iterator[LocalCluster]:
    cluster = LocalCluster(**kw)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__":
    # `make cluster` used to run this module; its code is in clustercli.py.
    from dlk8s_dev.clustercli import main

    raise SystemExit(main())
