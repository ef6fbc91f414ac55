"""The benchmarks' own HTTPS client of the API server.

- ``Endpoint``: where the API server is and how to log in (picklable, for
  the watcher process).
- ``Api``: a minimal HTTPS client (urllib3, a bearer token) with no model
  layer, for submitting jobs, the ceiling's creates and reading /metrics.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import urllib3


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is and how to log in (picklable, for the watcher)."""

    server: str
    token: str
    ca_file: str


class Api:
    def __init__(self, endpoint: Endpoint, maxsize: int = 64) -> None:
        self.endpoint = endpoint
        self.pool = urllib3.PoolManager(
            num_pools=2,
            maxsize=maxsize,
            block=True,
            cert_reqs="CERT_REQUIRED",
            ca_certs=endpoint.ca_file,
            retries=False,
        )
        self.headers = {
            "Authorization": f"Bearer {endpoint.token}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        }

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        timeout: float = 60,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        resp = self.pool.request(
            method,
            self.endpoint.server + path,
            body=body,
            headers=self.headers | {"Content-Type": content_type},
            timeout=timeout,
            preload_content=True,
        )
        return resp.status, resp.data

    def json(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = ()) -> Any:
        payload = None if body is None else json.dumps(body).encode()
        for _ in range(60):
            status, data = self.request(method, path, payload)
            if status != 429:  # e.g. a new CRD's storage is still initializing
                break
            time.sleep(1)
        if not (200 <= status <= 299 or status in ok):
            raise RuntimeError(f"{method} {path}: {status} {data[:500]!r}")
        return json.loads(data) if data else {}

    def stream(self, path: str) -> urllib3.BaseHTTPResponse:
        return self.pool.request(
            "GET",
            self.endpoint.server + path,
            headers=self.headers,
            timeout=urllib3.Timeout(connect=10, read=None),
            preload_content=False,
        )
