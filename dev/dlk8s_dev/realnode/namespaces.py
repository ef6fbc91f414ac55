"""The node's namespaces and cgroups: one holder process (``unshare --pid
--mount --net --cgroup --fork``) whose child, nodeinit.py, is their PID 1;
the node's cgroups, which the holder and every process of the node start in;
and how a command enters them (nsenter).

When PID 1 dies the kernel kills every process of the namespace, so nothing
outlives the node, however it stops: the holder dies with the process that
started it (``PR_SET_PDEATHSIG``) and takes PID 1 with it (``--kill-child``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import nodehost as host
from ..nodehost import NodeError
from ..nodeinit import PRIVATE_DIRS, READY_FILE
from ..pdeath import die_with_parent


@dataclass
class NodeNamespaces:
    root: Path  # the node's folder
    tag: str  # the node's name on the host: its folder's, its cgroups'
    holder: subprocess.Popen[bytes] | None = None
    init_pid: int = 0  # the namespaces' PID 1, as the host sees it
    netns_inode: int = 0
    _cgroups: list[Path] = field(default_factory=list)

    @property
    def netns(self) -> Path:
        return Path(f"/proc/{self.init_pid}/ns/net")

    def start(self) -> None:
        """Start the holder; returns once nodeinit.py says the namespaces are ready."""
        argv = [
            "unshare",
            "--pid",
            "--mount",
            "--net",
            "--cgroup",
            "--fork",
            "--kill-child=SIGKILL",
            "--mount-proc",
            "--propagation",
            "private",
            sys.executable,
            "-m",
            "dlk8s_dev.nodeinit",
            str(self.root),
        ]
        for path in PRIVATE_DIRS:  # mount points must exist (empty, standard folders)
            Path(path).mkdir(parents=True, exist_ok=True)
        log = self.root / "logs" / "init.log"
        log.parent.mkdir(parents=True)
        env = dict(os.environ)
        # The folder dlk8s_dev is in (dev/), for `-m dlk8s_dev.nodeinit`.
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
        )
        with log.open("wb") as out:
            self.holder = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=self.preexec(),
            )
        (self.root / "holder.pid").write_text(str(self.holder.pid))
        ready = self.root / READY_FILE
        deadline = time.monotonic() + 20
        while not ready.exists():
            if self.holder.poll() is not None:
                raise NodeError(f"node init exited: {log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise NodeError("timed out waiting for the node's namespaces")
            time.sleep(0.05)
        # The holder's one child is the namespaces' PID 1.
        children = Path(f"/proc/{self.holder.pid}/task/{self.holder.pid}/children").read_text()
        self.init_pid = int(children.split()[0])
        self.netns_inode = os.stat(f"/proc/{self.init_pid}/ns/net").st_ino

    def preexec(self) -> Callable[[], None]:
        """Die with us, and start in the node's cgroups (the cgroup namespace's root)."""
        die = die_with_parent()
        if not self._cgroups:
            self._cgroups = host.make_cgroups(self.tag)
        paths = self._cgroups

        def preexec() -> None:
            die()
            host.enter_cgroups(paths)

        return preexec

    def enter(self, *argv: str, net_only: bool = False) -> list[str]:
        """``argv`` run inside the node's namespaces (its network namespace only: ``net_only``)."""
        ns = ["-n"] if net_only else ["-p", "-m", "-n", "-C"]
        return ["nsenter", "-t", str(self.init_pid), *ns, "--", *argv]

    def end(self) -> None:
        """SIGTERM to PID 1, which ends every other process of the namespaces;
        the holder killed if it has not ended in 15 s (``--kill-child`` takes
        PID 1 and so everything with it)."""
        if self.init_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGTERM)
        if self.holder is not None:
            try:
                self.holder.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait()

    def forget(self) -> None:
        """After ``end()`` and the last of the node's processes: no holder, no PID 1."""
        self.holder = None
        self.init_pid = 0
