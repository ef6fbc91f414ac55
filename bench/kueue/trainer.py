"""The Kueue benchmark's Trainer modes (``trainer-stock``, ``trainer-tuned``):
the kueue mode's jobs as Kubeflow Trainer v2 TrainJobs (bench/common/peers.py)
through the same kind of ClusterQueue, Kueue's own TrainJob integration
(``trainer.kubeflow.org/trainjob``, which open_context enables) suspending
and admitting them, Trainer and JobSet beside the cluster with those
settings. Measured as the kueue mode is: per job, from its Workload's
admission to its last pod created, and the queue's checks."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from bench.common.harness import (
    Context,
    create_namespace,
    delete_namespace,
    log,
    submit_all,
)
from bench.common.peers import PEERS
from bench.common.watcher import Watcher
from bench.kueue.figures import figures
from bench.kueue.modes import drain
from bench.kueue.queue import KUEUE_API, bench_job, drained_queue, make_queue

TRAINER_MODES = ("trainer-stock", "trainer-tuned")
FRAMEWORK = "trainer.kubeflow.org/trainjob"


def run_trainer_mode(ctx: Context, mode: str) -> dict[str, Any]:
    """`mode` (a TRAINER_MODES name): the kueue mode's jobs as TrainJobs, queued."""
    args, peer = ctx.args, PEERS[mode]
    namespace = create_namespace(ctx, f"kueue-{mode}")
    queue = make_queue(ctx, namespace)
    tfjobs = [bench_job(f"tf-{i:04d}", queue, args) for i in range(args.jobs)]
    jobs = peer.jobs(tfjobs)
    log(f"{mode}: {len(jobs)} TrainJobs in {namespace}, queue {queue}")
    peer.install(ctx.cluster, tfjobs[0])
    raw = ctx.raw / f"watch-{namespace}.json"
    kind = peer.kind(tfjobs)
    watcher = Watcher(ctx.endpoint, namespace, raw, workloads=True, jobs=kind).start()
    op = peer.start(ctx.cluster, ctx.raw, f"kueue-{mode}", tfjobs[0])
    submit = partial(submit_all, ctx, namespace, jobs, path=kind.path)
    result = drain(ctx, mode, watcher, op, len(jobs), submit)
    result = {"namespace": namespace, "jobs": len(jobs)} | result | peer.figures()
    result["cluster_queue_after"] = drained_queue(ctx, queue)
    state = ctx.api.json("GET", f"{KUEUE_API}/namespaces/{namespace}/workloads")
    (ctx.raw / f"state-{namespace}.json").write_text(json.dumps(state))
    op.stop()
    seen = watcher.stop()["seen"]
    result |= figures(seen, "kueue", 1 + args.job_workers, args.quota_jobs)
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    ctx.api.json("DELETE", f"{KUEUE_API}/clusterqueues/{queue}", ok=(404,))
    log(f"{mode}: per job p50 {result['pods_created_p50_s']}s p99 {result['pods_created_p99_s']}s")
    return result
