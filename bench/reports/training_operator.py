"""dlk8s beside Kubeflow's training-operator in the burst benchmark's report
(`make bench`'s scenario 1, bench/common/training_operator.py)."""

from __future__ import annotations

from typing import Any

from bench.reports.cells import div, fmt, verbs

PEERS = ("training-operator-stock", "training-operator-tuned")
PEER_ROWS = (
    ("all pods created, total", "total_created_s"),
    ("all pods created, per job p99", "job_created_p99_s"),
    ("job Running, total ¹", "total_running_s"),
    ("job Running, per job p99 ¹", "job_running_p99_s"),
    ("operator CPU seconds", "operator.cpu_seconds"),
    ("operator peak RSS (MiB)", "operator.peak_rss_mb"),
    ("kube-apiserver CPU seconds", "control_plane_cpu_seconds.kube-apiserver"),
    ("kube-controller-manager CPU seconds", "control_plane_cpu_seconds.kube-controller"),
)


def _get(run: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        run = run.get(part) if isinstance(run, dict) else None  # type: ignore[assignment]
    return run


def peer_table(res: dict[str, Any]) -> list[str]:
    """dlk8s beside training-operator, stock and tuned: the same burst in the same run."""
    peers = [p for p in PEERS if p in res]
    if not peers:
        return []
    runs = [("ceiling", res["ceiling"]), ("dlk8s", res["operator"])]
    runs += [(p.removeprefix("training-operator-"), res[p]) for p in peers]
    names = [name for name, _ in runs]
    settings = res[peers[0]]["training_operator"]
    lines = [
        f"### dlk8s beside Kubeflow training-operator {settings['version']}",
        "",
        "The same jobs as kubeflow.org TFJobs (Chief, 2 Worker, PS) after the runs above; "
        + "; ".join(
            f"{p.removeprefix('training-operator-')}: {res[p]['training_operator']['qps']} QPS"
            f" (burst {res[p]['training_operator']['burst']}),"
            f" {res[p]['training_operator']['threads']} thread(s)"
            for p in peers
        )
        + ". Times in seconds from submission.",
        "",
        "| metric | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"dlk8s/{n}" for n in names[2:])
        + " |",
        "|---|" + "---:|" * (2 * len(names) - 2),
    ]
    for title, key in PEER_ROWS:
        values = [_get(run, key) for _, run in runs]
        ratios = [div(values[1], v) for v in values[2:]]
        cells = [fmt(v) for v in values] + [fmt(r) + "x" if r else "-" for r in ratios]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    by_verb = [verbs(run.get("apiserver_requests_by_verb") or {}) for _, run in runs]
    lines += [
        "| apiserver requests by verb | " + " | ".join(by_verb) + " |" + " |" * len(peers),
        "",
        "¹ dlk8s: the TFJob's status.phase turns Running (every pod created, MASTER"
        " Running); training-operator: its Running condition turns True (its Chief"
        " Running); ceiling: every pod Running.",
        "",
    ]
    return lines
