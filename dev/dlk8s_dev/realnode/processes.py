"""The node's processes: containerd, kubelet, kube-proxy, CoreDNS and
kube-network-policies, each started inside the node's namespaces and
cgroups with its log in the node's folder; watched while the node starts
(a kubelet that came too early is started again), and stopped in order.

Everything else that runs there (containerd's shims, the pods) goes when the
namespaces' PID 1 does; what does not is found by the node's folder or
cgroups and killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import nodehost as host
from ..goruntime import server_env
from ..nodehost import NodeError
from ..runs import START_WAIT
from .namespaces import NodeNamespaces
from .placement import LABEL_KEY
from .tools import NETPOL

# kube-network-policies' metrics, on the node's own loopback (nothing reads
# them; the default would be every address of the node).
NETPOL_METRICS = "127.0.0.1:9080"
# Processes that need another signal than SIGTERM to stop cleanly:
# kube-network-policies removes its nftables table on SIGINT only.
STOP_SIGNALS = {NETPOL: signal.SIGINT}
# What containerd's CRI answers before it serves (containerd 1.6 to 2.x).
CRI_NOT_READY = "server is not initialized yet"


def containerd_socket(root: Path) -> Path:
    return root / "containerd" / "containerd.sock"


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    argv: list[str]  # as given to spawn(), to start it again


@dataclass
class NodeProcesses:
    root: Path  # the node's folder: configuration files, logs
    tag: str
    tools_bin: Path
    namespaces: NodeNamespaces
    # Set when the run is asked to stop: a wait gives up at its next look.
    interrupt: threading.Event | None = None
    _procs: list[_Proc] = field(default_factory=list)
    # Kubelets started again because containerd's CRI was not ready (_respawned).
    _kubelet_retries: int = 0

    def spawn(self, name: str, argv: Sequence[str]) -> None:
        log = self.root / "logs" / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                self.namespaces.enter(*argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
                env=server_env(),
                preexec_fn=self.namespaces.preexec(),
            )
        self._procs.append(_Proc(name, popen, log, list(argv)))

    def start_containerd(self) -> None:
        self.spawn("containerd", ["containerd", "--config", str(self.root / "containerd.toml")])
        socket = containerd_socket(self.root)
        self.wait(socket.exists, START_WAIT, "containerd's socket")

    def start_kubelet(self, name: str, node_ip: str) -> None:
        r = self.root
        self.spawn(
            "kubelet",
            [
                str(self.tools_bin.resolve() / "kubelet"),
                f"--config={r / 'kubelet.yaml'}",
                f"--kubeconfig={r / 'kubelet.kubeconfig'}",
                f"--root-dir={r / 'kubelet'}",
                f"--cert-dir={r / 'pki'}",
                f"--hostname-override={name}",
                f"--node-ip={node_ip}",
                f"--node-labels={LABEL_KEY}=true,type=real",
                "--v=1",
            ],
        )

    def start_proxy_and_dns(self, name: str) -> None:
        r = self.root
        bin_ = self.tools_bin.resolve()
        self.spawn("kube-proxy", [str(bin_ / "kube-proxy"), f"--config={r / 'kube-proxy.yaml'}"])
        self.spawn("coredns", [str(bin_ / "coredns"), "-conf", str(r / "Corefile")])
        self.spawn(
            NETPOL,
            [
                str(bin_ / NETPOL),
                f"--kubeconfig={r / f'{NETPOL}.kubeconfig'}",
                f"--hostname-override={name}",
                f"--metrics-bind-address={NETPOL_METRICS}",
                # Pod addresses from the API: NRI's socket would be the
                # host's (/run/nri is not the node's own), not this containerd's.
                "--disable-nri",
            ],
        )

    def _respawned(self, proc: _Proc) -> bool:
        """Starts the kubelet again if it ended only because containerd's CRI
        was not serving yet: containerd answers on its socket before its CRI
        plugin has recovered its state (longer under load), and the kubelet
        checks the CRI once at its start and exits 1. Anything else ends the start."""
        if proc.name != "kubelet" or self._kubelet_retries >= 20:
            return False
        if CRI_NOT_READY not in proc.log.read_text(errors="replace")[-3000:]:
            return False
        self._kubelet_retries += 1
        self._procs.remove(proc)
        time.sleep(0.5)
        self.spawn(proc.name, proc.argv)
        return True

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``predicate()``; fails at once when a process ends (but a
        kubelet that came too early) or the run is asked to stop."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.interrupt is not None and self.interrupt.is_set():
                raise NodeError(f"asked to stop while waiting for {what}")
            for proc in list(self._procs):
                if proc.popen.poll() is not None and not self._respawned(proc):
                    tail = proc.log.read_text(errors="replace")[-3000:]
                    raise NodeError(f"{proc.name} exited {proc.popen.returncode}:\n{tail}")
            if predicate():
                return
            time.sleep(0.2)
        raise NodeError(f"timed out after {timeout}s waiting for {what}")

    def end(self) -> None:
        """Every process of the node ends, the namespaces' PID 1 with them."""
        # The API server's clients first, each by SIGTERM: closing their
        # connections while the network is there lets the API server stop at
        # once later (it waits a long time for peers that just vanished).
        clients = [p for p in self._procs if p.name != "containerd"]
        for proc in clients:
            for pid in host.children(proc.popen.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, STOP_SIGNALS.get(proc.name, signal.SIGTERM))
        for proc in clients:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)
        self.namespaces.end()
        for proc in self._procs:
            try:
                proc.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        self._procs.clear()
        self.namespaces.forget()
        self._kill_stragglers()

    def _kill_stragglers(self, timeout: float = 10) -> None:
        # What the PID namespace's end should have taken and did not (seen
        # once in CI: the holder and its init outlived stop()). Found by the
        # node's folder in the command line or its cgroups, never its network
        # namespace: that inode may already belong to someone else.
        if not self.tag:
            return
        deadline = time.monotonic() + timeout
        while left := host.processes_of(self.root, self.tag):
            for pid, _ in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return  # leftovers() names them; the rest of stop() still runs
            time.sleep(0.1)
