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
- ``operator``: ``hooks/Dockerfile`` built as a user builds it, with the
  repository as the context (``.containerignore`` keeps it to the files the
  Dockerfile copies) and ``BASE_IMAGE`` set to ``base``.
- ``runtime``: what the examples and the tests that train for real run:
  Python with TensorFlow, TensorBoard, MXNet and the redis client (pinned in
  ``tools/images/runtime/requirements.txt``), redis-server and etcd-server
  from Debian.
- ``pytorch``: what PyTorchJobs run: Debian 13's CPU build of PyTorch 2.x
  (torchrun, gloo), its release and pinned packages in
  ``tools/images/pytorch/packages.txt``; README.md (Images) says why.
- ``paddle``: what PaddleJobs run: PaddlePaddle 3.0.0 for CPUs and the etcd
  client of its elastic launcher (pinned in
  ``tools/images/paddle/requirements.txt``, which says why that version).

Each image is named ``localhost/dlk8s/<image>:<input hash>``; a real node
also knows it as ``localhost/dlk8s/<image>:local`` (``Image.local_name``),
the name that values/realnode.yaml and the overlays in examples/local/ use.

Usage: ``python -m dlk8s_dev.images [pause|base|operator|runtime|pytorch|paddle ...]``
prints each image's name, archive, size and build time.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = REPO_ROOT / "tools" / "images"
# Bump to rebuild every image (e.g. after changing how images are built).
BUILD_FORMAT = "1"
# Images take their names from here and their tags from their input hash.
NAME_PREFIX = "localhost/dlk8s"

# The second name every image has on a real node (see Image.local_name).
LOCAL_TAG = "local"
# The operator image's build context is the repository; this file says which
# of its files are in it, and so what the cached image is keyed by.
CONTAINERIGNORE = REPO_ROOT / ".containerignore"
OPERATOR_DOCKERFILE = REPO_ROOT / "hooks" / "Dockerfile"

BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
# redis-server for a Caffe2Job MASTER's redis container, etcd-server for a
# PaddleJob master's etcd; redis-tools for redis-cli, to look inside;
# libgomp1 and libquadmath0, which MXNet's libmxnet.so links against but its
# wheel does not carry.
RUNTIME_PACKAGES = (
    *BASE_PACKAGES,
    "libgomp1",
    "libquadmath0",
    "redis-server",
    "redis-tools",
    "etcd-server",
)
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

    @property
    def repository(self) -> str:
        return self.name.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.name.rsplit(":", 1)[1]

    @property
    def local_name(self) -> str:
        """The name a real node also gives it: the same for every build, so
        files (values/realnode.yaml, examples/local/) can name it."""
        return f"{self.repository}:{LOCAL_TAG}"


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
    """sources.list lines for the configured Debian mirror of a release.

    Only the suites of this machine's release (e.g. bookworm,
    bookworm-updates, bookworm-security) and only component main; other
    repositories that apt may have configured are left out. Another release
    (``codename``, e.g. trixie for the PyTorch image) comes from the same
    mirrors: its suites are this release's, renamed (trixie, trixie-updates,
    trixie-security), since a Debian mirror carries every release.
    """
    host = _os_codename()
    codename = codename or host
    lines: list[str] = []
    for path in _apt_source_files():
        for uri, suite, components in _parse_sources(path):
            if suite != host and not suite.startswith(f"{host}-"):
                continue
            if "main" not in components:
                continue
            line = f"deb {uri} {codename}{suite[len(host) :]} main"
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


def _run(argv: Sequence[str], **kw: object) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        out = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        raise ImageError(f"{' '.join(argv)} exited {done.returncode}\n{out}")


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
            _run([*common, "pull", "--quiet", f"oci-archive:{base.archive}"])
        argv = [*common, "bud", "--isolation", "chroot", "--layers=false", "-t", name]
        argv += [f"--volume={m}" for m in _build_time_mounts()]
        if containerfile:
            argv += ["-f", str(containerfile)]
        for k, v in (build_args or {}).items():
            argv += ["--build-arg", f"{k}={v}"]
        _run([*argv, str(context)])
        _run([*common, "push", "--quiet", name, f"oci-archive:{out}:{name}"])
        _check_build_files(out)
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


def debian_rootfs(packages: Sequence[str] = BASE_PACKAGES, codename: str | None = None) -> Path:
    """A Debian root filesystem (tar) of release ``codename`` (default: this
    machine's) with ``packages``, cached by its inputs."""
    codename = codename or _os_codename()
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
    return _from_rootfs("base", debian_rootfs(), ("Containerfile",))


def context_files(root: Path = REPO_ROOT, ignore_file: Path = CONTAINERIGNORE) -> list[Path]:
    """The files of the build context at ``root`` that ``ignore_file`` lets in.

    Understands the allow-list form .containerignore is written in: ``*``
    first, then ``!path`` for what goes in, then patterns of what stays out
    of that (``**/name`` for a name at any depth), later lines winning, as
    buildah and docker read it.
    """
    lines = [
        line.strip()
        for line in ignore_file.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines or lines[0] != "*":
        raise ImageError(f"{ignore_file}: must start with `*` and list what goes in as `!path`")
    files: set[Path] = set()
    for line in lines[1:]:
        if line.startswith("!"):
            path = root / line[1:].strip("/")
            found = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            files |= {p.relative_to(root) for p in found}
        else:
            files = {f for f in files if not _ignored(f, line.rstrip("/"))}
    return sorted(files)


def _ignored(path: Path, pattern: str) -> bool:
    if pattern.startswith("**/"):
        # A name at any depth: leaves out a folder of that name and all in it.
        return any(fnmatch(part, pattern[3:]) for part in path.parts)
    parts = len(Path(pattern).parts)
    # A pattern for a folder also leaves out everything below it.
    return any(
        fnmatch(str(Path(*path.parts[:n])), pattern) for n in range(parts, len(path.parts) + 1)
    )


def operator_image() -> Image:
    """hooks/Dockerfile built from the repository, FROM the Debian base.

    Keyed by the base and by every file of the build context, so any change
    under hooks/ (or of pyproject.toml, README.md, LICENSE, VERSION) builds
    it again, and nothing else does.
    """
    base = base_image()
    files = context_files()
    if OPERATOR_DOCKERFILE.relative_to(REPO_ROOT) not in files:
        raise ImageError(f"{CONTAINERIGNORE} leaves out {OPERATOR_DOCKERFILE}")
    contents = [part for f in files for part in (str(f), (REPO_ROOT / f).read_bytes())]
    key = _digest([BUILD_FORMAT, base.name, CONTAINERIGNORE.read_bytes(), *contents])
    name = f"{NAME_PREFIX}/operator:{key}"

    def build(tmp: Path) -> None:
        _log(f"building {name} from {OPERATOR_DOCKERFILE.relative_to(REPO_ROOT)}")
        buildah_build(
            REPO_ROOT,
            name,
            tmp / "image.tar",
            build_args={"BASE_IMAGE": base.name},
            containerfile=OPERATOR_DOCKERFILE,
            bases=[base],
        )

    return Image(name, _cached(f"operator-{key}", build) / "image.tar")


def _from_rootfs(which: str, rootfs: Path, inputs: Sequence[str], about: str = "") -> Image:
    """``tools/images/<which>/``'s Containerfile with its ``inputs`` as the
    context, beside the root filesystem ``rootfs``; keyed by all of them."""
    src = IMAGES_DIR / which
    # The rootfs's folder name already is a hash of its inputs.
    key = _digest([BUILD_FORMAT, rootfs.parent.name, *((src / f).read_bytes() for f in inputs)])
    name = f"{NAME_PREFIX}/{which}:{key}"

    def build(tmp: Path) -> None:
        _log(f"building {name}{about}")
        ctx = tmp / "context"
        ctx.mkdir()
        for f in inputs:
            shutil.copy(src / f, ctx / f)
        os.link(rootfs, ctx / "rootfs.tar")
        buildah_build(ctx, name, tmp / "image.tar")
        shutil.rmtree(ctx)

    return Image(name, _cached(f"{which}-{key}", build) / "image.tar")


def runtime_image() -> Image:
    rootfs = debian_rootfs(RUNTIME_PACKAGES)
    about = " (TensorFlow, MXNet, redis, etcd: a few minutes the first time)"
    return _from_rootfs("runtime", rootfs, ("Containerfile", "requirements.txt"), about)


def pytorch_packages() -> list[str]:
    """The PyTorch image's Debian release and packages (``pkg=version`` pins)."""
    lines = (IMAGES_DIR / "pytorch" / "packages.txt").read_text().splitlines()
    words = [w for line in lines for w in line.split("#", 1)[0].split()]
    if not words or "=" in words[0]:
        raise ImageError("tools/images/pytorch/packages.txt: first the codename, then packages")
    return words


def pytorch_image() -> Image:
    """PyTorch from Debian's python3-torch (README.md, Images, says why)."""
    codename, *packages = pytorch_packages()
    rootfs = debian_rootfs(packages, codename)
    return _from_rootfs("pytorch", rootfs, ("Containerfile", "tcpstore.py"))


# libgomp1: Paddle's libpaddle.so links against it, and its wheel does not carry it.
PADDLE_PACKAGES = (*BASE_PACKAGES, "libgomp1")


def paddle_image() -> Image:
    """PaddlePaddle's CPU wheel in a venv (requirements.txt says which and why)."""
    rootfs = debian_rootfs(PADDLE_PACKAGES)
    about = " (PaddlePaddle: a minute or two the first time)"
    return _from_rootfs("paddle", rootfs, ("Containerfile", "requirements.txt", "check.py"), about)


BUILDERS: dict[str, Callable[[], Image]] = {
    "pause": pause_image,
    "base": base_image,
    "operator": operator_image,
    "runtime": runtime_image,
    "pytorch": pytorch_image,
    "paddle": paddle_image,
}


# -- the node's image store -------------------------------------------------------

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


def node_store(log: Callable[[str], None] = _log) -> Path:
    """A containerd root holding the ``STORE_IMAGES``, unpacked, made once per user.

    Importing the runtime image into a fresh containerd costs about a minute
    (a gigabyte and a half to gunzip and write); a node instead links this
    root into its own (``link_store``) in a few seconds. Keyed by the images'
    names (their input hashes) and containerd's version.
    """
    images = [BUILDERS[n]() for n in STORE_IMAGES]
    containerd = _tool_version("containerd", "--version")
    key = _digest([BUILD_FORMAT, containerd, *(i.name for i in images)])

    def build(tmp: Path) -> None:
        log(f"importing {', '.join(i.name for i in images)} into a node image store")
        _fill_store(tmp, images)

    store = _cached(f"store-{key}", build)
    _prune_stores(keep=store)
    return store / "root"


def _fill_store(tmp: Path, images: Sequence[Image]) -> None:
    """containerd (no CRI, its mounts in a namespace of its own) imports the images."""
    from . import datafiles
    from .pdeath import die_with_parent

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
            _run([*ctr, "images", "import", str(image.archive)])
            _run([*ctr, "images", "tag", "--force", image.name, image.local_name])
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


def push_hint(image: Image) -> str:
    version = (REPO_ROOT / "VERSION").read_text().strip()
    return f"""
{image.name} is an OCI archive: {image.archive}
A real node of `make cluster` has it as {image.local_name} (values/realnode.yaml).
To run it on your own cluster, push it to your registry and point the chart at it:
  skopeo copy oci-archive:{image.archive} docker://REGISTRY/dlk8s/operator:{version}
  helm install dlk8s charts/dlk8s -n dlk8s-system --create-namespace \\
    --set image.repository=REGISTRY/dlk8s/operator --set image.tag={version}
(or load it into a container engine: podman load -i {image.archive});
`make publish REGISTRY=...` pushes it with the runtime image and the chart."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the local images (cached per user).")
    parser.add_argument("images", nargs="*", help=f"any of {', '.join(BUILDERS)} (default: all)")
    parser.add_argument(
        "--store", action="store_true", help="also the real node's image store (of STORE_IMAGES)"
    )
    parser.add_argument(
        "--push-hint", action="store_true", help="say how to push the image to a registry"
    )
    args = parser.parse_args(argv)
    unknown = set(args.images) - set(BUILDERS)
    if unknown:
        parser.error(f"unknown images: {sorted(unknown)}")
    for which in args.images or list(BUILDERS):
        began = time.monotonic()
        image = BUILDERS[which]()
        took = time.monotonic() - began
        print(f"{image.name}\t{image.archive}\t{image.size / 1e6:.1f} MB\t{took:.1f}s", flush=True)
        if args.push_hint:
            print(push_hint(image), flush=True)
    if args.store:
        began = time.monotonic()
        store = node_store()
        took = time.monotonic() - began
        print(f"node image store\t{store}\t{took:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
