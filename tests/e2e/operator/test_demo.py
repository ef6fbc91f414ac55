"""`make demo`'s non-interactive core, in both of its modes.

By default: a fresh cluster with a real node, the chart with the operator in
the cluster, and examples/tfjob-train training for real until Done. With
--kwok: kwok's nodes only, the operator as a local process, the seed TFJobs.
"""

from __future__ import annotations

import re
import subprocess
import sys

from dlk8s_dev.demo import SEED_EXAMPLES
from dlk8s_dev.localcluster import REPO_ROOT, WORKDIR_PREFIX, leftover_processes, missing_tools
from dlk8s_dev.nodehost import NODE_PREFIX
from dlk8s_dev.runs import node_base

from ..helpers import example


def run_demo(*args: str) -> str:
    assert not missing_tools()
    demo = subprocess.Popen(
        [sys.executable, "-m", "dlk8s_dev.demo", "--no-wait", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = demo.communicate(timeout=600)
    finally:
        demo.kill()
    assert demo.returncode == 0, stdout[-4000:] + stderr[-4000:]
    # Everything the demo started was stopped when it tore down.
    assert leftover_processes(f"{WORKDIR_PREFIX}{demo.pid}-") == []
    assert not list(node_base().glob(f"{NODE_PREFIX}{demo.pid}-*")), "the real node's folder"
    # The first line says how to stop it, the last what it removed.
    lines = stdout.splitlines()
    assert "Ctrl-C" in lines[0], lines[:3]
    assert "stops it and removes everything it started" in lines[0], lines[:3]
    assert lines[-1].startswith("==> ended after "), lines[-3:]
    assert f"/{WORKDIR_PREFIX}{demo.pid}-" in lines[-1].split("removed: ")[1], lines[-3:]
    return stdout


def test_demo_trains_a_distributed_tfjob_on_the_real_node() -> None:
    out = run_demo()
    assert "FALLING BACK" not in out, out[:3000]
    assert "helm install dlk8s charts/dlk8s" in out
    # The operator runs in the cluster, on the real node.
    assert re.search(r"^dlk8s-\S+\s+1/1\s+Running\s.*\sreal-node-0\s", out, re.M), out[:4000]
    # Every replica's pod ran there, the PS with the chart's gRPC server.
    for role in ("master-0", "worker-0", "ps-0"):
        assert re.search(rf"^tfjob-train-{role}\s+1/1\s+Running\s.*\sreal-node-0\s", out, re.M), (
            role,
            out[-6000:],
        )
    assert re.search(r"^\s+ps-0\s+\| grpc_tensorflow_server: serving ps/0 of ", out, re.M), out
    # The training's own log lines: both trainers shared the PS's variables,
    # and the master checked what the model learned.
    assert re.search(r"^\s+master-0\s+\| initialised the variables on the PS$", out, re.M), out
    assert re.search(r"^\s+worker-0\s+\| found the variables on the PS$", out, re.M), out
    assert re.search(r"^\s+master-0\s+\| trained \d+ of 20\d\d shared steps in ", out, re.M), out
    assert re.search(r"^\s+master-0\s+\| done: largest error 0\.\d+ <= 0\.05$", out, re.M), out
    # Its status, until Done; the MASTER's pod, and so its log, outlive it.
    assert re.search(r"^tfjob-train\s+Succeeded\s+Done\s", out, re.M), out[-4000:]
    after_done = out.split("logs tfjob-train-master-0 --tail=2   (after Done)")[-1]
    assert re.search(r"^master-0: done: largest error 0\.\d+ <= 0\.05$", after_done, re.M), out[
        -4000:
    ]
    assert "export KUBECONFIG=" in out
    assert "images import FILE" in out
    assert f"/{NODE_PREFIX}" in out.splitlines()[-1], "the node's folder, in the last line"


def test_demo_kwok_mode_runs_the_seed_examples_to_success() -> None:
    out = run_demo("--kwok", "--run-for", "2s")
    assert "kwok-only demo (--kwok)" in out
    final_table = out.split("Everything succeeded")[0].strip().split("NAME")[-1]
    for name in (example(e)["metadata"]["name"] for e in SEED_EXAMPLES):
        row = next(line for line in final_table.splitlines() if line.startswith(name + " "))
        assert row.split()[1:3] == ["Succeeded", "Done"], row
    assert "export KUBECONFIG=" in out
