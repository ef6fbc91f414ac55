"""`make demo`: the seed TFJob examples on a local simulated cluster.

Starts the local control plane, installs the chart with cloud=gke, runs the
operator with the chart's ServiceAccount, submits the seed TFJob examples and
shows their status until every one succeeded. kwok stands in for the
kubelets, so no container runs: a small driver has kwok finish each master a
few seconds after it starts. Then it prints how to look around and keeps
everything up until Ctrl-C (or exits at once with --no-wait).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from dlk8s_dev.localcluster import (
    EXIT_CODE_ANNOTATION,
    REPO_ROOT,
    RUN_DURATION_ANNOTATION,
    LocalCluster,
)
from dlk8s_dev.localdeploy import OperatorProcess, install_chart

SEED_EXAMPLES = (
    "tfjob.yaml",
    "tfjob-smoke-gpu.yaml",
    "tfjob-tensorboard-azure.yaml",
    "tfjob-tensorboard-gke.yaml",
)
JOBS_NAMESPACE = "default"


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def finish_masters(cluster: LocalCluster, after: str, stop: threading.Event) -> None:
    """Play the training code: every master that runs exits 0 `after` later."""
    while not stop.wait(1):
        out = cluster.kubectl(
            "get", "pods", "-n", JOBS_NAMESPACE, "-l", "dlk8s.io/replica-type=master",
            "-o", "json", check=False,
        )  # fmt: skip
        if out.returncode != 0:
            continue
        for pod in json.loads(out.stdout)["items"]:
            annotations = pod["metadata"].get("annotations") or {}
            if pod["status"].get("phase") == "Running" and EXIT_CODE_ANNOTATION not in annotations:
                cluster.kubectl(
                    "annotate", "pod", pod["metadata"]["name"], "-n", JOBS_NAMESPACE,
                    f"{EXIT_CODE_ANNOTATION}=0", f"{RUN_DURATION_ANNOTATION}={after}",
                    check=False,
                )  # fmt: skip


def job_states(cluster: LocalCluster) -> dict[str, tuple[str, str]]:
    """(state, phase) by job: done means Succeeded and cleaned up (Done)."""
    out = cluster.kubectl("get", "tfjobs", "-n", JOBS_NAMESPACE, "-o", "json")
    return {
        job["metadata"]["name"]: (
            (job.get("status") or {}).get("state", ""),
            (job.get("status") or {}).get("phase", ""),
        )
        for job in json.loads(out.stdout)["items"]
    }


def watch_until_done(cluster: LocalCluster, names: set[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        # States first: Done is final, so the table read after them shows
        # every job at least as far along.
        states = job_states(cluster)
        table = cluster.kubectl("get", "tfjobs", "-n", JOBS_NAMESPACE).stdout
        if table != shown:
            print(table, flush=True)
            shown = table
        if names <= states.keys() and all(states[n] == ("Succeeded", "Done") for n in names):
            return True
        time.sleep(1)
    return False


def look_around(cluster: LocalCluster, operator: OperatorProcess) -> str:
    return f"""
Everything succeeded. Look around in another terminal:

  export KUBECONFIG={cluster.kubeconfig}
  export PATH={cluster.tools_bin}:$PATH
  kubectl get tfjobs                      # state and phase of every job
  kubectl describe tfjob example-job      # conditions and events
  kubectl get pods,services -l dlk8s.io/job-name=example-job
  kubectl delete tfjob example-job        # and the pods, services and ConfigMap go too
  curl -s http://127.0.0.1:{operator.port}/metrics | grep ^dlk8s_
  tail -f {operator.log_path}
"""


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    say("starting the local control plane: etcd, apiserver, controllers, scheduler, kwok")
    with LocalCluster() as cluster:
        say("helm install dlk8s charts/dlk8s --set cloud=gke -f values/local.yaml")
        install = install_chart(cluster)
        say("running the operator with the chart's ServiceAccount")
        operator = OperatorProcess(install, name="demo-operator").start()
        driver = threading.Thread(
            target=finish_masters, args=(cluster, args.run_for, stop), daemon=True
        )
        driver.start()
        try:
            names = set()
            for example in SEED_EXAMPLES:
                path = REPO_ROOT / "examples" / example
                say(f"kubectl apply -f {Path('examples') / example}")
                cluster.kubectl("apply", "-n", JOBS_NAMESPACE, "-f", str(path))
                names.add(_job_name(path))
            say(f"watching (each master finishes {args.run_for} after it starts)")
            if not watch_until_done(cluster, names, args.timeout):
                say("not every job succeeded in time; operator log:")
                print(operator.tail(), flush=True)
                return 1
            print(look_around(cluster, operator), flush=True)
            if args.wait:
                say("press Ctrl-C to tear everything down")
                try:
                    while not stop.wait(0.5):
                        pass
                except KeyboardInterrupt:
                    pass
            return 0
        finally:
            stop.set()
            operator.stop()
            say("tearing down")


def _job_name(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["metadata"]["name"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="tear down as soon as every job succeeded",
    )
    parser.add_argument("--run-for", default="5s", help="how long each master 'trains'")
    parser.add_argument("--timeout", type=float, default=180)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
