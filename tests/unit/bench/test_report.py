"""make bench's burst report (bench/reports/burst.py): the figures its goals judge."""

from __future__ import annotations

from typing import Any

from bench.reports import burst as report


def _runs(*running: float, apiserver: float | None = None) -> list[dict[str, Any]]:
    return [
        {"total_running_s": t, "total_created_s": 1.0, "apiserver_cpu_seconds": apiserver}
        for t in running
    ]


def _row(lines: list[str], label: str) -> list[str]:
    row = next(line for line in lines if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


def test_each_goal_figure_is_the_median_of_its_own_runs_with_their_spread() -> None:
    res = {
        "repeats": {
            "ceiling": _runs(8.0, 6.0, 7.0, apiserver=10.0),
            # the run with the median job Running is not the one with the median CPU
            "operator": [
                {"total_running_s": 9.0, "total_created_s": 2.0, "apiserver_cpu_seconds": 14.0},
                {"total_running_s": 14.0, "total_created_s": 1.0, "apiserver_cpu_seconds": 12.0},
                {"total_running_s": 8.4, "total_created_s": 1.5, "apiserver_cpu_seconds": 11.0},
            ],
        },
    }
    lines = report.goal_table(res)
    assert "median of its own 3 runs" in lines[1]
    assert _row(lines, "ceiling") == [
        "1.00 (1.00-1.00)",
        "7.00 (6.00-8.00)",
        "10.00 (10.00-10.00)",
        "-",
    ]
    created, running, apiserver, controller = _row(lines, "dlk8s")
    assert created == "1.50 (1.00-2.00), 1.50x"
    assert running == "9.00 (8.40-14.00), 1.29x"
    assert apiserver == "12.00 (11.00-14.00), 1.20x"
    assert controller == "-"
    assert not any(line.startswith("| dlk8s before |") for line in lines)


def test_without_the_ceiling_there_is_nothing_to_compare() -> None:
    assert report.goal_table({"repeats": {"operator": _runs(1.0)}}) == []


def test_a_figure_a_run_did_not_measure_shows_as_missing_without_a_ratio() -> None:
    res = {"repeats": {"ceiling": _runs(7.0), "operator": _runs(9.0)}}
    assert _row(report.goal_table(res), "dlk8s")[2] == "-"
