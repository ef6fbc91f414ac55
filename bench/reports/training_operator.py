"""dlk8s beside its peers in the burst benchmark's report (`make bench`'s
scenario 1, bench/common/peers.py): Kubeflow's training-operator
(bench/common/training_operator.py) and Kubeflow Trainer v2 with JobSet
(bench/common/trainer.py), a table each."""

from __future__ import annotations

from typing import Any

from bench.reports.cells import div, fmt, verbs

PEERS = ("training-operator-stock", "training-operator-tuned")
TRAINER_PEERS = ("trainer-stock", "trainer-tuned")
PEER_ROWS = (
    ("all pods created, total", "total_created_s"),
    ("all pods created, per job p99", "job_created_p99_s"),
    ("job Running, total ¹", "total_running_s"),
    ("job Running, per job p99 ¹", "job_running_p99_s"),
    ("operator CPU seconds ²", "operator.cpu_seconds"),
    ("operator peak RSS (MiB) ²", "operator.peak_rss_mb"),
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
    settings = res[peers[0]]["training_operator"]
    title = f"### dlk8s beside Kubeflow training-operator {settings['version']}"
    intro = (
        "The same jobs as kubeflow.org TFJobs (Chief, 2 Worker, PS) after the runs above; "
        + "; ".join(
            f"{p.removeprefix('training-operator-')}: {res[p]['training_operator']['qps']} QPS"
            f" (burst {res[p]['training_operator']['burst']}),"
            f" {res[p]['training_operator']['threads']} thread(s)"
            for p in peers
        )
        + ". Times in seconds from submission."
    )
    return _table(res, peers, "training-operator-", title, intro)


def trainer_table(res: dict[str, Any]) -> list[str]:
    """dlk8s beside Kubeflow Trainer v2 with JobSet, stock and tuned."""
    peers = [p for p in TRAINER_PEERS if p in res]
    if not peers:
        return []
    first = res[peers[0]]["trainer"]
    title = (
        f"### dlk8s beside Kubeflow Trainer {first['version']} with JobSet"
        f" {first['jobset_version']}"
    )
    intro = (
        "The same jobs as TrainJobs on a ClusterTrainingRuntime of their shape (a JobSet of"
        " master, worker (2 pods) and ps; one headless Service per JobSet, whose pods"
        " kube-controller-manager's Job controller makes) after the runs above; "
        + "; ".join(
            f"{p.removeprefix('trainer-')}: JobSet {t['jobset_qps']} QPS (burst"
            f" {t['jobset_burst']}), {t['jobset_workers']} reconcile(s); Trainer"
            f" {t['trainer_qps']} QPS (burst {t['trainer_burst']}),"
            f" {t['trainer_workers']} TrainJob reconcile(s)"
            for p in peers
            for t in [res[p]["trainer"]]
        )
        + ". Times in seconds from submission."
    )
    return _table(res, peers, "trainer-", title, intro)


def _table(res: dict[str, Any], peers: list[str], prefix: str, title: str, intro: str) -> list[str]:
    runs = [("ceiling", res["ceiling"]), ("dlk8s", res["operator"])]
    runs += [(p.removeprefix(prefix), res[p]) for p in peers]
    names = [name for name, _ in runs]
    lines = [
        title,
        "",
        intro,
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
        " Running); Trainer: its status (its JobSet's) shows every replicated Job ready"
        " (all its pods ready); ceiling: every pod Running.",
        "² Trainer: JobSet's and Trainer's processes summed.",
        "",
    ]
    return lines
