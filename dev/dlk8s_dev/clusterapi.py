"""What the parts that run beside a local control plane use of it.

The real node (realnode/) and Kueue's manager (kueue.py) talk to the API
server, write kubeconfigs and wait on the cluster's stop signal through
``Cluster``, which LocalCluster (localcluster/) fulfils. A Protocol rather
than LocalCluster itself: LocalCluster starts and stops them, so it imports
them, and an import back would close a circle.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol


class ClusterError(RuntimeError):
    pass


class Cluster(Protocol):
    # Read-only: the parts read these, only LocalCluster sets them.
    @property
    def tools_bin(self) -> Path: ...

    @property
    def workdir(self) -> Path: ...

    @property
    def log(self) -> Callable[[str], None]: ...

    # Set when the run is asked to stop: a wait gives up at its next look.
    @property
    def interrupt(self) -> threading.Event | None: ...

    @property
    def kubeconfig(self) -> Path: ...

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]: ...

    def api(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]: ...

    def wait_established(self, *targets: str, seconds: float = 90) -> None: ...

    def write_kubeconfig(self, path: Path, token: str, user: str = "admin") -> Path: ...


def says_ready(node: dict[str, Any]) -> bool | None:
    """Whether a node says it is Ready; None before it says either."""
    conditions = node.get("status", {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    return None if ready is None else ready.get("status") == "True"
