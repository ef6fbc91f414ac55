"""The autoscaler's log: a line for a pass that changed something, not for every pass."""

from __future__ import annotations

import logging

import pytest

from dlk8s.autoscaler.loop import AutoscalerLoop
from dlk8s.runtime.client import Kube


def passes(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records if r.getMessage() == "autoscaler pass"]


def test_idle_passes_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    # Informers that are never started: empty caches, no API calls.
    loop = AutoscalerLoop(Kube(api_client=None), jobs=lambda: [])  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG, logger="dlk8s.autoscaler.loop")
    for _ in range(3):
        loop.run_once()
    assert passes(caplog) == [logging.INFO, logging.DEBUG, logging.DEBUG]
    first = next(r for r in caplog.records if r.getMessage() == "autoscaler pass")
    assert first.elasticJobs == 0  # type: ignore[attr-defined]
    assert first.action == "0 change(s)"  # type: ignore[attr-defined]


def test_our_patch_stands_in_until_the_cache_catches_up_and_goes_with_the_job() -> None:
    def job(uid: str, version: str, trainers: str) -> dict[str, object]:
        meta = {"uid": uid, "resourceVersion": version, "annotations": {"t": trainers}}
        return {"metadata": meta}

    cached = [job("a", "5", "2"), job("b", "7", "1")]
    loop = AutoscalerLoop(Kube(api_client=None), jobs=lambda: cached)  # type: ignore[arg-type]
    loop._written.wrote("a", job("a", "6", "3"))
    loop._written.wrote("b", job("b", "7", "9"))
    # a: our patch is newer than the cache; b: the cache has caught up.
    assert loop.current_jobs() == [job("a", "6", "3"), job("b", "7", "1")]
    assert ("a" in loop._written, "b" in loop._written) == (True, False)
    cached.pop(0)  # a is deleted before its watch event showed our patch
    assert loop.current_jobs() == [job("b", "7", "1")]
    assert "a" not in loop._written
