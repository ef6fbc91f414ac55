"""What `helm test` runs: submit a tiny TFJob, wait for it to succeed, clean up.

Also run directly against a cluster by the end-to-end tests, because under
kwok the hook pod itself runs no code.
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from typing import Any

from dlk8s.job.vocabulary import API_VERSION
from dlk8s.runtime.client import Kube, load_api_client
from dlk8s.runtime.errors import ApiError, NotFoundError

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--image", default="busybox:1.36")
    parser.add_argument(
        "--template-annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="annotation for the job's pods (e.g. to have kwok finish them)",
    )


def smoke_job(name: str, namespace: str, image: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"dlk8s.io/smoke": "true"}},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "All", "backoffLimit": 0},
            "replicaSpecs": [
                {
                    "replicas": 1,
                    "tfReplicaType": "MASTER",
                    "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": image,
                                    "command": ["sh", "-c", 'test -n "$TF_CONFIG"'],
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def wait_for_outcome(kube: Kube, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            status = kube.get(API_VERSION, "TFJob", namespace, name).get("status") or {}
        except NotFoundError:
            status = {}  # not there (any more): wait on until the timeout
        if status.get("state") in {"Succeeded", "Failed"}:
            return status
        time.sleep(1)
    raise TimeoutError(f"TFJob {namespace}/{name} not finished after {timeout}s: {status}")


def run(args: argparse.Namespace) -> int:
    kube = Kube(load_api_client(args.kubeconfig))
    annotations = dict(a.split("=", 1) for a in args.template_annotation)
    name = f"dlk8s-smoke-{uuid.uuid4().hex[:6]}"
    kube.create(smoke_job(name, args.namespace, args.image, annotations))
    log.info("submitted", extra={"job": f"{args.namespace}/{name}"})
    try:
        status = wait_for_outcome(kube, args.namespace, name, args.timeout)
    finally:
        try:
            kube.delete(API_VERSION, "TFJob", args.namespace, name, propagation="Foreground")
        except ApiError as err:
            log.warning("cleanup failed", extra={"job": name, "error": repr(err)})
    ok = status.get("state") == "Succeeded"
    log.info("finished", extra={"job": name, "action": status.get("state")})
    print(
        f"smoke TFJob {args.namespace}/{name}: {status.get('state')} ({status.get('reason', '')})"
    )
    return 0 if ok else 1
