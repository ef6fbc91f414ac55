"""The ports a run's servers get (dlk8s_dev/ports.py): never from the kernel's
range for outgoing connections, never one another run chose lately."""

from __future__ import annotations

import json
import multiprocessing
import socket
from pathlib import Path

import pytest

from dlk8s_dev import ports


@pytest.fixture(autouse=True)
def claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "claims.json"
    monkeypatch.setattr(ports, "CLAIMS", path)
    return path


def test_a_port_is_outside_the_outgoing_range_and_free() -> None:
    outgoing = ports.outgoing_range()
    for _ in range(50):
        port = ports.free_port()
        assert port not in outgoing
        assert port >= ports.LOWEST
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing holds it


def test_a_port_claimed_lately_is_not_chosen_again(
    claims: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = [ports.free_port() for _ in range(20)]
    assert len(set(chosen)) == 20
    assert sorted(json.loads(claims.read_text())) == sorted(str(p) for p in chosen)
    outgoing = ports.outgoing_range()
    other = next(p for p in range(ports.LOWEST, 65536) if p not in outgoing and p not in chosen)
    offered = iter([chosen[0], chosen[-1], other])
    monkeypatch.setattr(ports.random, "randrange", lambda *_: next(offered))
    assert ports.free_port() == other


def test_claims_expire(claims: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = ports.free_port()
    old = {str(port): 1.0}  # chosen long ago
    claims.write_text(json.dumps(old))
    monkeypatch.setattr(ports.random, "randrange", lambda *_: port)
    assert ports.free_port() == port


def test_a_damaged_file_of_claims_is_started_afresh(claims: Path) -> None:
    claims.write_text('{"1234": ')
    port = ports.free_port()
    assert list(json.loads(claims.read_text())) == [str(port)]


def _choose(path: str, out: multiprocessing.Queue[list[int]]) -> None:
    ports.CLAIMS = Path(path)  # type: ignore[misc]
    out.put([ports.free_port() for _ in range(30)])


def test_runs_choosing_at_once_never_choose_the_same_port(claims: Path) -> None:
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[list[int]] = context.Queue()
    runs = [context.Process(target=_choose, args=(str(claims), out)) for _ in range(4)]
    for run in runs:
        run.start()
    chosen = [port for _ in runs for port in out.get(timeout=60)]
    for run in runs:
        run.join(timeout=60)
    assert len(chosen) == 120
    assert len(set(chosen)) == 120, "two runs chose one port"
