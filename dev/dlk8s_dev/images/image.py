"""What every part of the image builds shares: ``Image`` (a name and its
OCI archive), ``ImageError``, how images are named, and running a build's
commands."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# dev/dlk8s_dev/images/ is three folders below the checkout.
REPO_ROOT = Path(__file__).resolve().parents[3]
IMAGES_DIR = REPO_ROOT / "tools" / "images"
# Bump to rebuild every image (e.g. after changing how images are built).
BUILD_FORMAT = "1"
# Images take their names from here and their tags from their input hash.
NAME_PREFIX = "localhost/dlk8s"

# The second name every image has on a real node (see Image.local_name).
LOCAL_TAG = "local"


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


def log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


def tool_version(*argv: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""
    return out.strip().splitlines()[0] if out.strip() else ""


def run(argv: Sequence[str], **kw: object) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        out = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        raise ImageError(f"{' '.join(argv)} exited {done.returncode}\n{out}")
