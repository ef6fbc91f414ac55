"""A reconcile id on every log line of one pass, as controller-runtime's
reconcileID: the lines the worker logs and those of the API calls the pass
runs on the executor's pool alike; the next pass has an id of its own.

The lines are read as the operator writes them (runtime.logs.JsonFormatter).
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dlk8s.runtime import logs
from dlk8s.runtime.controller import Controller
from dlk8s.runtime.errors import TransportError
from dlk8s.runtime.informer import Cache

from ..support.controller import pod_starts, run_one, watch_catches_up
from ..support.fakes import RecordingKube

Lines = Callable[[], list[dict[str, Any]]]


class EventsRefused(RecordingKube):
    """Every event post fails, so the pool's threads log one line each."""

    def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        raise TransportError("connection refused")


@pytest.fixture
def lines() -> Iterator[Lines]:
    """The JSON lines logged under `dlk8s` since the last call."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("dlk8s")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def read() -> list[dict[str, Any]]:
        text = stream.getvalue()
        stream.seek(0)
        stream.truncate()
        return [json.loads(line) for line in text.splitlines()]

    yield read
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def kube() -> RecordingKube:
    """The controller's (tests/unit/conftest.py) client: its events fail."""
    return EventsRefused()


@pytest.fixture
def api_pool() -> Iterator[ThreadPoolExecutor]:
    """A pool whose calls run in order: one more call waited for is the last."""
    pool = ThreadPoolExecutor(1)
    yield pool
    pool.shutdown(wait=True)


def one_pass(controller: Controller, pool: ThreadPoolExecutor) -> None:
    run_one(controller)
    pool.submit(lambda: None).result()  # the events it posted in the background


@pytest.mark.usefixtures("submitted_job")
def test_every_line_of_one_pass_carries_its_id_and_the_next_pass_another(
    lines: Lines,
    controller: Controller,
    kube: RecordingKube,
    job_caches: dict[str, Cache],
    api_pool: ThreadPoolExecutor,
) -> None:
    one_pass(controller, api_pool)
    first = lines()
    watch_catches_up(controller, kube, job_caches)
    pod_starts(controller, kube, "example-job-worker-0")  # the status has news to write
    one_pass(controller, api_pool)
    second = lines()

    # The worker's line and the pool thread's, in each pass (the second
    # creates the running worker's Service, and tells of it).
    assert {line["msg"] for line in first} == {"status updated", "event not recorded"}
    assert {line["msg"] for line in second} == {"status updated", "event not recorded"}
    first_ids = {line.get("reconcileId") for line in first}
    second_ids = {line.get("reconcileId") for line in second}
    assert (len(first_ids), len(second_ids)) == (1, 1), (first, second)
    (first_id,), (second_id,) = first_ids, second_ids
    assert re.fullmatch("[0-9a-f]{8}", first_id)
    assert re.fullmatch("[0-9a-f]{8}", second_id)
    assert first_id != second_id


def test_a_line_outside_every_pass_has_no_id(lines: Lines) -> None:
    logging.getLogger("dlk8s.runtime").info("between passes")
    with logs.reconcile_id() as inside:
        logging.getLogger("dlk8s.runtime").info("in a pass")
    logging.getLogger("dlk8s.runtime").info("after it")
    assert [line.get("reconcileId") for line in lines()] == [None, inside, None]
