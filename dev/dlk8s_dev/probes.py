"""HTTP(S) checks of the local servers: etcd's /health, the API server's
/readyz and its answers, the controllers' and Kueue's health endpoints.

urllib rather than the kubernetes client: the waits poll five times a
second, and the client is the tests' own, loaded only when one asks for it.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def https_ok(url: str, token: str | None, ca: Path | None) -> bool:
    return https_json(url, token, ca)[0] == 200


def https_json(
    url: str, token: str | None, ca: Path | None, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        # Inside the try: a CA file not there yet, or not written whole, is a
        # server not ready yet (ssl.SSLError and FileNotFoundError are OSErrors).
        ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return int(resp.status), _json_or_empty(resp.read())
    except urllib.error.HTTPError as err:
        return int(err.code), _json_or_empty(err.read())
    except OSError:
        return 0, {}


def _json_or_empty(raw: bytes) -> dict[str, Any]:
    """The JSON object of an answer; {} for anything else (/healthz says "ok")."""
    try:
        loaded = json.loads(raw)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}
