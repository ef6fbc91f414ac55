"""`make demo`: dlk8s installed as users install it, and a job that really trains.

By default on the local cluster with its real node (containerd, kubelet,
kube-proxy, CoreDNS beside the kwok nodes; see realnode/):

1. `helm install` the chart with values/realnode.yaml: the operator runs in
   the cluster, from the image built from hooks/Dockerfile;
2. `kubectl apply -k examples/local/tfjob-train` (examples/tfjob-train with
   the local runtime image): a TFJob with a MASTER and two WORKERs running
   examples/tfjob-train/train.py and a PS running the chart's standard gRPC
   server, which together train a small model on synthetic data;
3. its pods, their log lines as they come, and its status until Done;
4. the commands to look around; in a terminal's foreground everything stays
   up until Ctrl-C (--wait), elsewhere (CI, a pipe, the background,
   `timeout`) it goes at once (--no-wait).

Its first line says how to stop it, its last what it removed; stopping.py
says how signals are taken (any number of SIGINT, SIGTERM, SIGHUP).

Where a real node cannot run (no root, a tool missing, a kernel without what
it needs), or with --kwok, the demo says so and runs on kwok's nodes only:
the seed TFJob examples, the operator as a local process with the chart's
ServiceAccount, and a small driver that has kwok finish each master, since
no container runs there.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from dlk8s_dev.clustercli import stop_hint
from dlk8s_dev.localcluster import (
    DEFAULT_TOOLS_BIN,
    EXIT_CODE_ANNOTATION,
    REPO_ROOT,
    RUN_DURATION_ANNOTATION,
    ClusterError,
    LocalCluster,
    missing_tools,
)
from dlk8s_dev.localdeploy import OperatorProcess, install_chart, install_in_cluster
from dlk8s_dev.pdeath import die_with_parent
from dlk8s_dev.stopping import Run, run_until_signal

# The seed operators' TFJob examples in dlk8s's spelling: their images are
# gone, so they run on kwok's nodes only (tests/data/kwok/README.md).
SEED_JOBS = Path("tests") / "data" / "kwok"
SEED_EXAMPLES = (
    "tfjob.yaml",
    "tfjob-smoke-gpu.yaml",
    "tfjob-tensorboard-azure.yaml",
    "tfjob-tensorboard-gke.yaml",
)
JOBS_NAMESPACE = "default"
# The real-node demo.
OPERATOR_NAMESPACE = "dlk8s-system"
DEMO_NAMESPACE = "dlk8s-demo"
# examples/tfjob-train with the runtime image `make images` built.
TRAIN_EXAMPLE = Path("examples") / "local" / "tfjob-train"
TRAIN_JOB = "tfjob-train"


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


# -- the real node ----------------------------------------------------------------


class LogFollower:
    """`kubectl logs -f` of each pod of a job once it runs, printed as it comes."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.lines: list[str] = []
        self._procs: dict[str, subprocess.Popen[str]] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def follow(self, pod: str) -> None:
        if pod in self._procs:
            return
        proc = subprocess.Popen(
            [str(self.cluster.tools_bin / "kubectl"), "logs", "-f", pod, "-n", self.namespace],
            env=self.cluster.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=die_with_parent(),
        )
        self._procs[pod] = proc
        thread = threading.Thread(target=self._pump, args=(pod, proc), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _pump(self, pod: str, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        role = pod.removeprefix(f"{TRAIN_JOB}-")
        for line in proc.stdout:
            line = line.rstrip()
            # TensorFlow's own chatter (C++ and absl logging) says nothing
            # about the training; the program's lines and the PS's do.
            if not line or (line[:1] in "WIE" and line[1:5].isdigit()) or "WARNING" in line:
                continue
            with self._lock:
                self.lines.append(f"{role}: {line}")
                print(f"    {role:<9} | {line.removeprefix(f'{role}: ')}", flush=True)

    def stop(self) -> None:
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)


# The watches read every second in this process (LocalCluster.api); kubectl
# runs only to print a table once something changed.
TFJOBS = "/apis/dlk8s.io/v1alpha1/namespaces/{}/tfjobs"


def job_status(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    code, job = cluster.api(f"{TFJOBS.format(namespace)}/{name}")
    status: dict[str, Any] = (job.get("status") or {}) if code == 200 else {}
    return status


def pods_with(cluster: LocalCluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods with these labels; none while the API server does not answer
    (the watch looks again a second later)."""
    query = urllib.parse.urlencode({"labelSelector": selector})
    code, pods = cluster.api(f"/api/v1/namespaces/{namespace}/pods?{query}")
    return list(pods.get("items") or []) if code == 200 else []


def _pod_states(pods: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """What of the pods is worth showing again when it changes (not their age)."""
    states = []
    for pod in pods:
        status = pod.get("status") or {}
        ready = all(c.get("ready") for c in status.get("containerStatuses") or [{}])
        deleting = "deleting" if pod["metadata"].get("deletionTimestamp") else ""
        states.append((pod["metadata"]["name"], status.get("phase", ""), str(ready), deleting))
    return sorted(states)


def watch_training(cluster: LocalCluster, timeout: float, run: Run) -> bool:
    """Show the job's status, its pods and their logs until it is Done (or Failed)."""
    logs = LogFollower(cluster, DEMO_NAMESPACE)
    deadline = time.monotonic() + timeout
    shown_job: tuple[str, ...] = ()
    shown_pods: list[tuple[str, ...]] = []
    selector = f"dlk8s.io/job-name={TRAIN_JOB}"
    try:
        while time.monotonic() < deadline:
            status = job_status(cluster, DEMO_NAMESPACE, TRAIN_JOB)
            counts = [str(r.get("replicasStates")) for r in status.get("replicaStatuses") or []]
            job_state = (status.get("state", ""), status.get("phase", ""), *counts)
            if job_state != shown_job:
                table = cluster.kubectl("get", "tfjob", TRAIN_JOB, "-n", DEMO_NAMESPACE).stdout
                print(table.rstrip(), flush=True)
                shown_job = job_state
            pods = pods_with(cluster, DEMO_NAMESPACE, selector)
            if pods and _pod_states(pods) != shown_pods:
                table = cluster.kubectl(
                    "get", "pods", "-n", DEMO_NAMESPACE, "-l", selector, "-o", "wide"
                ).stdout
                print(table.rstrip(), flush=True)
                shown_pods = _pod_states(pods)
            for pod in pods:
                if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
                    logs.follow(pod["metadata"]["name"])
            if status.get("phase") in ("Done", "Failed"):
                return status.get("state") == "Succeeded"
            run.pause(1, "watching the training")
        return False
    finally:
        logs.stop()


def show_kept_master(cluster: LocalCluster) -> None:
    """cleanPodPolicy Running stops what still runs and keeps the MASTER
    that ended, so its log outlives the job."""
    master = f"{TRAIN_JOB}-master-0"
    say(f"kubectl -n {DEMO_NAMESPACE} logs {master} --tail=2   (after Done)")
    logs = cluster.kubectl("logs", master, "-n", DEMO_NAMESPACE, "--tail=2", check=False)
    print((logs.stdout + logs.stderr).rstrip(), flush=True)


def look_around_real(cluster: LocalCluster) -> str:
    assert cluster.node is not None
    # HTTPS with a token the API server allows `get` on /metrics (the
    # admin's): the API server's service proxy would not pass a token on.
    metrics = (
        f"kubectl -n {OPERATOR_NAMESPACE} port-forward svc/dlk8s-metrics 8443 &\n"
        f'  curl -sk -H "Authorization: Bearer {cluster.token}" https://localhost:8443/metrics'
    )
    return f"""
The TFJob trained on the real node and is Done. Look around in another terminal:

  export KUBECONFIG={cluster.kubeconfig}
  export PATH={cluster.tools_bin}:$PATH
  kubectl get nodes -o wide                       # the real node beside the kwok nodes
  kubectl -n {DEMO_NAMESPACE} get tfjobs.dlk8s.io,pods
  kubectl -n {DEMO_NAMESPACE} describe tfjobs.dlk8s.io {TRAIN_JOB}  # conditions and events
  kubectl -n {DEMO_NAMESPACE} get events --sort-by=.lastTimestamp
  kubectl -n {OPERATOR_NAMESPACE} get deploy,pods,lease   # the operator, in the cluster
  kubectl -n {OPERATOR_NAMESPACE} logs deploy/dlk8s       # its JSON log lines
  {metrics} | grep ^dlk8s_
  helm test dlk8s -n {OPERATOR_NAMESPACE}                 # the chart's smoke test, for real
  kubectl -n {DEMO_NAMESPACE} delete tfjobs.dlk8s.io {TRAIN_JOB}  # and train again:
  kubectl -n {DEMO_NAMESPACE} apply -k {TRAIN_EXAMPLE}
  kubectl -n {DEMO_NAMESPACE} logs -f {TRAIN_JOB}-master-0
  # Every pod of namespaces {DEMO_NAMESPACE} and {OPERATOR_NAMESPACE} runs on the real node.
  # Load an image of your own (an oci-archive) into it:
  {cluster.node.load_command()}
"""


def play_real(args: argparse.Namespace, run: Run) -> int | None:
    """The demo on the real node; None when one cannot run here (the kwok demo runs instead)."""
    from dlk8s_dev.images import ImageError
    from dlk8s_dev.realnode import NodeError, missing_requirements

    missing = missing_requirements(DEFAULT_TOOLS_BIN)
    if missing:
        fall_back(f"missing {', '.join(missing)}")
        return None
    say(
        "starting the local cluster: etcd, apiserver, controllers, scheduler, kwok nodes, "
        "and a real node (containerd, runc, kubelet, kube-proxy, CoreDNS)"
    )
    cluster = LocalCluster(real_node=True, interrupt=run.stopping)
    with run.keeping(cluster):
        try:
            cluster.start()
        except (NodeError, ImageError) as err:
            if run.stopping.is_set():
                raise
            why = f"the real node did not start: {str(err)[-1500:]}"
        else:
            return run_real(cluster, args, run)
    fall_back(why)
    return None


def fall_back(why: str) -> None:
    say(f"FALLING BACK to the kwok-only demo: a real node cannot run here ({why})")
    say("no container will run: kwok plays the pods; the operator runs as a local process")


def run_real(cluster: LocalCluster, args: argparse.Namespace, run: Run) -> int:
    assert cluster.node is not None
    began = time.monotonic()
    images = ", ".join(sorted(i.name for i in cluster.node.images.values()))
    took = cluster.startup_seconds + cluster.node.startup_seconds
    say(f"cluster up in {took:.0f}s; the real node has {images}")
    say(
        f"helm install dlk8s charts/dlk8s -n {OPERATOR_NAMESPACE} --set cloud=gke "
        "-f values/realnode.yaml --wait   (the operator runs in the cluster)"
    )
    install_in_cluster(cluster, namespace=OPERATOR_NAMESPACE)
    print(
        cluster.kubectl("get", "pods", "-n", OPERATOR_NAMESPACE, "-o", "wide").stdout.rstrip(),
        flush=True,
    )
    cluster.node.real_namespace(cluster, DEMO_NAMESPACE)
    say(f"kubectl apply -k {TRAIN_EXAMPLE} -n {DEMO_NAMESPACE}")
    applied = cluster.kubectl("apply", "-k", str(REPO_ROOT / TRAIN_EXAMPLE), "-n", DEMO_NAMESPACE)
    print(applied.stdout.rstrip(), flush=True)
    say("watching: the job's status, its pods, and their log lines as they come")
    if not watch_training(cluster, args.timeout, run):
        say("the TFJob did not succeed in time; its events and the operator's log:")
        print(cluster.kubectl("describe", "tfjob", TRAIN_JOB, "-n", DEMO_NAMESPACE).stdout)
        print(
            cluster.kubectl(
                "logs", "deploy/dlk8s", "-n", OPERATOR_NAMESPACE, "--tail=40", check=False
            ).stdout
        )
        return 1
    show_kept_master(cluster)
    print(look_around_real(cluster), flush=True)
    say(f"install and training took {time.monotonic() - began:.0f}s")
    wait_for_ctrl_c(args, run)
    return 0


# -- kwok only ----------------------------------------------------------------------


def finish_masters(cluster: LocalCluster, after: str, done: threading.Event, run: Run) -> None:
    """Play the training code: every master that runs exits 0 `after` later."""
    while not done.wait(1) and not run.stopping.is_set():
        for pod in pods_with(cluster, JOBS_NAMESPACE, "dlk8s.io/replica-type=master"):
            annotations = pod["metadata"].get("annotations") or {}
            if pod["status"].get("phase") == "Running" and EXIT_CODE_ANNOTATION not in annotations:
                cluster.kubectl(
                    "annotate", "pod", pod["metadata"]["name"], "-n", JOBS_NAMESPACE,
                    f"{EXIT_CODE_ANNOTATION}=0", f"{RUN_DURATION_ANNOTATION}={after}",
                    check=False,
                )  # fmt: skip


def job_states(cluster: LocalCluster) -> dict[str, tuple[str, str]]:
    """(state, phase) by job: done means Succeeded and cleaned up (Done)."""
    code, jobs = cluster.api(TFJOBS.format(JOBS_NAMESPACE))
    if code != 200:
        raise ClusterError(f"listing the TFJobs: {code} {jobs.get('message', '')}")
    return {
        job["metadata"]["name"]: (
            (job.get("status") or {}).get("state", ""),
            (job.get("status") or {}).get("phase", ""),
        )
        for job in jobs.get("items") or []
    }


def watch_until_done(cluster: LocalCluster, names: set[str], timeout: float, run: Run) -> bool:
    deadline = time.monotonic() + timeout
    shown: dict[str, tuple[str, str]] = {}
    while time.monotonic() < deadline:
        # States first: Done is final, so the table read after them shows
        # every job at least as far along.
        states = job_states(cluster)
        if states != shown:
            print(cluster.kubectl("get", "tfjobs", "-n", JOBS_NAMESPACE).stdout, flush=True)
            shown = states
        if names <= states.keys() and all(states[n] == ("Succeeded", "Done") for n in names):
            return True
        run.pause(1, "watching the jobs")
    return False


def look_around(cluster: LocalCluster, operator: OperatorProcess) -> str:
    return f"""
Everything succeeded. Look around in another terminal:

  export KUBECONFIG={cluster.kubeconfig}
  export PATH={cluster.tools_bin}:$PATH
  kubectl get tfjobs.dlk8s.io                     # state and phase of every job
  kubectl describe tfjobs.dlk8s.io example-job    # conditions and events
  kubectl get pods,services -l dlk8s.io/job-name=example-job
  kubectl delete tfjobs.dlk8s.io example-job      # and the pods, services and ConfigMap go too
  curl -s --cacert {operator.certs}/ca.crt -H "Authorization: Bearer {cluster.token}" \\
    https://127.0.0.1:{operator.port}/metrics | grep ^dlk8s_   # docs/security.md
  tail -f {operator.log_path}
"""


def play_kwok(args: argparse.Namespace, run: Run) -> int:
    say("starting the local control plane: etcd, apiserver, controllers, scheduler, kwok")
    cluster = LocalCluster(interrupt=run.stopping)
    with run.keeping(cluster):
        cluster.start()
        say("helm install dlk8s charts/dlk8s --set cloud=gke -f values/local.yaml")
        install = install_chart(cluster)
        say("running the operator with the chart's ServiceAccount")
        operator = OperatorProcess(install, name="demo-operator").start()
        done = threading.Event()
        driver = threading.Thread(
            target=finish_masters, args=(cluster, args.run_for, done, run), daemon=True
        )
        driver.start()
        try:
            names = set()
            for example in SEED_EXAMPLES:
                path = REPO_ROOT / SEED_JOBS / example
                say(f"kubectl apply -f {SEED_JOBS / example}")
                cluster.kubectl("apply", "-n", JOBS_NAMESPACE, "-f", str(path))
                names.add(_job_name(path))
            say(f"watching (each master finishes {args.run_for} after it starts)")
            if not watch_until_done(cluster, names, args.timeout, run):
                say("not every job succeeded in time; operator log:")
                print(operator.tail(), flush=True)
                return 1
            print(look_around(cluster, operator), flush=True)
            wait_for_ctrl_c(args, run)
            return 0
        finally:
            done.set()
            operator.stop()
            say("tearing down")


def _job_name(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["metadata"]["name"])


def interactive() -> bool:
    """In a terminal, and in its foreground: someone is there to press Ctrl-C."""
    try:
        return sys.stdin.isatty() and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:
        return False


def wait_for_ctrl_c(args: argparse.Namespace, run: Run) -> None:
    """Keep everything up until a signal: by default only when someone can send one."""
    wait = interactive() if args.wait is None else args.wait
    if not wait:
        say(
            "not in a terminal's foreground (a pipe, CI, the background, `timeout`): "
            "tearing down now; --wait keeps everything up until Ctrl-C"
        )
        return
    say("press Ctrl-C to tear everything down")
    run.wait()


def play(args: argparse.Namespace, run: Run) -> int:
    """The whole demo: on the real node, or on kwok's nodes only."""
    missing = missing_tools()
    if missing:
        say(f"missing tools {missing}: run `make tools`")
        return 1
    if args.kwok:
        say("kwok-only demo (--kwok): no container runs; kwok plays every pod")
        return play_kwok(args, run)
    code = play_real(args, run)
    return play_kwok(args, run) if code is None else code


def main(
    argv: Sequence[str] | None = None,
    demo: Callable[[argparse.Namespace, Run], int] = play,
) -> int:
    """``demo`` is the demo itself, started once signals are ours (a seam for tests)."""
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument(
        "--kwok",
        action="store_true",
        help="kwok's nodes only (no real node, no container runs): the seed TFJob examples",
    )
    parser.add_argument(
        "--wait",
        dest="wait",
        action="store_true",
        default=None,
        help="keep everything up until Ctrl-C (the default in a terminal's foreground)",
    )
    parser.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="tear down as soon as the jobs are done (the default elsewhere)",
    )
    parser.add_argument("--run-for", default="5s", help="(--kwok) how long each master 'trains'")
    parser.add_argument("--timeout", type=float, default=300, help="seconds the jobs may take")
    args = parser.parse_args(argv)
    return run_until_signal(lambda run: demo(args, run), say, stop_hint("make demo"))


if __name__ == "__main__":
    sys.exit(main())
