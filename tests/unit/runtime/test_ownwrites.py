"""Our own writes stand in for the cached object until the cache catches up;
the event that only shows one back is told apart once (runtime.ownwrites)."""

from __future__ import annotations

from typing import Any

from dlk8s.runtime.ownwrites import OwnWrites


def job(version: str, status: str, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": version}, "status": {"phase": status}}


def test_a_write_stands_in_until_the_cache_holds_a_version_as_new() -> None:
    writes = OwnWrites()
    writes.wrote("u1", job("12", "Running"))
    assert writes.current(job("11", "Created")) == job("12", "Running")
    assert writes.current(job("12", "Running")) == job("12", "Running")
    assert "u1" not in writes
    # Gone from the overlay: an older cached version is no longer overlaid.
    assert writes.current(job("11", "Created")) == job("11", "Created")


def test_versions_compare_as_numbers_not_as_text() -> None:
    writes = OwnWrites()
    writes.wrote("u1", job("9", "Running"))
    assert writes.current(job("10", "Succeeded")) == job("10", "Succeeded")


def test_the_echo_of_a_write_is_told_apart_once_and_only_at_its_version() -> None:
    writes = OwnWrites()
    writes.wrote("u1", job("12", "Running"))
    assert not writes.is_echo({"uid": "u1", "resourceVersion": "11"})
    assert writes.is_echo({"uid": "u1", "resourceVersion": "12"})
    assert not writes.is_echo({"uid": "u1", "resourceVersion": "12"})
    assert not writes.is_echo({"uid": "u2", "resourceVersion": "12"})


def test_a_deleted_object_leaves_nothing_behind() -> None:
    writes = OwnWrites()
    writes.wrote("u1", job("12", "Running"))
    writes.wrote("u2", job("7", "Running", uid="u2"))
    writes.forget("u1")
    writes.keep_only(["u3"])
    assert ("u1" in writes, "u2" in writes) == (False, False)
    assert not writes.is_echo({"uid": "u1", "resourceVersion": "12"})
    assert not writes.is_echo({"uid": "u2", "resourceVersion": "7"})
