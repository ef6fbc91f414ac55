"""Asking the operator's health endpoints (runtime.serving.ProbeServer) what a
kubelet's probe would get."""

from __future__ import annotations

import urllib.error
import urllib.request

from dlk8s.runtime.serving import ProbeServer


def probe(server: ProbeServer, path: str) -> tuple[int, str]:
    """The status code and body of GET `path`: a failing probe's too."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def failing(checks: dict[str, list[str]]) -> list[str]:
    """Every reason of every failed check, as the operator's log has them."""
    return [reason for reasons in checks.values() for reason in reasons]
