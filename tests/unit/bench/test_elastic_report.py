"""make bench-elastic's verdict (bench/elastic/report.py): a trace replayed
several times is judged on the median of its ratios to static, and its
checks must hold in every replay."""

from __future__ import annotations

from typing import Any

from bench.elastic import report as elastic_report

CLEAN = {"overcommitted": {}, "outOfBounds": {}, "ticks": 100}


def _run(mean: float, worst: float, gpu: float = 0.98, **checks: Any) -> dict[str, Any]:
    return {
        "meanWait": mean,
        "maxWait": worst,
        "gpuUtilizationSaturated": gpu,
        "jobsCompleted": 36,
        "checks": {**CLEAN, **checks},
    }


def _replay(mean: float, worst: float, **auto: Any) -> dict[str, Any]:
    """One replay whose autoscaler waits `mean` and `worst` of static's 100 and 1000."""
    return {"autoscaler": _run(100 * mean, 1000 * worst, **auto), "static": _run(100, 1000)}


def _result(*replays: dict[str, Any], targets: tuple[float, float] = (0.65, 0.7)) -> dict:
    shown = elastic_report.median_replay(list(replays))
    return {"replays": list(replays), "runs": replays[shown], "targets": list(targets)}


def test_the_ratios_are_the_medians_of_the_replays_not_of_the_one_shown() -> None:
    result = _result(_replay(0.5, 0.9), _replay(0.7, 0.6), _replay(0.6, 0.68))
    verdict = elastic_report.acceptance(result)
    assert verdict["meanWaitRatio"] == 0.6
    assert verdict["maxWaitRatio"] == 0.68
    assert verdict["met"]["mean wait <= 0.65 of static's"]
    assert verdict["met"]["max wait <= 0.7 of static's"]
    # The replay with the median mean-wait ratio is the one the tables show.
    assert result["runs"] is result["replays"][2]


def test_a_median_above_its_target_fails_though_one_replay_meets_it() -> None:
    verdict = elastic_report.acceptance(
        _result(_replay(0.6, 0.5), _replay(0.7, 0.8), _replay(0.66, 0.75))
    )
    assert not verdict["met"]["mean wait <= 0.65 of static's"]
    assert not verdict["met"]["max wait <= 0.7 of static's"]


def test_gpu_use_and_the_checks_must_hold_in_every_replay() -> None:
    low_gpu = _replay(0.5, 0.5, gpu=0.96)
    overcommit = _replay(0.5, 0.5, overcommitted={"gpu-node-1": 2})
    verdict = elastic_report.acceptance(_result(_replay(0.5, 0.5), low_gpu, overcommit))
    assert not verdict["met"]["GPU use while demand >= capacity >= 97 %"]
    assert not verdict["met"]["no node overcommitted"]
    assert verdict["met"]["every job within [min, max]"]


def test_a_result_of_one_replay_from_before_replays_is_read_as_one() -> None:
    single = _replay(0.4, 0.3)
    verdict = elastic_report.acceptance({"runs": single})
    assert (verdict["meanWaitRatio"], verdict["maxWaitRatio"]) == (0.4, 0.3)
    assert verdict["met"]["mean wait <= 0.5 of static's"]
    assert verdict["perReplay"] == [(0.4, 0.3)]


def test_a_result_without_targets_takes_its_traces() -> None:
    verdict = elastic_report.acceptance({"runs": _replay(0.6, 0.6)}, "heavy")
    assert verdict["met"]["mean wait <= 0.65 of static's"]
    assert not elastic_report.acceptance({"runs": _replay(0.6, 0.6)}, "burst")["met"][
        "mean wait <= 0.5 of static's"
    ]
