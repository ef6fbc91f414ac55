"""The operator's profile under py-spy: ``start_py_spy`` and ``stop_py_spy``
around a run, the speedscope file summarized (``summarize_speedscope``: the
functions on the stacks, and what each sample was spent on) and the
operator's CPU seconds by kind of thread (``thread_groups``)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common.harness import log


def start_py_spy(pid: int, out: Path, args: str) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    try:
        proc = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--format", "speedscope",
             "--output", str(out), *args.split()],
            stdout=subprocess.DEVNULL, stderr=(out.parent / "py-spy.log").open("wb"),
        )  # fmt: skip
    except OSError as err:
        log(f"py-spy unavailable: {err}")
        return None
    time.sleep(1)
    if proc.poll() is not None:
        log(f"py-spy exited {proc.returncode}; see {out.parent / 'py-spy.log'}")
        return None
    return proc


def thread_groups(cpu: dict[int, float], speedscope: Path) -> dict[str, float]:
    """The operator's CPU seconds by kind of thread, named from the profile's
    thread names and, for informers, the event handler their stacks show."""
    labels = thread_labels(speedscope)
    groups: Counter[str] = Counter()
    for tid, seconds in cpu.items():
        groups[labels.get(tid, "other (start-up, main, unsampled)")] += seconds
    return {k: round(v, 2) for k, v in groups.most_common()}


def stop_py_spy(proc: subprocess.Popen[bytes], out: Path) -> dict[str, Any]:
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    return summarize_speedscope(out)


# --- the speedscope file --------------------------------------------------------------------------


def summarize_speedscope(path: Path, top: int = 25) -> dict[str, Any]:
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]

    def label(i: int) -> str:
        f = frames[i]
        file = f.get("file") or ""
        short = "/".join(file.split("/")[-2:])
        return f"{f['name']} ({short})"

    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    costs: Counter[str] = Counter()
    total = 0
    for prof in data["profiles"]:
        for stack, weight in zip(prof["samples"], prof["weights"], strict=False):
            if not stack:
                continue
            total += weight
            own[label(stack[-1])] += weight
            for name in {label(i) for i in stack}:
                inclusive[name] += weight
            costs[category({frames[i]["name"] for i in stack})] += weight
    boring = {"Thread._bootstrap", "Thread._bootstrap_inner", "Thread.run", "_worker"}
    boring |= {"_WorkItem.run", "SharedInformer._run_loop", "Controller._work"}
    ranked = [
        {"function": name, "inclusive": n / total, "self": own[name] / total}
        for name, n in inclusive.most_common()
        if name.split(" (")[0] not in boring
    ]
    top_self = [
        {"function": name, "inclusive": inclusive[name] / total, "self": n / total}
        for name, n in own.most_common(top)
    ]
    return {
        "seconds": total,
        "costs": [{"cost": name, "share": n / total} for name, n in costs.most_common()],
        "top": ranked[:top],
        "top_self": top_self,
    }


# What a sample is spent on: the first of these frames on its stack decides.
CATEGORIES = (
    ("Controller._write_status", "status writes (PUT .../status: encode, HTTPS, decode)"),
    ("Executor.send_event", "events (POST events)"),
    ("Executor._apply", "creates and deletes (POST pods and services: encode, HTTPS, decode)"),
    ("reconcile", "reconcile: the pure function (match pods, build pods, status)"),
    ("WatchStream._decode", "watch events: JSON decoding"),
    ("Informer._fire", "watch events: handlers (caches, child index, queue)"),
    ("WatchStream._lines", "watch events: reading the stream (TLS, chunked HTTP)"),
    ("Informer._relist", "lists"),
    ("AutoscalerLoop._run", "autoscaler passes"),
)


def category(names: set[str]) -> str:
    for marker, name in CATEGORIES:
        if marker in names:
            return name
    return "other (work queue, metrics, HTTP server, start-up)"


HANDLERS = {
    "Controller.on_child": "informer: pods/services/... (controller)",
    "Controller.on_job": "informer: jobs (controller)",
    "AutoscalerLoop._changed": "informer: nodes/all pods (autoscaler)",
}


def thread_labels(path: Path) -> dict[int, str]:
    """Native thread id -> a label: the thread's name with digits dropped, and
    for informer threads, whose handlers they ran."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    labels = {}
    for prof in data["profiles"]:
        found = re.match(r'Thread (\d+) "([^"]*)"', prof.get("name", ""))
        if not found:
            continue
        tid, name = int(found.group(1)), re.sub(r"[-_]?\d+$", "", found.group(2))
        if name.startswith("informer-"):
            seen = Counter(
                label
                for stack in prof["samples"]
                for i in stack
                for prefix, label in HANDLERS.items()
                if frames[i]["name"].startswith(prefix)
            )
            name = seen.most_common(1)[0][0] if seen else "informer: other"
        labels[tid] = name
    return labels
