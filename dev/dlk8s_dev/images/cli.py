"""``python -m dlk8s_dev.images [pause|base|operator|runtime|pytorch|paddle ...]``:
builds the images (cached per user) and prints each one's name, archive,
size and build time; ``--store`` the real node's image store too."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from .builders import BUILDERS
from .image import REPO_ROOT, Image
from .store import node_store


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
    parser = argparse.ArgumentParser(
        # Not argv[0]: under `python -m` that is the package's __main__.py.
        prog="python -m dlk8s_dev.images",
        description="Build the local images (cached per user).",
    )
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
