"""`make demo`'s non-interactive core: a fresh cluster, the chart, the seed TFJobs."""

from __future__ import annotations

import subprocess
import sys

from dlk8s_dev.demo import SEED_EXAMPLES
from dlk8s_dev.localcluster import REPO_ROOT, WORKDIR_PREFIX, leftover_processes, missing_tools

from .helpers import example


def test_demo_runs_the_seed_examples_to_success() -> None:
    assert not missing_tools()
    demo = subprocess.Popen(
        [sys.executable, "-m", "dlk8s_dev.demo", "--no-wait", "--run-for", "2s"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = demo.communicate(timeout=600)
    finally:
        demo.kill()
    assert demo.returncode == 0, stdout[-3000:] + stderr[-3000:]
    final_table = stdout.split("Everything succeeded")[0].strip().split("NAME")[-1]
    for name in (example(e)["metadata"]["name"] for e in SEED_EXAMPLES):
        row = next(line for line in final_table.splitlines() if line.startswith(name + " "))
        assert row.split()[1:3] == ["Succeeded", "Done"], row
    assert "export KUBECONFIG=" in stdout
    # Everything the demo started was stopped when it tore down.
    assert leftover_processes(f"{WORKDIR_PREFIX}{demo.pid}-") == []
