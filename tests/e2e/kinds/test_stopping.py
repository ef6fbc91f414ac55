"""`make cluster` stops on signals, leaving nothing; a killed run's leftovers go at the next start.

Each run here is a real one, with its real node and a pod running on it:
`make cluster` as a user starts it, or `python -m dlk8s_dev.clustercli` for
the run killed with SIGKILL. What a run has on the machine is read by
tests/e2e/footprint.py, which tells it apart from whatever else runs on the
machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlk8s_dev import runs
from dlk8s_dev.images import base_image
from dlk8s_dev.localcluster import (
    DEFAULT_TOOLS_BIN,
    REAL_NAMESPACE,
    REPO_ROOT,
    LocalCluster,
    missing_tools,
)
from dlk8s_dev.realnode import missing_requirements

from ..footprint import Run, footprint, read_machine
from ..helpers import wait_until

UP = "the cluster is up"
# The command of run_a_pod's container, as the footprint shows it.
SLEEPER = "sleep 3600"


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment, without what would make `make` inside a `make test` a sub-make."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "MFLAGS"}
    return env | extra


class Launched:
    """A command in a session of its own, its output collected as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        # Its own session: a signal to its group reaches it and what it runs, not us.
        self.proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, text=True, start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(timeout=5)
                pytest.fail(f"no {text!r}:\n" + "\n".join(self.lines[-80:]))
            time.sleep(0.2)

    def run_pid(self) -> int:
        """The pid of the run itself: its first line says `kill <pid>`."""
        first = next(line for line in self.lines if "stops it and removes" in line)
        return int(re.findall(r"`kill (\d+)`", first)[0])

    def output(self) -> list[str]:
        self._reader.join(timeout=10)
        return self.lines

    def end(self) -> None:
        """Whatever happened, nothing of it runs on."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def run_a_pod(launched: Launched) -> None:
    """A pod running on the run's real node, made as its output tells a user
    to: its container is part of what must go when the run ends."""
    exported = next(line for line in launched.lines if line.startswith("export KUBECONFIG="))
    env = clean_env(KUBECONFIG=exported.split("=", 1)[1])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sleeper", "namespace": REAL_NAMESPACE},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": base_image().local_name,
                    "imagePullPolicy": "Never",
                    "command": SLEEPER.split(),
                }
            ],
        },
    }

    def kubectl(*args: str, given: str | None = None) -> None:
        done = subprocess.run(
            [str(DEFAULT_TOOLS_BIN / "kubectl"), *args],
            input=given, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    kubectl("apply", "-f", "-", given=json.dumps(pod))
    kubectl("wait", "pod/sleeper", "-n", REAL_NAMESPACE, "--for=condition=Ready", "--timeout=300s")


def needs_a_real_node() -> None:
    missing = missing_tools() + missing_requirements(DEFAULT_TOOLS_BIN)
    if missing:
        pytest.skip(f"a real node needs {missing} (run `make tools` as root)")


def exits_within(pid: int, seconds: float) -> float | None:
    """Seconds until ``pid`` exits (None if it is still there after ``seconds``)."""
    began = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        exited = os.pidfd_open(pid)
        try:
            if not select.select([exited], [], [], seconds)[0]:
                return None
        finally:
            os.close(exited)
    return time.monotonic() - began


def signal_group(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, sig)


@pytest.mark.parametrize(
    ("sig", "presses"),
    [(signal.SIGTERM, 1), (signal.SIGINT, 3)],
    ids=["SIGTERM", "SIGINT-thrice"],
)
def test_make_cluster_stops_on_a_signal_and_leaves_nothing(sig: int, presses: int) -> None:
    """The signal goes to `make cluster`'s process group (as a terminal, `timeout`
    or a CI runner sends it; make passes SIGTERM on, so the run gets it twice).
    Ctrl-C pressed three times, 1.2 s apart (signals within a second are one
    request), while the teardown runs: the second changes nothing, the third
    kills what is left; either way nothing stays. The teardown takes about
    2.4 s with its real node, as long as three presses, so the node's kubelet
    is stopped (SIGSTOP) first, and the teardown waits on it. Each signal
    alone, any burst of them, and a second request on its own are
    tests/e2e/operator/test_signals.py's, on the same code without a cluster: a run
    here takes a minute."""
    needs_a_real_node()
    before = read_machine()
    make = Launched(["make", "-s", "--no-print-directory", "cluster"], clean_env())
    try:
        make.wait_for(UP, 900)
        run_a_pod(make)
        run = Run(make.run_pid(), session=make.proc.pid).learn(read_machine())
        up = footprint(read_machine(), run)
        for kind in ("processes", "links", "netns", "dirs", "cgroups"):
            assert up[kind], f"the footprint sees no {kind} of the running cluster: {up}"
        assert any(SLEEPER in p for p in up["processes"]), up["processes"]
        if presses >= 3:
            # The node's stop waits (5 s) for a kubelet that does not end.
            for pid, cmd in runs.processes_mentioning(f"dlk8s-node-{run.pid}-"):
                if cmd.split(" ", 1)[0].endswith("/kubelet"):
                    os.kill(pid, signal.SIGSTOP)
        signal_group(make.proc.pid, sig)
        began = time.monotonic()
        for _ in range(presses - 1):
            time.sleep(1.2)
            signal_group(make.proc.pid, sig)
        exited = exits_within(run.pid, 60 - (time.monotonic() - began))
        took = time.monotonic() - began
        assert exited is not None, "still running 60 s after the signal:\n" + "\n".join(make.lines)
        make.proc.wait(timeout=30)
    finally:
        make.end()
    print(f"\n[stopping] {signal.Signals(sig).name} x{presses}: exited after {took:.1f}s")
    assert footprint(read_machine(), run) == footprint(before, run)
    said = [line for line in make.output() if not line.startswith("make")]
    if presses >= 2:
        assert any("already stopping;" in line for line in said), said
    if presses >= 3:
        assert any("a third time: killing what is left" in line for line in said), said
    last = said[-1]
    assert last.startswith("==> stopped "), said[-20:]
    assert f" after {signal.Signals(sig).name};" in last, said[-20:]
    for directory in up["dirs"]:
        assert directory in last, (directory, last)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A place of its own for runs' directories (DLK8S_DEV_SCRATCH): no other
    start on this machine looks there, so what removes them is ours to see.
    On the disk of /var/tmp, as a node's folder needs (the image store links)."""
    path = Path(tempfile.mkdtemp(prefix="scratch-dlk8s-stopping-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_the_next_start_removes_what_a_killed_run_left_and_nothing_of_a_live_one(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_a_real_node()
    env = clean_env(**{runs.SCRATCH_ENV: str(scratch)})
    cli = [sys.executable, "-m", "dlk8s_dev.clustercli"]
    live = Launched(cli, env)
    victim = Launched([*cli, "--real-node"], env)
    try:
        live.wait_for(UP, 300)
        victim.wait_for(UP, 900)
        run_a_pod(victim)
        kept = sorted(scratch.glob(f"dlk8s-*-{live.proc.pid}-*"))
        left = sorted(scratch.glob(f"dlk8s-*-{victim.proc.pid}-*"))
        assert len(kept) == 1, kept
        assert len(left) == 2, left  # the control plane's and the node's
        # A dead run's folder under a pid that a live process has now.
        reused = scratch / f"dlk8s-node-{live.proc.pid}-7"
        reused.mkdir()
        runs.mark(reused, runs.Owner(live.proc.pid, start=1, boot=runs.me().boot))
        gone = Run(victim.proc.pid, session=victim.proc.pid).learn(read_machine())
        running = footprint(read_machine(), gone)["processes"]
        assert any(SLEEPER in p for p in running), running
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=30)
        wait_until(
            lambda: not footprint(read_machine(), gone)["processes"],
            timeout=30,
            what="the killed run's processes to die with it",
        )
        assert all(d.exists() for d in left), "SIGKILL leaves the run's directories"

        monkeypatch.setenv(runs.SCRATCH_ENV, str(scratch))
        said: list[str] = []
        LocalCluster(log=said.append).start().stop()
        report = "\n".join(said)
        for d in [*left, reused]:
            assert f"{d} (" in report, report
            assert not d.exists()
        for d in kept:
            assert str(d) not in report, report
            assert d.exists()
        nodes = subprocess.run(
            [str(DEFAULT_TOOLS_BIN / "kubectl"), "get", "nodes"],
            env=env | {"KUBECONFIG": str(kept[0] / "admin.kubeconfig")},
            capture_output=True,
            text=True,
        )
        assert nodes.returncode == 0, nodes.stderr
        # Its link and cgroups go too, whichever start on this machine came first.
        assert not any(footprint(read_machine(), gone).values()), footprint(read_machine(), gone)
        signal_group(live.proc.pid, signal.SIGTERM)
        assert exits_within(live.proc.pid, 60) is not None
        assert not list(scratch.iterdir())
    finally:
        live.end()
        victim.end()
