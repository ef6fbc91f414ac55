"""A local process that finds our files at a path compiled into it, as a pod
finds a Secret mounted there.

Kueue reads its metrics certificate from /etc/kueue/metrics/certs and
training-operator checks for its webhook certificate under
/tmp/k8s-webhook-server/serving-certs, both fixed paths. Run as local
processes, they get a mount namespace of their own in which the path's top
directory is overlaid with a copy of our folder; the real directory is
untouched, and the namespace ends with the process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

SETUP = (
    'set -e; mount -t tmpfs -o mode=755 dlk8s-overlay "$1"; '
    'mkdir -p "$(dirname "$1/upper/$3")" "$1/work"; '
    'cp -r "$2" "$1/upper/$3"; '
    'mount -t overlay overlay -o "lowerdir=$4,upperdir=$1/upper,workdir=$1/work" "$4"; '
    'shift 4; exec "$@"'
)


def with_files_at(mnt: Path, path: str, source: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` run where the directory ``path`` holds a copy of ``source``.

    ``mnt``, an empty directory of ours, carries the overlay's own tmpfs.
    unshare and sh exec, so the process's pid is ``argv``'s."""
    top, *rest = PurePosixPath(path).parts[1:]
    # Without root, a user namespace lends the rights to mount.
    as_user = [] if os.geteuid() == 0 else ["--map-root-user"]
    unshare = ["unshare", "--mount", "--propagation", "private", *as_user]
    script = [SETUP, "sh", str(mnt), str(source), "/".join(rest), f"/{top}"]
    return [*unshare, "sh", "-c", *script, *argv]
