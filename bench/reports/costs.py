"""Where the control plane's time goes, dlk8s beside the ceiling (and
training-operator and Trainer tuned), in the burst benchmark's report
(bench/common/servercosts.py)."""

from __future__ import annotations

from typing import Any

from bench.common.servercosts import PROFILE_KINDS, cost_figures, top_differences
from bench.reports.cells import fmt

# Figures shown whatever their difference: what the issue asks about.
ALWAYS = (
    "cpu|kube-apiserver",
    "cpu|kube-controller",
    "profile|all",
    "requests|PUT tfjobs/status",
    "requests|POST events",
    "requests|PUT endpoints",
    "requests|PUT endpointslices",
    "endpoints|made_with_address",
    "endpoints|updates",
    "operator|reconciles",
)
GROUPS = (
    ("kube-apiserver's CPU profile (s), by kind of work", "profile|"),
    ("requests", "requests|"),
    ("kube-controller-manager's controllers (work seconds, items)", "metric|kcm:"),
    ("kube-apiserver's counters", "metric|"),
)


def costs_table(res: dict[str, Any]) -> list[str]:
    """The runs' cost figures side by side; medians of the repeats when there are."""
    variants = ("ceiling", "operator", "baseline", "training-operator-tuned", "trainer-tuned")
    names = [n for n in variants if n in res]
    medians = res.get("cost_medians") or {}
    figures = {n: medians.get(n) or cost_figures(res[n]) for n in names}
    if not any(k.startswith("profile|") for k in figures.get("operator", {})):
        return []
    mine, theirs = figures["operator"], figures["ceiling"]
    repeats = len((res.get("repeats") or {}).get("operator") or [None])
    lines = [
        "### Where the control plane's time goes",
        "",
        f"Each figure the median of {repeats} run(s) of each variant"
        " (bench/common/servercosts.py): kube-apiserver's CPU profile over each run's first"
        " seconds by kind of work (a sample counts for every kind on its stack),"
        " its request counts, its own counters, and kube-controller-manager's work."
        " Difference = dlk8s - ceiling.",
        "",
        "| figure | " + " | ".join(_title(n) for n in names) + " | difference |",
        "|---|" + "---:|" * (len(names) + 1),
    ]
    shown: list[str] = [k for k in ALWAYS if k in mine or k in theirs]
    for _, prefix in GROUPS:
        group_mine = {k: v for k, v in mine.items() if k.startswith(prefix)}
        group_theirs = {k: v for k, v in theirs.items() if k.startswith(prefix)}
        if prefix == "metric|":
            group_mine = {k: v for k, v in group_mine.items() if not k.startswith("metric|kcm:")}
        for key, _, _ in top_differences(group_mine, group_theirs, 5):
            if key not in shown:
                shown.append(key)
    for key in shown:
        values = [figures[n].get(key, 0.0) for n in names]
        gap = mine.get(key, 0.0) - theirs.get(key, 0.0)
        lines.append(
            f"| {_label(key)} | " + " | ".join(fmt(v) for v in values) + f" | {gap:+.2f} |"
        )
    writes = {k: v for k, v in mine.items() if k.startswith("status writes|")}
    if writes:
        lines += [
            "",
            "dlk8s's status writes by what they changed: "
            + "; ".join(f"{k.split('|', 1)[1]}: {fmt(v)}" for k, v in writes.items())
            + ".",
        ]
    return [*lines, ""]


def _title(name: str) -> str:
    titles = {
        "operator": "dlk8s",
        "baseline": "dlk8s before",
        "training-operator-tuned": "training-operator tuned",
        "trainer-tuned": "Trainer tuned",
    }
    return titles.get(name, name)


def _label(key: str) -> str:
    family, _, rest = key.partition("|")
    if family == "profile":
        return f"API server CPU: {rest}" if rest in PROFILE_KINDS else "API server CPU: profiled"
    if family == "metric":
        return rest.replace("|", " ")
    return f"{family}: {rest}"
