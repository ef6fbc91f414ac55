#!/usr/bin/env python
"""Standard TensorFlow gRPC server: the process of a TFJob PS without a
tensorflow container of its own.

It serves one task of the job's cluster and blocks until it is stopped. The
cluster and the task come from the command line (the seed operator's flags),
or, when those are missing, from TF_CONFIG, which the dlk8s operator sets in
every replica:

  python grpc_tensorflow_server.py --cluster_spec='ps|ps-0:2222;worker|w-0:2222' \
      --job_name=ps --task_id=0
  TF_CONFIG='{"cluster": {...}, "task": {"type": "ps", "index": 0}}' \
      python grpc_tensorflow_server.py

Works with TensorFlow 1.x (tf.train.Server, also on Python 2) and 2.x
(tf.distribute.Server).
"""

from __future__ import print_function

import argparse
import json
import os
import signal
import sys
import time


def parse_cluster_spec(text):
    """'job|host:port,host:port;job2|host:port' -> {'job': [...], ...}."""
    cluster = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        job, sep, hosts = part.partition("|")
        if not sep or not job:
            raise ValueError("cluster spec part %r is not of the form job|host:port,..." % part)
        if job in cluster:
            raise ValueError("job %r appears twice in the cluster spec" % job)
        cluster[job] = [h.strip() for h in hosts.split(",") if h.strip()]
        if not cluster[job]:
            raise ValueError("job %r lists no hosts" % job)
    if not cluster:
        raise ValueError("the cluster spec is empty")
    return cluster


def from_tf_config(text):
    config = json.loads(text)
    task = config.get("task") or {}
    if "cluster" not in config or "type" not in task:
        raise ValueError("TF_CONFIG needs 'cluster' and 'task': {'type', 'index'}")
    return config["cluster"], task["type"], int(task.get("index", 0))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster_spec", default="",
                        help="job|host:port,...;job|host:port,... (default: TF_CONFIG)")
    parser.add_argument("--job_name", default="", help="job of this task, e.g. ps")
    parser.add_argument("--task_id", type=int, default=0, help="index of this task in its job")
    parser.add_argument("--protocol", default="grpc", help="server protocol (default grpc)")
    args = parser.parse_args(argv)

    try:
        if args.cluster_spec:
            if not args.job_name:
                parser.error("--job_name is required with --cluster_spec")
            cluster, job, index = parse_cluster_spec(args.cluster_spec), args.job_name, args.task_id
        elif os.environ.get("TF_CONFIG"):
            cluster, job, index = from_tf_config(os.environ["TF_CONFIG"])
        else:
            parser.error("give --cluster_spec and --job_name, or set TF_CONFIG")
        if job not in cluster:
            raise ValueError("job %r is not in the cluster %s" % (job, sorted(cluster)))
        if not 0 <= index < len(cluster[job]):
            raise ValueError("task %d is out of range for job %r (%d tasks)"
                             % (index, job, len(cluster[job])))
    except ValueError as err:
        print("grpc_tensorflow_server: %s" % err, file=sys.stderr)
        return 2

    import tensorflow as tf  # imported late so that --help works without TensorFlow

    server_cls = getattr(getattr(tf, "distribute", None), "Server", None) or tf.train.Server
    print("grpc_tensorflow_server: serving %s/%d of %s" % (job, index, json.dumps(cluster)))
    sys.stdout.flush()
    # The first process of its container: the kernel ignores a signal that
    # PID 1 has no handler for, so without this the PS would hold its job's
    # clean-up until the kubelet kills it at the end of the grace period.
    # The handler runs in the main thread, which therefore waits in Python
    # (the server serves from threads of its own) instead of in join().
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
    server = server_cls(tf.train.ClusterSpec(cluster), job_name=job, task_index=index,
                        protocol=args.protocol, start=True)
    while server is not None:  # serves until SIGTERM (the reference keeps it alive)
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
