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
prints each image's name, archive, size and build time (cli.py).

- ``builders``: the images above (``BUILDERS``), from their inputs;
- ``buildah``: a Containerfile built into an OCI archive;
- ``cache``: the per-user cache of builds, keyed by their inputs;
- ``sources``: the Debian mirror the root filesystems come from;
- ``store``: the real node's store of the big images, unpacked once;
- ``image``: what they share (``Image``, ``ImageError``, the names).
"""

from .buildah import BUILD_TIME_FILES, buildah_build
from .builders import (
    BASE_PACKAGES,
    BUILDERS,
    CONTAINERIGNORE,
    DPKG_EXCLUDES,
    OPERATOR_DOCKERFILE,
    PADDLE_PACKAGES,
    RUNTIME_PACKAGES,
    base_image,
    context_files,
    debian_rootfs,
    operator_image,
    paddle_image,
    pause_image,
    pytorch_image,
    pytorch_packages,
    runtime_image,
)
from .cache import KEEP_BUILDS, cache_dir, clean_dead_builds
from .cli import main, push_hint
from .image import BUILD_FORMAT, IMAGES_DIR, LOCAL_TAG, NAME_PREFIX, REPO_ROOT, Image, ImageError
from .sources import debian_sources
from .store import STORE_DATABASES, STORE_IMAGES, link_store, node_store

__all__ = [
    "BASE_PACKAGES",
    "BUILDERS",
    "BUILD_FORMAT",
    "BUILD_TIME_FILES",
    "CONTAINERIGNORE",
    "DPKG_EXCLUDES",
    "IMAGES_DIR",
    "KEEP_BUILDS",
    "LOCAL_TAG",
    "NAME_PREFIX",
    "OPERATOR_DOCKERFILE",
    "PADDLE_PACKAGES",
    "REPO_ROOT",
    "RUNTIME_PACKAGES",
    "STORE_DATABASES",
    "STORE_IMAGES",
    "Image",
    "ImageError",
    "base_image",
    "buildah_build",
    "cache_dir",
    "clean_dead_builds",
    "context_files",
    "debian_rootfs",
    "debian_sources",
    "link_store",
    "main",
    "node_store",
    "operator_image",
    "paddle_image",
    "pause_image",
    "push_hint",
    "pytorch_image",
    "pytorch_packages",
    "runtime_image",
]
