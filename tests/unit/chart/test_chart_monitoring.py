"""The chart's alerting rules and Grafana dashboard against the operator's metrics.

The PrometheusRule is rendered with helm and run through `promtool test rules`
on series shaped like the operator's (tests/data/prometheus/*_test.yaml): each
alert fires when it should, with the annotations a person reads, and stays
quiet otherwise. The metric names of the rules and the dashboard are checked
against the operator's list below, so a renamed metric cannot leave a panel
or an alert silently empty.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "dlk8s"
HELM = ROOT / ".tools" / "bin" / "helm4"
RULE_TESTS = ROOT / "tests" / "data" / "prometheus"
DASHBOARD = CHART / "files" / "dashboards" / "dlk8s.json"

# What the operator exports (hooks/dlk8s/runtime/metrics.py), by type.
COUNTERS = {
    "dlk8s_api_requests_total",
    "dlk8s_api_errors_total",
    "dlk8s_reconcile_errors_total",
    "dlk8s_reconcile_total",
    "dlk8s_workqueue_adds_total",
    "dlk8s_workqueue_retries_total",
    "dlk8s_jobs_created_total",
    "dlk8s_jobs_succeeded_total",
    "dlk8s_jobs_failed_total",
    "dlk8s_jobs_restarted_total",
    "dlk8s_jobs_deleted_total",
}
GAUGES = {
    "dlk8s_jobs",
    "dlk8s_workqueue_depth",
    "dlk8s_leader",
    "dlk8s_clock_offset_seconds",
    "dlk8s_workqueue_longest_running_processor_seconds",
}
HISTOGRAMS = {
    "dlk8s_reconcile_duration_seconds",
    "dlk8s_workqueue_queue_duration_seconds",
    "dlk8s_workqueue_work_duration_seconds",
}
SERIES = COUNTERS | GAUGES | {f"{h}_{s}" for h in HISTOGRAMS for s in ("bucket", "sum", "count")}


def promtool() -> str:
    found = (
        os.environ.get("DLK8S_PROMTOOL")
        or (str(ROOT / ".tools" / "bin" / "promtool") if (ROOT / ".tools/bin/promtool").exists()
            else None)
        or shutil.which("promtool")
    )  # fmt: skip
    if not found:
        pytest.skip("promtool missing: `make tools` builds it into .tools/bin")
    return found


def render(*sets: str, template: str = "templates/prometheusrule.yaml") -> dict[str, Any]:
    argv = [str(HELM), "template", "dlk8s", str(CHART), "--namespace", "dlk8s-system",
            "--set", "metrics.prometheusRule.enabled=true",
            "--set", "metrics.dashboard.enabled=true", "--show-only", template]  # fmt: skip
    for item in sets:
        argv += ["--set", item]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    rendered: dict[str, Any] = yaml.safe_load(done.stdout)
    return rendered


def rule_test(tmp_path: Path, test_file: str, *sets: str) -> subprocess.CompletedProcess[str]:
    rule = render(*sets)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    shutil.copy(RULE_TESTS / test_file, tmp_path / test_file)
    return subprocess.run(
        [promtool(), "test", "rules", test_file],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip


def expressions() -> list[str]:
    rules = render()["spec"]["groups"][0]["rules"]
    leader = render("replicaCount=2")["spec"]["groups"][0]["rules"]
    return [r["expr"] for r in rules + leader]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(dlk8s_[a-z_]+)\b", expr))


# --- the alerts, in Prometheus' own rule engine -----------------------------------------


def test_alerts_fire_when_they_should_and_only_then(tmp_path: Path) -> None:
    done = rule_test(tmp_path, "rules_test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_no_leader_alert_with_leader_election(tmp_path: Path) -> None:
    done = rule_test(tmp_path, "rules_leader_test.yaml", "replicaCount=2")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rule_tests_fail_when_a_threshold_moves(tmp_path: Path) -> None:
    # team-a's 83% failures no longer cross a 90% bound: the expected alert is missing.
    done = rule_test(tmp_path, "rules_test.yaml", "metrics.prometheusRule.jobFailureRatio=0.9")
    assert done.returncode != 0
    assert "DLK8sJobsFailing" in done.stdout + done.stderr


def test_rules_pass_promtool_check_with_extra_rules(tmp_path: Path) -> None:
    rule = render(
        "metrics.prometheusRule.extraRules[0].alert=DLK8sManyJobs",
        "metrics.prometheusRule.extraRules[0].expr=sum(dlk8s_jobs) > 1000",
    )
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    done = subprocess.run(
        [promtool(), "check", "rules", "rules.yaml"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


# --- the metric names ----------------------------------------------------------------------


def test_rules_use_only_metrics_the_operator_exports() -> None:
    used = set().union(*(metric_names(e) for e in expressions()))
    assert used <= SERIES, used - SERIES
    assert {"dlk8s_jobs_failed_total", "dlk8s_reconcile_total", "dlk8s_leader"} <= used


def test_dashboard_uses_only_metrics_the_operator_exports_and_charts_each() -> None:
    used = set().union(*(metric_names(q) for q in dashboard_queries()))
    assert used <= SERIES, used - SERIES
    charted = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used}
    assert charted == COUNTERS | GAUGES | HISTOGRAMS


def test_counters_are_rated_and_histograms_read_by_bucket() -> None:
    # A raw counter or an averaged histogram on a panel is a number nobody can read.
    for query in dashboard_queries() + expressions():
        for name in metric_names(query):
            if name in COUNTERS:
                assert re.search(rf"(rate|increase)\({name}\{{", query), (name, query)
            if name.endswith("_bucket"):
                assert "histogram_quantile(" in query, query


# --- the dashboard as Grafana reads it -------------------------------------------------------


def test_dashboard_queries_pick_the_datasource_and_operator_variables() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["description"], panel["title"]
        for target in panel["targets"]:
            assert 'job=~"$job"' in target["expr"], (panel["title"], target["expr"])


def test_dashboard_panels_do_not_overlap() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, panel["title"]
        taken |= cells


def test_dashboard_configmap_carries_the_file_unchanged() -> None:
    config_map = render(template="templates/dashboard.yaml")
    assert json.loads(config_map["data"]["dlk8s.json"]) == dashboard()
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
