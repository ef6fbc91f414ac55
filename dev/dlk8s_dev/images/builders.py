"""The images, each built from its Containerfile under ``tools/images/`` and
cached by its inputs: ``BUILDERS`` maps each name to its build."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from fnmatch import fnmatch
from pathlib import Path

from .buildah import buildah_build
from .cache import cached, digest
from .image import (
    BUILD_FORMAT,
    IMAGES_DIR,
    NAME_PREFIX,
    REPO_ROOT,
    Image,
    ImageError,
    log,
    run,
    tool_version,
)
from .sources import debian_sources, os_codename

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


def pause_image() -> Image:
    src = IMAGES_DIR / "pause"
    gcc = tool_version("gcc", "--version")
    key = digest(
        [BUILD_FORMAT, gcc, (src / "pause.c").read_bytes(), (src / "Containerfile").read_bytes()]
    )
    name = f"{NAME_PREFIX}/pause:{key}"

    def build(tmp: Path) -> None:
        log(f"building {name}")
        ctx = tmp / "context"
        ctx.mkdir()
        shutil.copy(src / "Containerfile", ctx / "Containerfile")
        run(["gcc", "-static", "-Os", "-s", "-o", str(ctx / "pause"), str(src / "pause.c")])
        buildah_build(ctx, name, tmp / "image.tar")
        shutil.rmtree(ctx)

    return Image(name, cached(f"pause-{key}", build) / "image.tar")


def debian_rootfs(packages: Sequence[str] = BASE_PACKAGES, codename: str | None = None) -> Path:
    """A Debian root filesystem (tar) of release ``codename`` (default: this
    machine's) with ``packages``, cached by its inputs."""
    codename = codename or os_codename()
    sources = debian_sources(codename)
    mmdebstrap = tool_version("mmdebstrap", "--version")
    key = digest([BUILD_FORMAT, codename, mmdebstrap, *sources, *sorted(packages), *DPKG_EXCLUDES])

    def build(tmp: Path) -> None:
        if not shutil.which("mmdebstrap"):
            raise ImageError("mmdebstrap is missing: run `make tools` as root")
        log(f"mmdebstrap {codename} with {', '.join(packages)}")
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
        run(argv)

    return cached(f"rootfs-{codename}-{key}", build) / "rootfs.tar"


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
    key = digest([BUILD_FORMAT, base.name, CONTAINERIGNORE.read_bytes(), *contents])
    name = f"{NAME_PREFIX}/operator:{key}"

    def build(tmp: Path) -> None:
        log(f"building {name} from {OPERATOR_DOCKERFILE.relative_to(REPO_ROOT)}")
        buildah_build(
            REPO_ROOT,
            name,
            tmp / "image.tar",
            build_args={"BASE_IMAGE": base.name},
            containerfile=OPERATOR_DOCKERFILE,
            bases=[base],
        )

    return Image(name, cached(f"operator-{key}", build) / "image.tar")


def _from_rootfs(which: str, rootfs: Path, inputs: Sequence[str], about: str = "") -> Image:
    """``tools/images/<which>/``'s Containerfile with its ``inputs`` as the
    context, beside the root filesystem ``rootfs``; keyed by all of them."""
    src = IMAGES_DIR / which
    # The rootfs's folder name already is a hash of its inputs.
    key = digest([BUILD_FORMAT, rootfs.parent.name, *((src / f).read_bytes() for f in inputs)])
    name = f"{NAME_PREFIX}/{which}:{key}"

    def build(tmp: Path) -> None:
        log(f"building {name}{about}")
        ctx = tmp / "context"
        ctx.mkdir()
        for f in inputs:
            shutil.copy(src / f, ctx / f)
        os.link(rootfs, ctx / "rootfs.tar")
        buildah_build(ctx, name, tmp / "image.tar")
        shutil.rmtree(ctx)

    return Image(name, cached(f"{which}-{key}", build) / "image.tar")


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
