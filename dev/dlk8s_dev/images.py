"""Container images built on this machine, with no registry.

Every image is built from a Containerfile under ``tools/images/`` by buildah
(``--storage-driver vfs --isolation chroot``: no daemon, no overlay mounts)
and kept as an OCI archive in a per-user cache, keyed by a hash of all its
inputs, so a second build is a cache hit that costs nothing. The real node
imports these archives into its containerd (``ctr -n k8s.io images import``).

- ``pause``: the pod sandbox, a static C program ``FROM scratch``.
- ``base``: a Debian root filesystem from mmdebstrap (Python 3, venv,
  CA certificates), fetched from the Debian mirror this machine's apt is
  configured with (read from /etc/apt/sources.list* at build time).

Usage: ``python -m dlk8s_dev.images [pause|base ...]`` prints each image's
name and archive.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = REPO_ROOT / "tools" / "images"
# Bump to rebuild every image (e.g. after changing how images are built).
BUILD_FORMAT = "1"
# Images take their names from here and their tags from their input hash.
NAME_PREFIX = "localhost/dlk8s"

BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
# What a container never needs; keeps the base image small.
DPKG_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/info/*",
    "/usr/share/locale/*",
    "/usr/share/lintian/*",
)


class ImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class Image:
    name: str  # e.g. localhost/dlk8s/base:0123456789ab
    archive: Path  # an oci-archive holding that one image

    @property
    def size(self) -> int:
        return self.archive.stat().st_size


def cache_dir() -> Path:
    env = os.environ.get("DLK8S_IMAGES_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlk8s-images"


def _log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


# -- where Debian packages come from -------------------------------------------


def _os_codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise ImageError("no VERSION_CODENAME in /etc/os-release")


def _apt_source_files() -> list[Path]:
    files = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    return [f for f in files if f.is_file()]


def _parse_sources(path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """(uri, suite, components) of every `deb` entry of one apt sources file."""
    text = path.read_text()
    if path.suffix == ".sources":  # deb822 stanzas
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            key = ""
            for line in stanza.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0].isspace() and key:
                    fields[key] += " " + line.strip()
                    continue
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
            if "deb" not in fields.get("types", "").split():
                continue
            if fields.get("enabled", "yes").lower() == "no":
                continue
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    yield uri, suite, fields.get("components", "main").split()
    else:  # one-line format: deb [options] uri suite component...
        for line in text.splitlines():
            line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()  # type: ignore[assignment]
            if len(line) >= 3 and line[0] == "deb":
                yield line[1], line[2], list(line[3:]) or ["main"]


def debian_sources(codename: str | None = None) -> list[str]:
    """sources.list lines for the configured Debian mirror of this release.

    Only the suites of this release (e.g. bookworm, bookworm-updates,
    bookworm-security) and only component main; other repositories that apt
    may have configured are left out.
    """
    codename = codename or _os_codename()
    lines: list[str] = []
    for path in _apt_source_files():
        for uri, suite, components in _parse_sources(path):
            if suite != codename and not suite.startswith(f"{codename}-"):
                continue
            if "main" not in components:
                continue
            line = f"deb {uri} {suite} main"
            if line not in lines:
                lines.append(line)
    if not any(line.split()[2] == codename for line in lines):
        raise ImageError(f"no Debian mirror for {codename} in /etc/apt/sources.list*")
    return lines


# -- the cache ------------------------------------------------------------------


def _digest(parts: Iterable[str | bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:12]


def _tool_version(*argv: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""
    return out.strip().splitlines()[0] if out.strip() else ""


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


def _cached(key: str, build: Callable[[Path], None]) -> Path:
    """The cache folder ``key``; made by ``build(tmp)`` when missing.

    A folder only appears once its build finished (built in a temporary
    folder, then renamed), so an interrupted build is redone, never used.
    """
    root = cache_dir()
    final = root / key
    if final.is_dir():
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
    return final


def _run(argv: Sequence[str], **kw: object) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        out = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        raise ImageError(f"{' '.join(argv)} exited {done.returncode}\n{out}")


# This machine may reach PyPI through a proxy whose CA only the host trusts
# (added to its bundle, and pip told so in /etc/pip.conf). RUN steps see the
# host's files read-only, so `pip install` in a build works as on the host;
# nothing of them ends up in an image.
BUILD_TIME_FILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf")


def _build_time_mounts() -> list[str]:
    return [f"{f}:{f}:ro" for f in BUILD_TIME_FILES if Path(f).is_file()]


def buildah_build(
    context: Path,
    name: str,
    out: Path,
    build_args: dict[str, str] | None = None,
    containerfile: Path | None = None,
) -> Path:
    """Build ``context`` with buildah into the oci-archive ``out`` named ``name``.

    buildah's storage is a throw-away folder beside ``out``: the archive is
    the only thing kept.
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
        argv = [*common, "bud", "--isolation", "chroot", "--layers=false", "-t", name]
        argv += [f"--volume={m}" for m in _build_time_mounts()]
        if containerfile:
            argv += ["-f", str(containerfile)]
        for k, v in (build_args or {}).items():
            argv += ["--build-arg", f"{k}={v}"]
        _run([*argv, str(context)])
        _run([*common, "push", name, f"oci-archive:{out}:{name}"])
    finally:
        # vfs storage holds plain files only, so removing it needs no umount.
        shutil.rmtree(store, ignore_errors=True)
    return out


# -- the images -------------------------------------------------------------------


def pause_image() -> Image:
    src = IMAGES_DIR / "pause"
    gcc = _tool_version("gcc", "--version")
    key = _digest(
        [BUILD_FORMAT, gcc, (src / "pause.c").read_bytes(), (src / "Containerfile").read_bytes()]
    )
    name = f"{NAME_PREFIX}/pause:{key}"

    def build(tmp: Path) -> None:
        _log(f"building {name}")
        ctx = tmp / "context"
        ctx.mkdir()
        shutil.copy(src / "Containerfile", ctx / "Containerfile")
        _run(["gcc", "-static", "-Os", "-s", "-o", str(ctx / "pause"), str(src / "pause.c")])
        buildah_build(ctx, name, tmp / "image.tar")
        shutil.rmtree(ctx)

    return Image(name, _cached(f"pause-{key}", build) / "image.tar")


def debian_rootfs(packages: Sequence[str] = BASE_PACKAGES) -> Path:
    """A Debian root filesystem (tar) with ``packages``, cached by its inputs."""
    codename = _os_codename()
    sources = debian_sources(codename)
    mmdebstrap = _tool_version("mmdebstrap", "--version")
    key = _digest([BUILD_FORMAT, codename, mmdebstrap, *sources, *sorted(packages), *DPKG_EXCLUDES])

    def build(tmp: Path) -> None:
        if not shutil.which("mmdebstrap"):
            raise ImageError("mmdebstrap is missing: run `make tools` as root")
        _log(f"mmdebstrap {codename} with {', '.join(packages)}")
        argv = [
            "mmdebstrap",
            "--quiet",
            "--mode=root",
            "--variant=apt",
            f"--include={','.join(packages)}",
            *(f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES),
            # apt's lists and caches are of no use in an image.
            "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*",
            codename,
            str(tmp / "rootfs.tar"),
            *sources,
        ]
        _run(argv)

    return _cached(f"rootfs-{codename}-{key}", build) / "rootfs.tar"


def base_image() -> Image:
    src = IMAGES_DIR / "base"
    rootfs = debian_rootfs()
    # The rootfs's folder name already is a hash of its inputs.
    key = _digest([BUILD_FORMAT, rootfs.parent.name, (src / "Containerfile").read_bytes()])
    name = f"{NAME_PREFIX}/base:{key}"

    def build(tmp: Path) -> None:
        _log(f"building {name}")
        ctx = tmp / "context"
        ctx.mkdir()
        shutil.copy(src / "Containerfile", ctx / "Containerfile")
        os.link(rootfs, ctx / "rootfs.tar")
        buildah_build(ctx, name, tmp / "image.tar")
        shutil.rmtree(ctx)

    return Image(name, _cached(f"base-{key}", build) / "image.tar")


BUILDERS: dict[str, Callable[[], Image]] = {"pause": pause_image, "base": base_image}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the local images (cached per user).")
    parser.add_argument("images", nargs="*", help=f"any of {', '.join(BUILDERS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.images) - set(BUILDERS)
    if unknown:
        parser.error(f"unknown images: {sorted(unknown)}")
    for which in args.images or list(BUILDERS):
        began = time.monotonic()
        image = BUILDERS[which]()
        took = time.monotonic() - began
        print(f"{image.name}\t{image.archive}\t{image.size / 1e6:.1f} MB\t{took:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
