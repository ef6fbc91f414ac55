"""``python -m dlk8s_dev.realnode clean``: remove what runs that no longer exist left."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..leftovers import clean_dead_runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        # Not argv[0]: under `python -m` that is this file, __main__.py.
        prog="python -m dlk8s_dev.realnode",
        description="A real node beside the kwok nodes: containerd, runc, CNI, kubelet, "
        "kube-proxy, CoreDNS, and a NetworkPolicy enforcer.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("clean", help="remove what runs that no longer exist left")
    parser.parse_args(argv)
    if not clean_dead_runs(print):
        print("nothing to clean")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
