"""The chaos suite's operator processes: ``Operators`` restarts one like a
kubelet would when it exits without being told to (and counts it);
``Outage`` counts an operator's requests and log lines over windows of
trouble."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from bench.chaos.log import log
from bench.common.devtools import Install, OperatorProcess


class Operators:
    """The operator processes of a scenario, restarted like a kubelet would
    when one exits without being told to; such restarts are counted."""

    def __init__(
        self, install: Install, env: dict[str, str] | None = None, server: str = ""
    ) -> None:
        self.install = install
        self.env = env or {}
        self.server = server  # the API server's address for them, if not the cluster's
        self.procs: list[OperatorProcess] = []
        self.restarts = 0
        self._meant: set[int] = set()  # pids we stopped or killed
        self._stop = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._serial = 0
        self._lock = threading.Lock()  # the watchdog replaces processes too

    def start(self, count: int = 1) -> Operators:
        for _ in range(count):
            self.procs.append(self._new())
        self._watchdog.start()
        return self

    def _new(self) -> OperatorProcess:
        self._serial += 1
        name = f"chaos-{self._serial}"
        proc = OperatorProcess(self.install, name=name, env=self.env, server=self.server)
        return proc.start(wait_ready=False)

    def kill(self, proc: OperatorProcess) -> None:
        """SIGKILL, as the node or the OOM killer would."""
        with self._lock:
            self._meant.add(proc.pid)
        proc.kill()

    def expect_exit(self, proc: OperatorProcess) -> None:
        """An exit the scenario causes (a leader that will find its lease
        taken): not restarted by the watchdog, nor counted."""
        with self._lock:
            self._meant.add(proc.pid)

    def terminate(self, proc: OperatorProcess) -> None:
        """SIGTERM, as Kubernetes does on a rollout."""
        with self._lock:
            self._meant.add(proc.pid)
        proc.stop()

    def replace(self, proc: OperatorProcess) -> OperatorProcess:
        fresh = self._new()
        with self._lock:
            self.procs[self.procs.index(proc)] = fresh
        return fresh

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                died = [
                    p
                    for p in self.procs
                    if p.popen.poll() is not None and p.pid not in self._meant  # type: ignore[union-attr]
                ]
                self._meant.update(p.pid for p in died)
            for proc in died:
                log(f"operator {proc.name} exited {proc.popen.returncode} by itself")  # type: ignore[union-attr]
                self.restarts += 1
                self.replace(proc)

    def stop(self) -> None:
        self._stop.set()
        self._watchdog.join()
        for proc in self.procs:
            self.terminate(proc)


def requests_sent(proc: OperatorProcess) -> float:
    total = 0.0
    for line in proc.metrics().splitlines():
        if line.startswith("dlk8s_api_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def log_size(proc: OperatorProcess) -> int:
    return proc.log_path.stat().st_size if proc.log_path.exists() else 0


def lines_since(proc: OperatorProcess, offset: int) -> list[str]:
    with proc.log_path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace").splitlines()


@dataclass
class Outage:
    """The operator's requests and log lines over windows of trouble."""

    seconds: float = 0.0
    requests: float = 0.0
    lines: int = 0

    @contextmanager
    def window(self, proc: OperatorProcess) -> Iterator[None]:
        began, sent, offset = time.monotonic(), requests_sent(proc), log_size(proc)
        yield
        self.seconds += time.monotonic() - began
        self.requests += requests_sent(proc) - sent
        self.lines += len(lines_since(proc, offset))

    def rates(self) -> tuple[float | None, float | None]:
        if not self.seconds:
            return None, None
        return self.requests / self.seconds, self.lines / self.seconds
