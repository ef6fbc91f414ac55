"""A TCP proxy on 127.0.0.1 that can stop forwarding without closing
anything: a network partition as a client sees it, its connections open
and silent until the partition heals (make chaos's operator partition).

Bytes are relayed as they come while the proxy flows. `partitioned()`
stops it for a block: what either side sends meanwhile is held (the relay
reads no more, so the senders' buffers fill as on a dead link), new
connections are accepted but not carried on; when the block ends,
everything held goes on, as TCP's retransmissions would deliver it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from types import TracebackType

CHUNK = 65536


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()  # cleared for a partition
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []  # every one, closed at the end
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True, name="tcpproxy")]

    def __enter__(self) -> TcpProxy:
        self._threads[0].start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextlib.contextmanager
    def partitioned(self) -> Iterator[None]:
        self._flowing.clear()
        try:
            yield
        finally:
            self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()  # the relays waiting on it see the end
        with self._lock:
            sockets, self._sockets = [self._listener, *self._sockets], []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5)

    def _keep(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed.is_set():
                sock.close()
                return False
            self._sockets.append(sock)
            return True

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self._keep(client):
                self._spawn(self._connect, client)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="tcpproxy")  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()  # a connection made during a partition waits for its end
        try:
            server = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        server.settimeout(None)
        if self._keep(server):
            self._spawn(self._relay, client, server)
            self._relay(server, client)

    def _relay(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                self._flowing.wait()
                data = src.recv(CHUNK)
                if not data:
                    break
                self._flowing.wait()  # read before the partition, held through it
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
