"""The operator's two listeners: /metrics over HTTPS, for callers the API
server vouches for (runtime.access decides), and /healthz and /readyz in
plain HTTP on a port of their own, for the kubelet.

Two ports, two servers, each with its own limit on connections: whatever
holds the metrics port (a scraper gone wrong, hundreds of idle connections)
cannot starve the liveness probe, which would have the kubelet restart a
healthy operator.

Every read and write of a connection, the TLS handshake included, waits at
most IO_TIMEOUT: an idle client is dropped and its slot freed. Past
MAX_CONNECTIONS at once a new connection is closed at once instead of being
given a thread, so a flood does not grow the operator's memory. Answers are
HTTP/1.0: one request per connection, nothing kept open between scrapes.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import REGISTRY

log = logging.getLogger(__name__)

IO_TIMEOUT: Final = 10.0  # seconds one read or write (or the handshake) may wait
MAX_CONNECTIONS: Final = 64  # connections served at once, per port
TEXT: Final = "text/plain; charset=utf-8"

# An authorization check's answer (runtime.access): the status, and a body
# that says no more than the status does.
Authorize = Callable[[str | None, str, str], int]
_REFUSALS: Final = {
    401: b"Unauthorized\n",
    403: b"Forbidden\n",
    500: b"Authorization failed\n",
}


def healthz(checks: dict[str, list[str]]) -> tuple[int, bytes]:
    """/healthz's answer: "ok", or every check's verdict in the API server's
    own format, the reasons withheld (they name tenants' jobs; they are logged)."""
    if not any(checks.values()):
        return 200, b"ok\n"
    lines = [
        f"[-]{name} failed: reason withheld" if found else f"[+]{name} ok"
        for name, found in checks.items()
    ]
    return 503, "\n".join([*lines, "healthz check failed", ""]).encode()


class CertFiles:
    """tls.crt and tls.key in one folder, read again when they change:
    cert-manager renews them and the kubelet swaps a Secret's volume in
    place, and neither restarts the operator."""

    def __init__(self, folder: Path) -> None:
        self._files = (folder / "tls.crt", folder / "tls.key")
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._context: ssl.SSLContext | None = None
        self.context()  # missing or broken files fail the start, not the first scrape

    def context(self) -> ssl.SSLContext:
        crt, key = self._files
        with self._lock:
            try:
                stamp = (crt.stat().st_mtime_ns, key.stat().st_mtime_ns)
                if stamp != self._stamp:
                    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    context.minimum_version = ssl.TLSVersion.TLSv1_2
                    context.load_cert_chain(crt, key)
                    self._context, self._stamp = context, stamp
            except (OSError, ssl.SSLError) as err:
                if self._context is None:
                    raise
                # Caught between the two files of a renewal: the old pair
                # serves until the new one is whole.
                log.warning("metrics certificate unreadable", extra={"error": str(err)})
            assert self._context is not None
            return self._context


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog (socketserver's 5 would leave a burst of connects
    # waiting on the client's SYN retries, seconds each; Go's servers take
    # the system's maximum).
    request_queue_size = socket.SOMAXCONN

    def __init__(
        self, address: str, handler: type[BaseHTTPRequestHandler], tls: CertFiles | None
    ) -> None:
        host, _, port = address.rpartition(":")
        self._tls = tls
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__((host or "0.0.0.0", int(port)), handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up before its answer (a probe timed out, a
        # scraper gone) is its own business: socketserver would print a
        # traceback to stderr for each. Anything else still says what broke.
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("client hung up", extra={"target": str(client_address)})
            return
        super().handle_error(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # In the connection's own thread, never in the one that accepts:
        # a client that connects and says nothing holds only its own slot.
        request.settimeout(IO_TIMEOUT)
        if self._tls is None:
            super().finish_request(request, client_address)
            return
        try:
            conn = self._tls.context().wrap_socket(request, server_side=True)
        except OSError as err:  # plain HTTP, a port scan, an idle client (ssl errors too)
            peer = str(client_address)
            log.debug("TLS handshake failed", extra={"target": peer, "error": str(err)})
            return
        with conn:
            super().finish_request(conn, client_address)


class _Handler(BaseHTTPRequestHandler):
    timeout = IO_TIMEOUT  # StreamRequestHandler puts it on the socket

    def reply(self, code: int, body: bytes, content_type: str = TEXT) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # probes every few seconds would drown the operator's own log


class _Listener:
    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class ProbeServer(_Listener):
    """/healthz (alive: every check passes) and /readyz (ready to serve), in
    plain HTTP; see runtime.health for what they mean."""

    def __init__(
        self,
        address: str,
        ready: Callable[[], bool],
        checks: Callable[[], dict[str, list[str]]],
    ) -> None:
        super().__init__(_Server(address, _probe_handler(ready, checks), None))


class MetricsServer(_Listener):
    """/metrics over HTTPS (the certificate in `cert_dir`), to the callers
    `authorize` lets through."""

    def __init__(self, address: str, authorize: Authorize, cert_dir: Path) -> None:
        super().__init__(_Server(address, _metrics_handler(authorize), CertFiles(cert_dir)))


def _probe_handler(
    ready: Callable[[], bool], checks: Callable[[], dict[str, list[str]]]
) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                found = checks()
                for name, problems in found.items():
                    if problems:
                        log.warning(
                            "health check failed",
                            extra={"target": name, "error": "; ".join(problems)},
                        )
                self.reply(*healthz(found))
            elif self.path == "/readyz":
                self.reply(*((200, b"ok\n") if ready() else (503, b"not ready\n")))
            else:
                self.reply(404, b"not found\n")

    return Handler


def _metrics_handler(authorize: Authorize) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            if path != "/metrics":
                self.reply(404, b"not found\n")
                return
            code = authorize(self.headers.get("Authorization"), path, "get")
            if code != 200:
                self.reply(code, _REFUSALS.get(code, b"refused\n"))
                return
            self.reply(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)

    return Handler
