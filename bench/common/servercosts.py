"""Where the control plane's time goes in one run (the burst benchmark's).

Two instruments, read before and after each run of the operator, the
ceiling or training-operator, so the runs can be set side by side:

- ``Metrics``: kube-apiserver's own counters (time spent per request kind,
  request and response bytes, watch events sent and their bytes, etcd time,
  CEL and field-validation time, admission) and kube-controller-manager's
  work per controller (workqueue adds and seconds): what the runs' requests
  cost the server and what they made its controllers do.
- ``Profile``: kube-apiserver's CPU profile (/debug/pprof, the cluster started
  with ``profiling=True``) over the run's first seconds, summarized by
  ``go tool pprof -traces`` into the share of CPU under each kind of work.

``top_differences`` names the biggest gaps between two runs' figures.
"""

from __future__ import annotations

import itertools
import re
import ssl
import subprocess
import threading
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common.api import Api
from bench.common.measure import PROM_LABEL

_LINE = re.compile(r"^([a-z_]+)\{([^}]*)\} ([0-9.e+-]+)$", re.M)

# kube-apiserver's counters kept, each keyed by the labels that tell its
# requests apart (the rest are summed).
APISERVER_FAMILIES: dict[str, tuple[str, ...]] = {
    "apiserver_request_duration_seconds_sum": ("verb", "resource", "subresource"),
    "apiserver_request_body_size_bytes_sum": ("verb", "resource"),
    "apiserver_response_sizes_sum": ("verb", "resource", "subresource"),
    "apiserver_watch_events_total": ("resource",),
    "apiserver_watch_events_sizes_sum": ("resource",),
    "apiserver_watch_cache_events_dispatched_total": ("resource",),
    "etcd_request_duration_seconds_sum": ("operation", "resource"),
    "apiserver_cel_evaluation_duration_seconds_sum": (),
    "apiserver_cel_evaluation_duration_seconds_count": (),
    "field_validation_request_duration_seconds_sum": ("field_validation",),
    "apiserver_admission_step_admission_duration_seconds_sum": ("operation", "type"),
}
CONTROLLER_MANAGER_FAMILIES: dict[str, tuple[str, ...]] = {
    "workqueue_adds_total": ("name",),
    "workqueue_work_duration_seconds_sum": ("name",),
}

# The kinds of work in the API server's profile: a sample counts for every
# kind one of whose frames is on its stack (they overlap: a status write's
# CEL rules are also its update's). A request's storage work runs in a
# goroutine of its own, without its handler's frames: requests are told
# apart by the storage call, then by the few REST types that wrap it.
PROFILE_KINDS: dict[str, str] = {
    "creates (storage)": r"registry\.\(\*Store\)\.Create",
    "updates and patches (storage)": r"registry\.\(\*Store\)\.Update",
    "custom resources' status writes": r"customresource\.\(\*StatusREST\)\.Update",
    "pods' status writes": r"core/pod/storage\.\(\*StatusREST\)\.Update",
    "pods' bindings": r"core/pod/storage\.\(\*BindingREST\)",
    "get/list": r"endpoints/handlers\.(ListResource|GetResource|getResourceHandler)",
    "watch: serving events": r"\(\*WatchServer\)\.HandleHTTP|handlers\.serveWatch",
    "watch cache: dispatch": r"storage/cacher\.\(\*Cacher\)\.(dispatchEvent|processEvent)"
    r"|cacher\.\(\*cacheWatcher\)",
    "etcd client": r"go\.etcd\.io/etcd/client",
    "CEL": r"github\.com/google/cel-go|apiserver/pkg/cel",
    "schema validation (CRDs)": r"kube-openapi/pkg/validation"
    r"|apiextensions-apiserver/pkg/apiserver/(schema|validation)",
    "managed fields and field validation": r"structured-merge-diff|managedfields|fieldmanager",
    "JSON decode": r"json\.Unmarshal|json-iterator.*Read|sigs\.k8s\.io/json|\(\*decodeState\)",
    "JSON encode": r"json\.Marshal|encoding/json\.\(\*encodeState\)|json-iterator.*Write",
    "protobuf": r"gogo/protobuf|\.Unmarshal$|\.Marshal$|MarshalToSizedBuffer",
    "admission": r"apiserver/pkg/admission",
    "authentication/authorization": r"endpoints/filters\.(WithAuthentication|WithAuthorization)"
    r"|plugin/pkg/auth|authorizer",
    "TLS and HTTP/2": r"crypto/tls|golang\.org/x/net/http2",
    "garbage collection (Go)": r"runtime\.gcBgMarkWorker|runtime\.gcDrain|runtime\.bgsweep",
    "allocation": r"runtime\.mallocgc",
}


def _parse(text: str, families: dict[str, tuple[str, ...]]) -> Counter[str]:
    """The kept families of a Prometheus text page, summed by their labels:
    keys like ``family|verb=PUT|resource=tfjobs``."""
    out: Counter[str] = Counter()
    for name, labels, value in _LINE.findall(text):
        keep = families.get(name)
        if keep is None:
            continue
        fields = dict(PROM_LABEL.findall(labels))
        key = "|".join([name, *(f"{k}={fields.get(k, '')}" for k in keep if fields.get(k))])
        out[key] += float(value)
    return out


class Metrics:
    """The two servers' counters now; ``since(earlier)`` is the run's share."""

    def __init__(self, api: Api, controller_manager_url: str | None) -> None:
        self.api = api
        self.kcm_url = controller_manager_url

    def read(self) -> Counter[str]:
        status, data = self.api.request("GET", "/metrics")
        if status != 200:
            raise RuntimeError(f"GET /metrics: {status}")
        counts = _parse(data.decode(), APISERVER_FAMILIES)
        if self.kcm_url:
            # Its certificate is self-signed, for 127.0.0.1 only.
            insecure = ssl._create_unverified_context()
            with urllib.request.urlopen(self.kcm_url, context=insecure, timeout=30) as resp:
                page = resp.read().decode()
            counts.update(
                {f"kcm:{k}": v for k, v in _parse(page, CONTROLLER_MANAGER_FAMILIES).items()}
            )
        return counts

    @staticmethod
    def since(before: Counter[str], after: Counter[str]) -> dict[str, float]:
        moved = (k for k in after if after[k] != before.get(k, 0.0))
        return {k: round(after[k] - before.get(k, 0.0), 4) for k in moved}


class Profile:
    """kube-apiserver's CPU profile of the next `seconds`, fetched in a thread
    (the endpoint answers once the time is up)."""

    def __init__(self, api: Api, seconds: int, out: Path) -> None:
        self.out = out
        self.error = ""
        self._thread = threading.Thread(
            target=self._fetch, args=(api, seconds), name="apiserver-pprof", daemon=True
        )

    def start(self) -> Profile:
        self._thread.start()
        return self

    def _fetch(self, api: Api, seconds: int) -> None:
        status, data = api.request("GET", f"/debug/pprof/profile?seconds={seconds}")
        if status != 200:
            self.error = f"GET /debug/pprof/profile: {status} {data[:200]!r}"
            return
        self.out.write_bytes(data)

    def summary(self, timeout: float) -> dict[str, Any]:
        self._thread.join(timeout)
        if self._thread.is_alive() or self.error or not self.out.exists():
            return {"error": self.error or "no profile"}
        return summarize(self.out)


def summarize(profile: Path) -> dict[str, Any]:
    """CPU seconds of the profile in all, and under each of PROFILE_KINDS."""
    done = subprocess.run(
        ["go", "tool", "pprof", "-traces", str(profile)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-300:]}
    total, kinds = traces_by_kind(done.stdout)
    return {"file": profile.name, "cpu_seconds": round(total, 3), "by_kind": kinds}


def traces_by_kind(text: str) -> tuple[float, dict[str, float]]:
    """(CPU seconds in all, seconds under each kind) of pprof's -traces text."""
    patterns = {kind: re.compile(rx) for kind, rx in PROFILE_KINDS.items()}
    seconds: Counter[str] = Counter()
    total = 0.0
    for trace in text.split("-----------+-------------------------------------------------------"):
        lines = [line for line in trace.splitlines() if line.strip()]
        if not lines or not re.match(r"^\s+[0-9.]+(ms|s|us)\s", lines[0]):
            continue
        value = _duration(lines[0].split()[0])
        frames = "\n".join(line.strip() for line in lines)
        total += value
        for kind, rx in patterns.items():
            if rx.search(frames):
                seconds[kind] += value
    return total, {k: round(seconds[k], 3) for k in PROFILE_KINDS if seconds[k]}


def _duration(text: str) -> float:
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text)


def top_differences(
    mine: dict[str, float], theirs: dict[str, float], n: int = 5
) -> list[tuple[str, float, float]]:
    """The `n` figures by which `mine` exceeds `theirs` the most:
    (key, mine, theirs)."""
    keys = set(mine) | set(theirs)
    gaps = sorted(keys, key=lambda k: mine.get(k, 0.0) - theirs.get(k, 0.0), reverse=True)
    return [(k, mine.get(k, 0.0), theirs.get(k, 0.0)) for k in gaps[:n]]


def status_changes(jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the jobs' status writes changed, from the statuses the watcher
    saw (watcher._record): writes per job, and how many writes made each
    kind of change (a phase's move, or else the fields that moved)."""
    kinds: Counter[str] = Counter()
    per_job: Counter[int] = Counter()
    for entry in jobs.values():
        statuses = entry.get("statuses") or []
        writes = 0
        for old, new in itertools.pairwise(statuses):
            writes += 1
            kinds[_change(old, new)] += 1
        per_job[writes] += 1
    total = sum(kinds.values())
    return {
        "writes": total,
        "per_job": round(total / len(jobs), 2) if jobs else None,
        "jobs_by_writes": {str(k): v for k, v in sorted(per_job.items())},
        "by_change": dict(kinds.most_common(12)),
    }


def _change(old: dict[str, Any], new: dict[str, Any]) -> str:
    if old.get("phase") != new.get("phase"):
        return f"phase {old.get('phase') or '-'} -> {new.get('phase')}"
    moved = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return "same phase: " + ", ".join(moved)


def endpoints_made(endpoints: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How the run's Endpoints came to hold their pod's address: made with
    it, or made empty and updated (watcher._record)."""
    made = [e for e in endpoints.values() if "addressed_when_made" in e]
    return {
        "made": len(made),
        "made_with_address": sum(1 for e in made if e["addressed_when_made"]),
        "updates": sum(e.get("updates", 0) for e in endpoints.values()),
    }


def median_costs(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each cost figure of a variant's repeated runs as its median (the
    figures that name where the time goes are compared as medians, not
    taken from the run with the median creation time)."""
    flat: dict[str, list[float]] = {}
    for run in runs:
        for key, value in cost_figures(run).items():
            flat.setdefault(key, []).append(value)
    out = {}
    for key, values in flat.items():
        values += [0.0] * (len(runs) - len(values))  # absent from a run: none of it
        values.sort()
        out[key] = round(values[(len(values) - 1) // 2], 4)
    return out


def cost_figures(run: dict[str, Any]) -> dict[str, float]:
    figures: dict[str, float] = {}
    profile = run.get("apiserver_profile") or {}
    if "cpu_seconds" in profile:
        figures["profile|all"] = profile["cpu_seconds"]
    for kind, seconds in (profile.get("by_kind") or {}).items():
        figures[f"profile|{kind}"] = seconds
    for key, value in (run.get("server_costs") or {}).items():
        figures[f"metric|{key}"] = value
    for key, value in (run.get("apiserver_requests") or {}).items():
        figures[f"requests|{key}"] = value
    for key, value in (run.get("control_plane_cpu_seconds") or {}).items():
        figures[f"cpu|{key}"] = value
    for key, value in (run.get("endpoints") or {}).items():
        figures[f"endpoints|{key}"] = value
    writes = run.get("status_writes") or {}
    for key, value in (writes.get("by_change") or {}).items():
        figures[f"status writes|{key}"] = value
    operator = run.get("operator") or {}
    for key in ("cpu_seconds", "reconciles"):
        if key in operator:
            figures[f"operator|{key}"] = operator[key]
    return figures
