"""The images a node has, and how they get into its containerd.

The big ones (pause, base, runtime, pytorch, paddle: ``STORE_IMAGES``) come
with a per-user containerd root in which they are already unpacked,
hard-linked into the node's own root before containerd starts (a few
seconds, where importing the runtime image takes a minute); the rest (the
operator, rebuilt with every edit of hooks/) are imported once containerd
runs. Each is there under its hash tag and as
``localhost/dlk8s/<image>:local``. A bare node gets the pause image alone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import images as imagelib
from ..nodehost import NodeError


def load_into(socket: Path, image: imagelib.Image) -> None:
    """Import an oci-archive into the containerd at ``socket`` (namespace
    k8s.io), under its name and its ``local_name``."""
    ctr = ["ctr", "--address", str(socket), "-n", "k8s.io", "images"]
    for argv in (
        [*ctr, "import", str(image.archive)],
        [*ctr, "tag", "--force", image.name, image.local_name],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NodeError(f"{' '.join(argv)}: {done.stderr}")


def load_command(socket: Path) -> str:
    """How to load another image into the node (an oci-archive, e.g. from
    `buildah push IMG oci-archive:FILE:NAME` or `skopeo copy`)."""
    return f"ctr --address {socket} -n k8s.io images import FILE"


@dataclass
class NodeImages:
    # Images the node has beside imagelib.STORE_IMAGES, imported at start
    # (names in imagelib.BUILDERS).
    preload: Sequence[str]
    # Only the pause image (no store, no preload): the node pulls every other
    # image from a registry, as a user's node does (registry.py, test_publish).
    bare: bool
    log: Callable[[str], None]
    loaded: dict[str, imagelib.Image] = field(default_factory=dict)
    _store: Future[Path] | None = None
    _built: dict[str, Future[imagelib.Image]] = field(default_factory=dict)
    _linked: bool = False

    @property
    def extra(self) -> list[str]:
        return [n for n in self.preload if n not in imagelib.STORE_IMAGES]

    def build(self, pool: ThreadPoolExecutor) -> None:
        """Start building (or finding in the cache) the store and every image, in ``pool``."""
        self._store = None if self.bare else pool.submit(imagelib.node_store, self.log)
        wanted = ["pause"] if self.bare else [*imagelib.STORE_IMAGES, *self.extra]
        self._built = {n: pool.submit(imagelib.BUILDERS[n]) for n in wanted}

    def link_store(self, containerd_root: Path) -> None:
        """Once the store is made: link it into the node's containerd root (before containerd)."""
        store = self._store
        self._linked = store is not None and imagelib.link_store(store.result(), containerd_root)
        if store is not None and not self._linked:
            self.log("[realnode] cannot link the image store here: importing every image")

    def load(self, pool: ThreadPoolExecutor, socket: Path) -> list[Future[None]]:
        """Once containerd runs: import what the store did not bring, in ``pool``."""
        for n, fut in self._built.items():
            self.loaded[n] = fut.result()
        return [
            pool.submit(load_into, socket, img)
            for n, img in self.loaded.items()
            if n in self.extra or not self._linked
        ]
