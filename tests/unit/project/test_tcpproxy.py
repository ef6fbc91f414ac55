"""dlk8s_dev.tcpproxy: a partition holds what is sent, closes nothing, and
delivers it all once it heals. Real sockets on 127.0.0.1, an echo server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from dlk8s_dev.tcpproxy import TcpProxy

QUIET = 0.5  # seconds a partitioned read waits to see that nothing comes


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()
    done.set()
    server.shutdown(socket.SHUT_RDWR)  # wakes its accept(), which close() alone does not
    server.close()
    thread.join(5)


def connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=QUIET)


def test_bytes_go_through_both_ways(echo: tuple[str, int]) -> None:
    with TcpProxy(echo) as proxy, connect(proxy) as conn:
        conn.sendall(b"hello")
        assert conn.recv(1024) == b"hello"


def test_a_partition_holds_the_bytes_and_delivers_them_when_it_heals(
    echo: tuple[str, int],
) -> None:
    with TcpProxy(echo) as proxy, connect(proxy) as conn:
        conn.sendall(b"a")
        assert conn.recv(1024) == b"a"
        with proxy.partitioned():
            conn.sendall(b"b")
            with pytest.raises(TimeoutError):
                conn.recv(1024)  # open, and silent
        conn.settimeout(5)
        assert conn.recv(1024) == b"b"


def test_a_connection_made_during_a_partition_is_carried_once_it_heals(
    echo: tuple[str, int],
) -> None:
    with TcpProxy(echo) as proxy:
        with proxy.partitioned():
            late = connect(proxy)
            late.sendall(b"c")
            with pytest.raises(TimeoutError):
                late.recv(1024)
        late.settimeout(5)
        with late:
            assert late.recv(1024) == b"c"


def test_closing_the_proxy_closes_its_connections(echo: tuple[str, int]) -> None:
    proxy = TcpProxy(echo).__enter__()
    conn = connect(proxy)
    conn.sendall(b"d")
    assert conn.recv(1024) == b"d"
    proxy.close()
    conn.settimeout(5)
    with conn:
        assert conn.recv(1024) == b""  # the proxy's end is gone
