"""How long a queued job takes to get its pods once Kueue admits it (issue #32).

    make bench-kueue                                  # the full run (bench/results/kueue.*)
    .tools/venv/bin/python -m bench.kueue --jobs 40 --quota-jobs 10 --out /tmp/kueue

One local control plane with Kueue's manager beside it (LocalCluster(kueue=True)),
the chart installed with kueue.enabled=true, so every operator here runs with
--kueue. --jobs TFJobs (1 MASTER + --job-workers WORKERs, each pod asking for
--gpus-per-pod nvidia.com/gpu; the MASTER exits 0 --run-for after it runs,
kwok's exit-code annotation, and the job succeeds) in three modes, each on a
fresh operator and in a namespace of its own:

- kueue: every job names a LocalQueue whose ClusterQueue's GPU quota admits
  --quota-jobs of them at once; the queue drains as jobs end. Per job: from
  its Workload's Admitted condition turning True to its last pod created.
- gated: the same jobs with no queue label, the benchmark itself keeping
  --quota-jobs in flight (it submits the next when one succeeds): the same
  load as through Kueue. Per job: from the job created to its last pod created.
- burst: the same jobs with no queue label, all submitted at once.
- trainer-stock, trainer-tuned: the kueue mode's jobs as Kubeflow Trainer v2
  TrainJobs (bench/kueue/trainer.py), through Kueue's own TrainJob
  integration, with Trainer and JobSet (`make tools-bench`) stock or tuned.

Every time is the receipt of a watch event by one watcher process
(bench/common/watcher.py), on the machine's monotonic clock; the Workloads' seconds-
resolution lastTransitionTime is not used. The nodes have GPUs for every pod
of every mode, so the quota is the only gate. Checks on the kueue mode: no
more Workloads admitted at once than the quota, no pod created before its
Workload's admission (compared by resourceVersion, etcd's order), no
readmission, and nothing left reserved in the ClusterQueue once it drained.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.common.context import add_common_args, open_context
from bench.common.devtools import interrupt_on_termination, pinned_versions
from bench.common.paths import RESULTS
from bench.common.peers import PEERS
from bench.kueue.modes import MODES, run_mode
from bench.kueue.report import markdown
from bench.kueue.trainer import FRAMEWORK, TRAINER_MODES, run_trainer_mode


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.kueue",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--jobs", type=int, default=200, help="TFJobs per mode")
    p.add_argument("--job-workers", type=int, default=3, help="WORKERs per job (and 1 MASTER)")
    p.add_argument("--gpus-per-pod", type=int, default=1)
    p.add_argument("--quota-jobs", type=int, default=50, help="jobs the quota admits at once")
    p.add_argument("--run-for", default="10s", help="how long a MASTER runs (a Go duration)")
    p.add_argument("--gpus-per-node", type=int, default=250, help="enough for every mode's pods")
    p.add_argument(
        "--modes",
        default=",".join(MODES + TRAINER_MODES),
        help="which of kueue, gated, burst, trainer-stock, trainer-tuned",
    )
    add_common_args(p)
    p.set_defaults(timeout=900.0, out=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results: dict[str, Any] = {"runs": {}}
    # Kueue's TrainJob integration only where a mode needs it: one more controller.
    frameworks = [FRAMEWORK] if set(modes) & set(TRAINER_MODES) else []
    kcm = sorted({c for m in modes if m in TRAINER_MODES for c in PEERS[m].kcm_controllers()})
    opened = open_context(
        args,
        kueue=True,
        gpus_per_node=args.gpus_per_node,
        kueue_frameworks=frameworks,
        kcm_controllers=kcm,
    )
    with opened as (ctx, meta):
        keys = ("jobs", "job_workers", "gpus_per_pod", "quota_jobs", "run_for")
        results["meta"] = meta | {k: getattr(args, k) for k in keys}
        results["meta"]["kueue"] = pinned_versions().get("KUEUE_VERSION", "?")
        for mode in modes:
            run = run_trainer_mode if mode in TRAINER_MODES else run_mode
            results["runs"][mode] = run(ctx, mode)
            # After each mode: a later one that fails leaves the earlier figures.
            (ctx.raw / "kueue-partial.json").write_text(json.dumps(results, indent=1))
    results["meta"]["wall_seconds"] = round(time.monotonic() - began, 1)
    (args.out / "kueue.json").write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results)
    (args.out / "kueue.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
