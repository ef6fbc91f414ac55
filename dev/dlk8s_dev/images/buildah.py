"""Building a Containerfile with buildah into an OCI archive: no daemon, no
overlay mounts, no registry; the host's CA bundle lent to RUN steps only."""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from .image import Image, ImageError, run

# This machine may reach PyPI through a proxy whose CA only the host trusts
# (added to its bundle). RUN steps see the host's bundle read-only in place of
# the image's own, so `pip install` in a build works as on the host: Debian's
# pip reads the system bundle, so the host's /etc/pip.conf (which only points
# pip at that bundle) is not needed, and is not mounted, because buildah
# would leave an empty file where a mount had no file to cover. A volume is
# never committed; `_check_build_files` proves it of every image built.
BUILD_TIME_FILES = ("/etc/ssl/certs/ca-certificates.crt",)


def _build_time_mounts() -> list[str]:
    return [f"{f}:{f}:ro" for f in BUILD_TIME_FILES if Path(f).is_file()]


def _layers(archive: Path) -> Iterator[tarfile.TarFile]:
    """Each layer of the one image in an oci-archive, as an open tar."""
    with tarfile.open(archive) as outer:

        def blob(digest: str) -> IO[bytes]:
            member = outer.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            assert member is not None
            return member

        index = json.load(outer.extractfile("index.json"))  # type: ignore[arg-type]
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as tar:
                yield tar


def _check_build_files(archive: Path) -> None:
    """No stand-in for a file mounted for the build may be in the image.

    buildah mounts over the image's own file (which stays as it was) and
    makes an empty one where there was none; that empty file is what a build
    could leave behind, so that is what this looks for.
    """
    mounted = {f.lstrip("/") for f in BUILD_TIME_FILES}
    for tar in _layers(archive):
        for member in tar:
            if member.name.lstrip("./") in mounted and member.isfile() and member.size == 0:
                raise ImageError(f"{archive}: the build left an empty /{member.name} in the image")


def buildah_build(
    context: Path,
    name: str,
    out: Path,
    build_args: dict[str, str] | None = None,
    containerfile: Path | None = None,
    bases: Sequence[Image] = (),
) -> Path:
    """Build ``context`` with buildah into the oci-archive ``out`` named ``name``.

    buildah's storage is a throw-away folder beside ``out``: the archive is
    the only thing kept. ``bases``: images of ours the Containerfile builds
    FROM, loaded into that storage first (there is no registry to pull them
    from).
    """
    if not shutil.which("buildah"):
        raise ImageError("buildah is missing: run `make tools` as root")
    store = Path(tempfile.mkdtemp(prefix=".buildah-", dir=out.parent))
    common = [
        "buildah",
        "--root",
        str(store / "root"),
        "--runroot",
        str(store / "run"),
        "--storage-driver",
        "vfs",
    ]
    try:
        for base in bases:
            run([*common, "pull", "--quiet", f"oci-archive:{base.archive}"])
        argv = [*common, "bud", "--isolation", "chroot", "--layers=false", "-t", name]
        argv += [f"--volume={m}" for m in _build_time_mounts()]
        if containerfile:
            argv += ["-f", str(containerfile)]
        for k, v in (build_args or {}).items():
            argv += ["--build-arg", f"{k}={v}"]
        run([*argv, str(context)])
        run([*common, "push", "--quiet", name, f"oci-archive:{out}:{name}"])
        _check_build_files(out)
    finally:
        # vfs storage holds plain files only, so removing it needs no umount.
        shutil.rmtree(store, ignore_errors=True)
    return out
