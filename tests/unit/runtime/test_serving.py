"""The operator's listeners (runtime.serving), served for real on 127.0.0.1:
/metrics only over TLS and only with the authorizer's 200, idle connections
dropped, and a metrics port held by idle clients leaves the probes alone."""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlk8s.runtime import serving
from dlk8s.runtime.serving import MetricsServer, ProbeServer, healthz


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("certs")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "tls.key", "-out", "tls.crt", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=folder, check=True, capture_output=True,
    )  # fmt: skip
    return folder


def authorize(header: str | None, path: str, verb: str) -> int:
    assert (path, verb) == ("/metrics", "get")
    return {"Bearer good": 200, "Bearer other": 403}.get(header or "", 401)


@pytest.fixture
def servers(cert_dir: Path) -> Iterator[tuple[MetricsServer, ProbeServer]]:
    metrics = MetricsServer("127.0.0.1:0", authorize, cert_dir)
    probes = ProbeServer("127.0.0.1:0", lambda: True, lambda: {"informers": []})
    metrics.start()
    probes.start()
    yield metrics, probes
    metrics.stop()
    probes.stop()


def get(url: str, token: str = "", cafile: Path | None = None) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    request = urllib.request.Request(url, headers={"Authorization": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def test_metrics_answer_over_tls_to_whom_the_authorizer_allows(
    servers: tuple[MetricsServer, ProbeServer], cert_dir: Path
) -> None:
    metrics, _ = servers
    url = f"https://127.0.0.1:{metrics.port}/metrics"
    ca = cert_dir / "tls.crt"
    assert get(url, cafile=ca) == (401, "Unauthorized\n")
    assert get(url, "Bearer other", ca) == (403, "Forbidden\n")
    code, body = get(url, "Bearer good", ca)
    assert code == 200
    assert "dlk8s_api_requests_total" in body
    # No plain HTTP on the metrics port: the handshake fails, the server hangs up.
    with pytest.raises((http.client.HTTPException, ConnectionResetError)):
        get(f"http://127.0.0.1:{metrics.port}/metrics", "Bearer good")


def test_healthz_names_what_failed_and_nothing_more() -> None:
    assert healthz({"informers": [], "workers": []}) == (200, b"ok\n")
    code, body = healthz({"informers": ["the informer of pods in team-a has stopped"]})
    assert code == 503
    assert body == b"[-]informers failed: reason withheld\nhealthz check failed\n"


def test_an_idle_connection_is_dropped(
    servers: tuple[MetricsServer, ProbeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serving, "IO_TIMEOUT", 0.5)
    metrics, _ = servers
    with socket.create_connection(("127.0.0.1", metrics.port)) as idle:
        # Ours is ten times the server's: were the server to keep it, recv
        # would raise TimeoutError instead of reading the end of the stream.
        idle.settimeout(10 * serving.IO_TIMEOUT)
        assert idle.recv(1) == b""  # closed by the server, not by our timeout


def test_idle_connections_on_the_metrics_port_leave_the_probes_alone(
    servers: tuple[MetricsServer, ProbeServer],
) -> None:
    metrics, probes = servers
    idle = [socket.create_connection(("127.0.0.1", metrics.port)) for _ in range(200)]
    try:
        answers = []
        threads = [
            threading.Thread(
                target=lambda: answers.append(get(f"http://127.0.0.1:{probes.port}/healthz"))
            )
            for _ in range(5)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
        assert answers == [(200, "ok\n")] * 5
    finally:
        for conn in idle:
            conn.close()


def test_stop_does_not_wait_for_a_client_that_says_nothing(cert_dir: Path) -> None:
    # The default IO_TIMEOUT (10 s) holds the connection's thread far longer
    # than this test: were stop() to join it (socketserver joins the threads
    # that are not daemons), the server would have dropped the connection by
    # the time stop() returned.
    probes = ProbeServer("127.0.0.1:0", lambda: True, lambda: {})
    probes.start()
    with socket.create_connection(("127.0.0.1", probes.port)) as half:
        half.sendall(b"GET /healthz HTTP/1.1\r\n")  # and never the blank line
        # Connections are accepted in the order they came: once a later one
        # is answered, `half` is in a thread of its own (closing the
        # listener before would reset it with the backlog).
        assert get(f"http://127.0.0.1:{probes.port}/healthz")[0] == 200
        probes.stop()
        half.setblocking(False)
        with pytest.raises(BlockingIOError):
            half.recv(1)  # nothing to read, and no end of stream: still open


def test_a_client_that_hangs_up_before_its_answer_prints_no_traceback(
    servers: tuple[MetricsServer, ProbeServer],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A probe that timed out, a scraper gone: socketserver would print a
    traceback for each to stderr; the operator notes it at debug level."""
    _, probes = servers
    caplog.set_level(logging.DEBUG, logger=serving.log.name)
    with socket.create_connection(("127.0.0.1", probes.port)) as client:
        # Closed with a reset, before it asked anything: the server's read
        # fails with ECONNRESET whenever it comes (had the client asked, a
        # server quick enough would have answered before the reset came).
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 10
    while not any(r.getMessage() == "client hung up" for r in caplog.records):
        assert time.monotonic() < deadline, "the server never noticed the client left"
        time.sleep(0.05)
    assert "Traceback" not in capfd.readouterr().err
    assert get(f"http://127.0.0.1:{probes.port}/healthz")[0] == 200
