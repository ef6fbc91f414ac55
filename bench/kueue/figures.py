"""The Kueue benchmark's figures, from what its watcher saw: per job, from
its start to its pods created, and with Kueue the queue's wait and the
checks a queue must pass."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.common.harness import pct


def figures(seen: dict[str, Any], mode: str, pods_per_job: int, quota: int) -> dict[str, Any]:
    """Per job, from its start (Admitted with Kueue, else created) to its
    `pods_per_job`-th pod created, for all and apart for the first `quota`
    to start and the rest; with Kueue, the queue's wait and checks too."""
    pods: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in seen["pods"].values():
        pods[pod["job"]].append(pod)
    workloads: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for wl in seen.get("workloads", {}).values():
        workloads[wl["job"]].append(wl)
    delays, starts, waits, incomplete = {}, {}, {}, []
    for name, job in seen["tfjobs"].items():
        added = sorted(p["added"] for p in pods[name])
        start = job["added"]
        if mode == "kueue":
            admitted = [w["admitted"] for w in workloads[name] if "admitted" in w]
            start = min(admitted) if admitted else float("nan")
            waits[name] = start - job["added"]
        if len(added) < pods_per_job or start != start:
            incomplete.append(name)
            continue
        delays[name], starts[name] = added[pods_per_job - 1] - start, start
    out: dict[str, Any] = {
        "jobs_measured": len(delays),
        "jobs_incomplete": sorted(incomplete)[:20],
        "pods_created_p50_s": pct(list(delays.values()), 50),
        "pods_created_p99_s": pct(list(delays.values()), 99),
        "pods_created_max_s": pct(list(delays.values()), 100),
    }
    # With Kueue and gated: the first wave starts together, the rest one by
    # one as others end; all at once: the first `quota` created, the rest.
    order = sorted(delays, key=lambda n: starts[n])
    for key, names in (("first_started", order[:quota]), ("started_later", order[quota:])):
        out[key] = {
            "jobs": len(names),
            "p50_s": pct([delays[n] for n in names], 50),
            "p99_s": pct([delays[n] for n in names], 99),
        }
    if mode == "kueue":
        out["queue_wait_p50_s"] = pct(list(waits.values()), 50)
        out["queue_wait_p99_s"] = pct(list(waits.values()), 99)
        out["checks"] = queue_checks(pods, workloads, quota)
    return out


def queue_checks(
    pods: dict[str, list[dict[str, Any]]],
    workloads: dict[str, list[dict[str, Any]]],
    quota: int,
) -> dict[str, Any]:
    """What must hold of a queue: never more admitted than the quota, no pod
    before its admission, no readmission, one Workload per job."""
    steps: list[tuple[float, int]] = []
    for wls in workloads.values():
        for wl in wls:
            if "admitted" in wl:
                steps.append((wl["admitted"], 1))
                if "finished" in wl:
                    steps.append((wl["finished"], -1))
    at_once = peak = 0
    for _, step in sorted(steps):
        at_once += step
        peak = max(peak, at_once)
    early = []
    for job, job_pods in pods.items():
        rvs = [w["admitted_rv"] for w in workloads.get(job, []) if "admitted_rv" in w]
        first = min(rvs) if rvs else None
        early += [p for p in job_pods if first is None or p["rv"] < first]

    def count(pred: Any) -> int:
        return sum(1 for wls in workloads.values() if pred(wls))

    return {
        "quota_jobs": quota,
        "max_admitted_at_once": peak,
        "workloads_admitted": count(lambda wls: any("admitted" in w for w in wls)),
        "workloads_finished": count(lambda wls: any("finished" in w for w in wls)),
        "pods_before_admission": len(early),
        "readmissions": sum(
            max(0, w.get("admissions", 0) - 1) for wls in workloads.values() for w in wls
        ),
        "jobs_with_more_than_one_workload": count(lambda wls: len(wls) > 1),
    }
