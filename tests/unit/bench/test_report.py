"""make bench's burst report (bench/reports/burst.py): the figures its goals judge."""

from __future__ import annotations

from typing import Any

from bench.reports import burst as report


def _runs(*running: float) -> list[dict[str, Any]]:
    return [{"total_running_s": t, "total_created_s": 1.0} for t in running]


def test_each_goal_figure_is_the_median_of_its_own_runs() -> None:
    res = {
        "repeats": {"ceiling": _runs(8.0, 6.0, 7.0), "operator": _runs(9.0, 14.0, 8.4)},
        "cost_medians": {
            "ceiling": {"cpu|kube-apiserver": 10.0},
            "operator": {"cpu|kube-apiserver": 12.0},
        },
    }
    line = report.own_medians(res)[-1]
    assert "job Running, total: ceiling 7.00, operator 9.00 (1.29x)" in line
    assert "kube-apiserver CPU seconds: ceiling 10.00, operator 12.00 (1.20x)" in line
    assert "operator before" not in line


def test_without_the_ceiling_there_is_nothing_to_compare() -> None:
    assert report.own_medians({"repeats": {"operator": _runs(1.0)}}) == []


def test_a_figure_a_run_did_not_measure_shows_as_missing_without_a_ratio() -> None:
    res = {"repeats": {"ceiling": _runs(7.0), "operator": _runs(9.0)}, "cost_medians": {}}
    line = report.own_medians(res)[-1]
    assert "kube-apiserver CPU seconds: ceiling -, operator -." in line
