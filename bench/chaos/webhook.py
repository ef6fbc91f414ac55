"""An admission webhook of the chaos suite's own that allows every pod
create in one namespace, slowly: a policy engine under load. HTTPS on
127.0.0.1 with a CA of its own, registered with the API server by URL for
as long as the block lasts."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from bench.common.devtools import LocalCluster, issue, make_ca

NAME = "chaos-slow-webhook"


class SlowWebhook:
    def __init__(self, cluster: LocalCluster, namespace: str, delay: float) -> None:
        self.cluster, self.namespace, self.delay = cluster, namespace, delay
        self.calls = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SlowWebhook:
        pki = self.cluster.workdir / NAME
        pki.mkdir()
        make_ca(pki, f"{NAME}-ca")
        issue(pki, "tls", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\n")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki / "tls.crt", pki / "tls.key")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(self._config(ca)))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cluster.kubectl("delete", "validatingwebhookconfiguration", NAME, check=False)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def _config(self, ca: str) -> dict[str, Any]:
        assert self._server is not None
        port = self._server.server_address[1]
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": [
                {
                    "name": f"{NAME}.chaos.dlk8s.io",
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/", "caBundle": ca},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 30,
                }
            ],
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with hook._lock:
                    hook.calls += 1
                time.sleep(hook.delay)
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], "allowed": True},
                }
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a line per pod would drown the suite's log

        return Handler
