"""Fixtures of the runtime's unit tests: a controller whose caches the test
fills, over a recording fake of our own client wrapper (tests/unit/fakes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dlk8s.runtime.apiresources import JOB_RESOURCES
from dlk8s.runtime.controller import Controller
from dlk8s.runtime.informer import Cache

from .support.controller import submitted
from .support.fakes import RecordingKube
from .support.worlds import CONFIG, NOW


@pytest.fixture
def kube() -> RecordingKube:
    return RecordingKube()


@pytest.fixture
def job_caches() -> dict[str, Cache]:
    """The controller's job caches by kind; a test puts jobs in as a watch would."""
    return {kind: Cache() for kind in JOB_RESOURCES}


@pytest.fixture
def submitted_job(job_caches: dict[str, Cache]) -> dict[str, Any]:
    """The seed's TFJob in its cache, as the job watch delivers it."""
    return submitted(job_caches)


@pytest.fixture
def api_pool() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(4)
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture
def controller(
    kube: RecordingKube, job_caches: dict[str, Cache], api_pool: ThreadPoolExecutor
) -> Iterator[Controller]:
    """No informers and no workers: the test calls sync or process_next itself."""
    made = Controller(
        kube, CONFIG, job_caches, workers=0, clock=lambda: NOW, child_event_batch=0, pool=api_pool
    )
    yield made
    made.queue.shut_down()
