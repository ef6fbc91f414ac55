"""LocalCluster: a real, local Kubernetes control plane for tests, the demo and the benchmark.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as local
processes on free 127.0.0.1 ports; kwok plays the kubelets of fake nodes that
advertise CPU, memory and ``nvidia.com/gpu`` (kwok.py). Everything lives in
one temporary directory, and ``stop()`` ends every process it started by pid
and removes the directory. ``start()`` first removes what runs that no longer
exist left behind (leftovers.py); a run that lives is never touched (runs.py).
A real node (realnode/) and Kueue's manager (kueue.py) join it on request.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import leftovers, runs
from ..clusterapi import ClusterError, says_ready
from ..kueue import Kueue
from ..kueue import missing_tools as kueue_missing_tools
from ..ports import free_port
from ..probes import http_ok, https_json, https_ok, post_json
from ..realnode import RealNode
from ..runs import START_WAIT, WORKDIR_PREFIX
from . import controlplane, processes
from .controlplane import API_PORT_ON_NODE
from .kwok import DEFAULT_NODES, NodeSpec, kwok_pod_stages, node_manifest
from .processes import Process
from .tools import DEFAULT_TOOLS_BIN, missing_tools

# `make cluster` with a real node: the namespace whose pods all run there.
REAL_NAMESPACE = "dlk8s-system"


def own_prefix() -> str:
    return f"{WORKDIR_PREFIX}{os.getpid()}-"


@dataclass
class LocalCluster:
    """One local control plane. Use as a context manager, or start()/stop()."""

    nodes: Sequence[NodeSpec] = DEFAULT_NODES
    tools_bin: Path = DEFAULT_TOOLS_BIN
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr))
    # A real node (containerd, kubelet, kube-proxy, CoreDNS; see realnode/)
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
    # kube-controller-manager's controllers beyond controlplane.CONTROLLERS
    # (e.g. "job-controller": bench's Trainer peer runs batch Jobs).
    extra_controllers: tuple[str, ...] = ()
    # kube-apiserver's /debug/pprof served (make bench's profile of the API
    # server's CPU); off elsewhere, as on most clusters.
    profiling: bool = False
    # kube-apiserver logs the writes of these groups' users to audit_log,
    # with their user agents (make chaos: a paused leader's writes).
    audited_groups: tuple[str, ...] = ()
    node: RealNode | None = field(init=False, default=None)
    kueue_process: Kueue | None = field(init=False, default=None)
    workdir: Path = field(init=False)
    server: str = field(init=False, default="")
    token: str = field(init=False, default="")
    startup_seconds: float = field(init=False, default=0.0)
    # What every stop() so far removed (its real node's too), to tell the
    # user: a failed start stops, and its caller stops again.
    removed: list[str] = field(init=False, default_factory=list)
    _procs: list[Process] = field(init=False, default_factory=list)
    _ports: dict[str, int] = field(init=False, default_factory=dict)
    _component_tokens: dict[str, str] = field(init=False, default_factory=dict)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> LocalCluster:
        missing = missing_tools(self.tools_bin)
        if self.kueue:
            missing += kueue_missing_tools(self.tools_bin)
        if missing:
            raise ClusterError(f"missing tools in {self.tools_bin}: {missing}; run `make tools`")
        leftovers.clean_dead_runs(self.log)
        self.workdir = Path(tempfile.mkdtemp(prefix=own_prefix(), dir=runs.control_plane_base()))
        runs.mark(self.workdir)
        began = time.monotonic()
        try:
            if self.real_node:
                self.node = RealNode(
                    tools_bin=self.tools_bin,
                    log=self.log,
                    interrupt=self.interrupt,
                    removed=self.removed,
                    bare=self.bare_node,
                )
                self.node.prepare()
            self._start_control_plane()
            self.startup_seconds = time.monotonic() - began
            took = f"{self.startup_seconds:.1f}s"
            self.log(f"[localcluster] control plane ready in {took} at {self.server}")
            if self.kueue:
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
        # With a real node the API server's shutdown waits 20 s to take its
        # address out of the `kubernetes` Service's endpoints; nobody is left
        # to care, so it gets a short grace.
        processes.stop_all(self._procs, grace=3 if self.node is not None else 15)
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
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

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
        return https_json(f"{self.server}{path}", self.token, self.ca_file, body)

    def helm(self, *args: str, helm: str = "helm4", **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.tools_bin / helm), *args, **kw)

    def api_client(self, token: str | None = None) -> Any:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.server
        cfg.ssl_ca_cert = str(self.ca_file)
        cfg.api_key = {"authorization": f"Bearer {token or self.token}"}
        return client.ApiClient(cfg)

    def write_kubeconfig(
        self, path: Path, token: str, user: str = "admin", server: str = ""
    ) -> Path:
        """A kubeconfig that authenticates with ``token``: e.g. a ServiceAccount's;
        ``server``: another way to the API server (a proxy) than its own address."""
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": server or self.server, "certificate-authority-data": ca},
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

    # -- the control plane's processes (their flags: controlplane.py) --------

    def _start_control_plane(self) -> None:
        self.token, self._component_tokens = controlplane.write_credentials(
            self.workdir / "pki", self.node.token_lines() if self.node else []
        )
        self._start_etcd()
        self._start_apiserver()
        self._start_controllers()
        self._start_kwok()
        self.create_nodes(self.nodes)
        self._wait_ready()

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        self._procs.append(processes.spawn(self.workdir, name, argv))

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        processes.wait_for(predicate, timeout, what, self._procs, self.interrupt)

    def _tool(self, name: str) -> str:
        return str(self.tools_bin / name)

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self._ports["etcd"] = client
        self._spawn("etcd", controlplane.etcd_argv(self._tool("etcd"), self.workdir, client, peer))
        self._wait(lambda: http_ok(f"http://127.0.0.1:{client}/health"), START_WAIT, "etcd health")

    def _start_apiserver(self) -> None:
        # With a real node the API server has an address of its own (the
        # veth's host end), so it takes the usual port: what pods reach
        # through the `kubernetes` Service is then the port a cluster's API
        # server has, and the chart's NetworkPolicy for the operator (egress
        # to 443 and 6443) holds as it is.
        port = API_PORT_ON_NODE if self.node else free_port()
        host = self.node.host_ip if self.node else "127.0.0.1"
        self.server = f"https://{host}:{port}"
        address_flags = (
            self.node.apiserver_flags()
            if self.node
            else ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
        )
        argv = controlplane.apiserver_argv(
            self._tool("kube-apiserver"),
            self.workdir,
            self._ports["etcd"],
            port,
            address_flags,
            self.profiling,
            self.audited_groups,
        )
        self._spawn("kube-apiserver", argv)
        # The kubeconfig embeds the certificate the apiserver generates, so it
        # is written only once a TLS handshake has trusted that file: the file
        # exists before the apiserver has finished writing it, and a copy read
        # then (empty, or its serving certificate without the CA) made kubectl
        # fail "certificate signed by unknown authority" in CI.
        self._wait(self._apiserver_ready, START_WAIT, "kube-apiserver /readyz")
        self.write_kubeconfig(self.kubeconfig, self.token)

    def _apiserver_ready(self) -> bool:
        return https_ok(f"{self.server}/readyz", self.token, self.ca_file)

    def kwok_files(self) -> tuple[str, Path, Path]:
        """kwok's binary, its stages and its kubeconfig: another kwok's to use."""
        return self._tool("kwok"), self.workdir / "kwok.yaml", self._component_kubeconfig("kwok")

    def _component_kubeconfig(self, name: str) -> Path:
        return self.write_kubeconfig(
            self.workdir / f"{name}.kubeconfig", self._component_tokens[name], user=name
        )

    def _start_controllers(self) -> None:
        kcm_port, sched_port = free_port(), free_port()
        kcm = controlplane.controller_manager_argv(
            self._tool("kube-controller-manager"),
            self.workdir,
            self._component_kubeconfig("kcm"),
            kcm_port,
            self.ca_file,
            self.terminated_pod_gc_threshold,
            self.extra_controllers,
        )
        self._spawn("kube-controller-manager", kcm)
        config = self.workdir / "scheduler.yaml"
        scheduling = controlplane.scheduler_config(
            self._component_kubeconfig("sched"), self.scheduler_max_backoff_seconds
        )
        config.write_text(yaml.safe_dump(scheduling))
        self._spawn(
            "kube-scheduler",
            controlplane.scheduler_argv(self._tool("kube-scheduler"), config, sched_port),
        )
        self._ports.update(kcm=kcm_port, sched=sched_port)

    def _start_kwok(self) -> None:
        config = self.workdir / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(kwok_pod_stages()))
        kubeconfig = self._component_kubeconfig("kwok")
        self._spawn(
            "kwok", controlplane.kwok_argv(self._tool("kwok"), config, kubeconfig, free_port())
        )

    def _wait_ready(self) -> None:
        for name in ("kcm", "sched"):
            port = self._ports[name]
            self._wait(
                lambda p=port: https_ok(f"https://127.0.0.1:{p}/healthz", None, None),  # type: ignore[misc]
                START_WAIT,
                f"{name} /healthz",
            )
        self._wait(self._nodes_ready, START_WAIT, "kwok nodes Ready")
        # Pods need the default ServiceAccount the controller-manager creates.
        self._wait(
            lambda: self.api("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            START_WAIT,
            "default ServiceAccount",
        )

    # -- faults, for the chaos suite and the fault tests ------------------------

    def restart_process(self, name: str, down: float = 0.0, sig: int = signal.SIGKILL) -> None:
        """Kill one control-plane process (by pid), leave it down `down`
        seconds, and start it again with the same flags (its port, its data)."""
        proc = next(p for p in self._procs if p.name == name)
        processes.restart(proc, self.workdir, down, sig)

    def restart_apiserver(self, down: float = 3.0) -> None:
        """kube-apiserver killed, refusing connections for `down` seconds,
        then started again; returns once it is ready."""
        self.restart_process("kube-apiserver", down)
        self._wait(self._apiserver_ready, START_WAIT, "kube-apiserver /readyz after a restart")

    @contextlib.contextmanager
    def api_server_down(self) -> Iterator[None]:
        """kube-apiserver killed for the block, as a cluster out of reach is
        to its peers (tests/e2e/operator/test_multikueue.py), then started
        again; the block's end waits until it is ready."""
        proc = next(p for p in self._procs if p.name == "kube-apiserver")
        processes.end(proc)
        try:
            yield
        finally:
            processes.start_again(proc, self.workdir)
            self._wait(self._apiserver_ready, START_WAIT, "kube-apiserver /readyz, back")

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, so that watches from an older
        resourceVersion get 410 Gone; returns the revision compacted to."""
        base = f"http://127.0.0.1:{self._ports['etcd']}/v3/kv"
        header = post_json(f"{base}/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(header["header"]["revision"])
        post_json(f"{base}/compaction", {"revision": revision, "physical": True})
        return revision

    @staticmethod
    def says_ready(node: dict[str, Any]) -> bool | None:
        """Whether a node says it is Ready; None before it says either."""
        return says_ready(node)

    def _nodes_ready(self) -> bool:
        status, nodes = self.api("/api/v1/nodes")
        # A node with no Ready condition yet is not counted, neither way.
        said = [says_ready(node) for node in nodes.get("items") or []]
        states = [ready for ready in said if ready is not None]
        return status == 200 and len(states) >= len(self.nodes) and all(states)


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
