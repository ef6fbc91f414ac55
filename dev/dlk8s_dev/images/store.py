"""The real node's image store: a containerd root with the big images
already unpacked, made once per user, that each node links into its own."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import datafiles
from ..pdeath import die_with_parent
from .builders import BUILDERS
from .cache import cache_dir, cached, digest
from .image import BUILD_FORMAT, Image, ImageError, log, run, tool_version

# The images every real node has from a stored containerd root: the big ones
# that rarely change. The rest (the operator, which changes with every edit
# of hooks/) is imported at each start, in a second or two.
STORE_IMAGES = ("pause", "base", "runtime", "pytorch", "paddle")
# containerd's two databases: the only files of its root it changes in place.
# Everything else (blobs, unpacked layers) is written once and then only read.
STORE_DATABASES = (
    "io.containerd.metadata.v1.bolt/meta.db",
    "io.containerd.snapshotter.v1.overlayfs/metadata.db",
)


def node_store(log: Callable[[str], None] = log) -> Path:
    """A containerd root holding the ``STORE_IMAGES``, unpacked, made once per user.

    Importing the runtime image into a fresh containerd costs about a minute
    (a gigabyte and a half to gunzip and write); a node instead links this
    root into its own (``link_store``) in a few seconds. Keyed by the images'
    names (their input hashes) and containerd's version.
    """
    images = [BUILDERS[n]() for n in STORE_IMAGES]
    containerd = tool_version("containerd", "--version")
    key = digest([BUILD_FORMAT, containerd, *(i.name for i in images)])

    def build(tmp: Path) -> None:
        log(f"importing {', '.join(i.name for i in images)} into a node image store")
        _fill_store(tmp, images)

    store = cached(f"store-{key}", build)
    _prune_stores(keep=store)
    return store / "root"


def _fill_store(tmp: Path, images: Sequence[Image]) -> None:
    """containerd (no CRI, its mounts in a namespace of its own) imports the images."""
    root, state = tmp / "root", tmp / "state"
    socket = state / "containerd.sock"
    config = tmp / "containerd.toml"
    config.write_text(
        datafiles.text(
            "store-containerd.toml", root=root, state=state, socket=socket, opt=tmp / "opt"
        )
    )
    Path("/run/containerd").mkdir(parents=True, exist_ok=True)
    log_file = tmp / "containerd.log"
    with log_file.open("wb") as out:
        # Unpacking mounts each layer's snapshot: in a mount namespace of its
        # own those mounts vanish with it, whatever happens.
        daemon = subprocess.Popen(
            [
                "unshare", "--mount", "--propagation", "private", "--fork", "--kill-child",
                "sh", "-c",
                'mount -t tmpfs tmpfs /run/containerd && exec containerd --config "$0"',
                str(config),
            ],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not socket.exists():
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise ImageError(f"containerd for the store: {log_file.read_text()[-2000:]}")
            time.sleep(0.1)
        ctr = ["ctr", "--address", str(socket), "-n", "k8s.io"]
        for image in images:
            run([*ctr, "images", "import", str(image.archive)])
            run([*ctr, "images", "tag", "--force", image.name, image.local_name])
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    shutil.rmtree(state, ignore_errors=True)


def _prune_stores(keep: Path) -> None:
    """Remove the other stores: each is gigabytes, and only the newest is used.

    A node's root holds hard links, not references, so removing a store
    never touches a node that runs from it; one that is linking from it right
    now holds its lock, and the store stays until the next time.
    """
    import fcntl

    for other in cache_dir().glob("store-*"):
        if other == keep or not other.is_dir():
            continue
        with (cache_dir() / f".{other.name}.lock").open("w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            shutil.rmtree(other, ignore_errors=True)


def link_store(store: Path, dest: Path) -> bool:
    """Make ``dest`` a containerd root with the store's images, by hard links.

    The databases are copied, since containerd writes them in place; every
    other file is written once and never changed (overlayfs copies a file up
    before a container changes it), so the node shares it with the store.
    False when links cannot be made (another file system): then import.
    """
    import fcntl

    with (store.parent.parent / f".{store.parent.name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        dest.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["cp", "-a", "--link", f"{store}/.", str(dest)], capture_output=True, text=True
        )
        if done.returncode != 0:
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            return False
        for db in STORE_DATABASES:
            (dest / db).unlink()
            shutil.copy2(store / db, dest / db)
    return True
