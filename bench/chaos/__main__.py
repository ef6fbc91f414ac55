"""The chaos suite: faults an operator of a real cluster meets, on the local
control plane (`make chaos`; not part of `make test`).

    make chaos                                   # the full run, ~35 minutes
    .tools/venv/bin/python -m bench.chaos --short  # fewer jobs and kills

One local control plane (4 kwok nodes; scenario 7 gets a second one, with
Kueue, once the others are done), the chart installed, the operator run as
a local process with the chart's ServiceAccount, restarted like a kubelet
would if it exits on its own (each such restart is counted). The jobs of
every scenario but 5 and 8 are TFJobs and, every third, a PyTorchJob (a MASTER and
WORKERs; in 1, 6 and 7 every other of those is elastic: WORKERs only, with an
elasticPolicy); on kwok their MASTER (an elastic job's WORKERs) ends with 0
after a while. Scenarios, each in a namespace of its own:

1. operator-kill: the operator SIGKILLed at random moments, ten times,
   during a burst of 100 jobs, each time restarted after a random pause;
2. apiserver-restart: kube-apiserver killed and restarted three times
   while jobs start and finish;
3. sigstop-compact: the operator stopped (SIGSTOP) while jobs change (some
   finish, some are deleted, new ones come), etcd compacted so that its
   watches come back with 410, then resumed;
4. leader-kill: two operators with leader election, the leader SIGKILLed
   during a burst, the survivor SIGTERMed at the end (the hand-over);
5. hostile: 31 hostile but schema-valid jobs (thousands of replicas, huge
   annotations, names at the length limits, labels that claim another job's
   pods, variables that collide with ours, also a PyTorchJob's, a template
   that names its own pod or owner, ...) beside a bystander job that must
   not be touched;
6. drain-taint: one node drained with `kubectl drain` and another tainted
   NoExecute while 50 jobs run: every pod there is disrupted and recreated
   elsewhere, every job must end Done with no restart counted (issue 30);
7. kueue: the operator and Kueue's manager SIGKILLed at random moments while
   Kueue admits and preempts 50 queued jobs (scenarios/kueue.py), on a
   cluster of its own with Kueue beside it, so that the others run without it;
8. multikueue: jobs dispatched by MultiKueue from a manager to two workers,
   the first worker's API server stopped past workerLostTimeout and started
   again, the manager's operator and Kueue SIGKILLed during dispatch
   (scenarios/multikueue.py), on three control planes of its own;
9. lost-node: a node lost for good while its pods run (its kwok killed):
   they stay Terminating, and each is replaced beside it on another node;
10. paused-leader: two operators with leader election, the leader
   SIGSTOPped past its lease while the standby takes over, then resumed;
11. clock-skew: the operator's clock 180 s ahead (libfaketime) while a
   tainted node's pods shut down through their whole grace period;
12. operator-partition: the operator cut off from the API server for 60 s
   (a TCP proxy that stops forwarding without closing) while its jobs
   change, then healed;
13. node-partition: a node's kubelet (its kwok) stopped for 120 s while its
   pods run, then back;
14. slow-api: every pod create held 25 s by an admission webhook while API
   Priority and Fairness rejects what does not fit the operator's few seats;
15. start-failure: jobs whose containers can never start (StartError);
16. operator-away: the operator stopped 30 s while pods fail, are evicted
   and deleted: each waits on the tracking finalizer and is judged on its return.

For each: duplicate pods (more than one pod per replica, or more creations
than replicas; in 6 and 7, where pods are recreated by design, a pod created
while another of its replica still existed), orphans (pods whose job is
gone, or still running after it finished), wrong final states, lost jobs
(never given a status; in 7, never finished), API requests and log lines
per second of the operator during the outage, and operator restarts; for 7
also pods of jobs Kueue had not admitted, samples over the queue's quota and
quota left reserved at the end; in 8, a duplicate is a sample with one
job's pods Running on two workers, an orphan a worker's copy of a job
deleted on the manager; in 9, an overlap of a stuck pod and its
replacement is not a duplicate (nor, in 13, a cut-off pod and its); in
10, writes the paused leader sent once the standby held the lease (the API
server's audit log names each sender). Pods are followed by a watch of the
suite's own, every creation counted by uid. The table goes to bench/results/chaos.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.chaos.scenarios import KUEUE_SCENARIOS, MULTIKUEUE_SCENARIOS, SCENARIOS
from bench.chaos.suite import Row, Suite
from bench.chaos.table import table
from bench.common.devtools import interrupt_on_termination
from bench.common.paths import RESULTS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.chaos",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--short", action="store_true", help="fewer jobs and kills (a few minutes)")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument(
        "--only", nargs="*", default=[], help="scenario function names (drain_taint, kueue, ...)"
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    rows: list[Row] = []
    for kueue, scenarios in ((False, SCENARIOS), (True, KUEUE_SCENARIOS)):
        chosen = [s for s in scenarios if not args.only or s.__name__ in args.only]
        if chosen:
            rows += Suite(args, kueue=kueue).run(chosen)
    for scenario in MULTIKUEUE_SCENARIOS:
        if not args.only or scenario.__name__ in args.only:
            started = time.monotonic()
            row = scenario(args)
            row.seconds = time.monotonic() - started
            rows.append(row)
    wall = time.monotonic() - began
    text = table(rows, wall, args)
    print(text)
    name = "chaos-short" if args.short else "chaos"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.md").write_text("# The chaos suite\n\n" + text)
    (args.out / f"{name}.json").write_text(json.dumps([r.__dict__ for r in rows], indent=2))
    return 1 if sum(r.must_be_zero() for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
