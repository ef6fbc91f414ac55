"""Measuring instruments of the benchmarks (see bench/common/runs.py).

- ``proc_cpu``, ``proc_peak_rss``, ``machine_busy``: what /proc says about a
  process and about the machine.
- ``apiserver_requests``: the apiserver's ``apiserver_request_total``;
  ``longrunning_watches``: its open watches.

The watcher process that times the watch events is bench/common/watcher.py.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common.api import Api

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# --- /proc ----------------------------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (its threads included)."""
    return proc_cpu_path(Path(f"/proc/{pid}/stat"))


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of a process, by native thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = proc_cpu_path(task / "stat")
        except OSError:
            continue
    return out


def proc_cpu_path(path: Path) -> float:
    stat = path.read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_peak_rss(pid: int) -> int:
    """VmHWM, the peak resident set size, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def machine_busy() -> float:
    """CPU seconds all processes on the machine have used (every core), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def longrunning_watches(api: Api, resource: str, group: str = "") -> int:
    """Open watches of `resource` (of API group `group` only, if given)."""
    status, data = api.request("GET", "/metrics")
    found = re.findall(
        r"^apiserver_longrunning_requests\{([^}]*)\} ([0-9.e+]+)$",
        data.decode() if status == 200 else "",
        re.M,
    )
    total = 0.0
    for labels, value in found:
        fields = dict(PROM_LABEL.findall(labels))
        if fields.get("resource") != resource or fields.get("verb") != "WATCH":
            continue
        if not group or fields.get("group") == group:
            total += float(value)
    return int(total)


def proc_name(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = proc_cpu(pid)
        except OSError:
            out[name] = 0.0
    return out


# --- apiserver metrics ----------------------------------------------------------------------------

_REQUEST_TOTAL = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$", re.M)
PROM_LABEL = re.compile(r'(\w+)="([^"]*)"')  # one label of a /metrics line


def apiserver_requests(api: Api) -> Counter[tuple[str, str]]:
    """apiserver_request_total summed by (verb, resource[/subresource])."""
    status, data = api.request("GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics: {status}")
    counts: Counter[tuple[str, str]] = Counter()
    for labels, value in _REQUEST_TOTAL.findall(data.decode()):
        fields = dict(PROM_LABEL.findall(labels))
        resource = fields.get("resource", "")
        if fields.get("subresource"):
            resource += "/" + fields["subresource"]
        counts[(fields.get("verb", ""), resource)] += int(float(value))
    return counts


def by_verb(delta: Counter[tuple[str, str]]) -> dict[str, int]:
    verbs: Counter[str] = Counter()
    for (verb, _), n in delta.items():
        verbs[verb] += n
    return dict(sorted((k, v) for k, v in verbs.items() if v))


def delta(after: Counter[Any], before: Counter[Any]) -> Counter[Any]:
    out = Counter(after)
    out.subtract(before)
    return Counter({k: v for k, v in out.items() if v})
