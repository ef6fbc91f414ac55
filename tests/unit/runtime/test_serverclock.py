"""runtime.serverclock: the API server's clock from its answers' Date."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from dlk8s.runtime.serverclock import ServerClock

SERVER = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC).timestamp()


class Local:
    """Our wall clock, `ahead` seconds off the server's."""

    def __init__(self, ahead: float) -> None:
        self.now = SERVER + ahead

    def __call__(self) -> float:
        return self.now


def date(at: float) -> str:
    """The Date header the API server writes at `at`: whole seconds."""
    return format_datetime(datetime.fromtimestamp(int(at), UTC), usegmt=True)


@pytest.mark.parametrize("ahead", [300.0, -300.0, 42.7, -3.2])
def test_a_clock_off_by_seconds_or_minutes_reads_the_servers_time(ahead: float) -> None:
    local = Local(ahead)
    clock = ServerClock(local)
    sent = local()
    local.now += 0.2  # the round trip; the server wrote its Date half-way
    clock.observe(date(SERVER + 0.1), sent, local())
    assert abs(clock.timestamp() - (SERVER + 0.2)) <= 0.6
    assert abs(clock.now().timestamp() - clock.timestamp()) < 1e-3


def test_an_offset_within_the_estimates_own_error_is_none() -> None:
    local = Local(1.4)
    clock = ServerClock(local)
    clock.observe(date(SERVER), local(), local())
    assert clock.offset == 0.0
    assert clock.timestamp() == local()


@pytest.mark.parametrize("header", [None, "", "not a date"])
def test_an_answer_without_a_usable_date_changes_nothing(header: str | None) -> None:
    local = Local(300)
    clock = ServerClock(local)
    clock.observe(header, local(), local())
    assert clock.offset == 0.0


def test_a_slow_round_trip_is_no_sample() -> None:
    local = Local(300)
    clock = ServerClock(local)
    sent = local()
    local.now += 5
    clock.observe(date(SERVER + 2.5), sent, local())
    assert clock.offset == 0.0


def test_a_clock_set_right_again_is_followed() -> None:
    local = Local(300)
    clock = ServerClock(local)
    clock.observe(date(SERVER), local(), local())
    assert clock.offset == pytest.approx(-299.5)
    local.now = SERVER + 10  # NTP stepped it back
    clock.observe(date(SERVER + 10), local(), local())
    assert clock.offset == 0.0
