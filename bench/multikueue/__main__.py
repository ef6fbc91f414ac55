"""How much MultiKueue's dispatch adds to a job's start (issue #47).

    make bench-multikueue                                   # bench/results/multikueue.*
    .tools/venv/bin/python -m bench.multikueue --jobs 20 --out /tmp/mk

A manager and two workers on this machine (dlk8s_dev.multicluster, as
`make cluster MULTIKUEUE=1`): three control planes, each with Kueue, the
chart and an operator. --jobs TFJobs of 1 MASTER and 1 WORKER, each pod
asking for 100m of CPU, in two modes, each in a namespace of its own:

- direct: submitted at once to the first worker, in its LocalQueue;
- dispatched: the same jobs submitted at once to the manager, with
  spec.managedBy kueue.x-k8s.io/multikueue, which sends each to a worker.

Per job: from its POST's return to its last pod created on the worker that
runs it, each time the receipt of a watch event by a watcher process of
that worker (bench/common/watcher.py) on the machine's monotonic clock.
The quota admits every job at once on either worker: the quota is no gate.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.common.devtools import MultiCluster, interrupt_on_termination, pinned_versions
from bench.common.paths import RESULTS
from bench.multikueue.modes import run_mode
from bench.multikueue.report import markdown

MODES = ("direct", "dispatched")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.multikueue",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--jobs", type=int, default=100, help="TFJobs per mode")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a mode may take")
    p.add_argument("--out", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its clusters as Ctrl-C does
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    results: dict[str, Any] = {"runs": {}}
    with MultiCluster() as clusters:
        results["meta"] = {
            "jobs": args.jobs,
            "kueue": pinned_versions().get("KUEUE_VERSION", "?"),
            "startup_seconds": round(time.monotonic() - began, 1),
        }
        for mode in MODES:
            results["runs"][mode] = run_mode(clusters, mode, args.jobs, args.timeout)
    results["meta"]["wall_seconds"] = round(time.monotonic() - began, 1)
    (args.out / "multikueue.json").write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results)
    (args.out / "multikueue.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
