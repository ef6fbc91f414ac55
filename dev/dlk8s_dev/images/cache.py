"""The per-user cache of builds: a folder per build, keyed by a hash of
all its inputs, made under a lock and only ever seen finished; the newest
few builds of each image kept."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def cache_dir() -> Path:
    env = os.environ.get("DLK8S_IMAGES_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlk8s-images"


def digest(parts: Iterable[str | bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:12]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached(key: str, build: Callable[[Path], None]) -> Path:
    """The cache folder ``key``; made by ``build(tmp)`` when missing.

    A folder only appears once its build finished (built in a temporary
    folder, then renamed), so an interrupted build is redone, never used.
    """
    root = cache_dir()
    final = root / key
    if final.is_dir():
        os.utime(final)  # used now: the last to go when older builds are pruned
        return final
    with _locked(root / f".{key}.lock"):
        if final.is_dir():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            build(tmp)
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    _prune_builds(key)
    return final


def clean_dead_builds() -> list[str]:
    """Remove the temporary folders of builds that died before they finished.

    A build's folder (``.<key>-*``) exists only while its key's lock is
    held, unless its process was killed: a folder whose lock is free is a
    dead build's, and one whose lock is held is left to the live build.
    """
    import fcntl

    removed = []
    for tmp in cache_dir().glob(".*-*"):
        key = tmp.name[1:].rsplit("-", 1)[0]
        if not tmp.is_dir() or not (cache_dir() / f".{key}.lock").exists():
            continue
        with (cache_dir() / f".{key}.lock").open("w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live build
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(f"{tmp} (an image build that did not finish)")
    return removed


# Builds of one image kept in the cache: the newest few, so that switching
# between branches does not rebuild, while every edit of hooks/ (a new
# operator image) does not add to the disk for good.
KEEP_BUILDS = 3


def _prune_builds(key: str) -> None:
    """Remove all but the KEEP_BUILDS most recently used builds like ``key``.

    A build in use is safe to remove: a node has imported or linked it, and
    a reader that has it open keeps reading.
    """
    kind = key.rsplit("-", 1)[0]
    builds = [
        p
        for p in cache_dir().glob(f"{kind}-*")
        if p.is_dir() and p.name.rsplit("-", 1)[0] == kind and kind != "store"
    ]
    builds.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in builds[KEEP_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)
