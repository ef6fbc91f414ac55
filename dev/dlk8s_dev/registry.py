"""A container registry on 127.0.0.1, and a real node that pulls from it.

``LocalRegistry``: Debian's ``docker-registry`` (the CNCF distribution
registry) on a free 127.0.0.1 port, with a configuration and storage folder
of its own, stopped by pid; with ``users`` it asks for a login (htpasswd),
as a private registry does. ``make publish REGISTRY=127.0.0.1:<port>``
pushes into it over plain HTTP.

``NodeRegistry``: the real node's containerd runs in the node's own network
namespace (realnode/), where 127.0.0.1 is the node's loopback, not the
host's, and nothing of the host is reachable but the API server's address.
So the same port is opened on 127.0.0.1 inside that namespace and relayed
to the registry here, and a ``hosts.toml`` in containerd's registry
``config_path`` says that host speaks plain HTTP. An image named
``127.0.0.1:<port>/...`` is then pulled by that very name, as on a machine
running its own registry, and the pod's ``imageID`` names it.

The relay is a listening socket made inside the node's namespace (a thread
that joins it with setns(2) only to create the socket) whose connections
are forwarded from this namespace: a socket keeps the namespace it was made
in. Its threads end when ``close()`` closes the sockets.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .pdeath import die_with_parent
from .ports import free_port

if TYPE_CHECKING:
    from .realnode import RealNode

CLONE_NEWNET = 0x40000000
# containerd's registry config_path below a node's folder (data/containerd.toml).
HOSTS_DIR = "registry-hosts"


class RegistryError(RuntimeError):
    pass


def _serving(url: str) -> bool:
    """A registry answers: 200, or 401 when it asks for a login."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError as err:
        return err.code == 401
    except OSError:
        return False
    return True


def _htpasswd(users: Mapping[str, str]) -> str:
    """An htpasswd file: the registry reads bcrypt hashes only, which the
    standard library's crypt (deprecated; there up to Python 3.12) makes
    with the system's libcrypt."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

    bcrypt = crypt.METHOD_BLOWFISH
    return "".join(f"{u}:{crypt.crypt(pw, crypt.mksalt(bcrypt))}\n" for u, pw in users.items())


@dataclass
class LocalRegistry:
    """docker-registry on 127.0.0.1; ``root`` holds its config, storage and log."""

    root: Path
    # user -> password: the registry then refuses anyone else (htpasswd), as
    # a private registry does; empty: anyone may pull and push.
    users: Mapping[str, str] = field(default_factory=dict)
    port: int = field(init=False, default=0)
    _popen: subprocess.Popen[bytes] | None = field(init=False, default=None)

    @property
    def address(self) -> str:
        """host:port, as `make publish REGISTRY=` and image names take it."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> LocalRegistry:
        if not shutil.which("docker-registry"):
            raise RegistryError("docker-registry is missing: run `make tools` as root")
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = self.root / "config.yml"
        # Its own storage, no debug server, no other listener; deletes allowed
        # so a test can clean up what it pushed.
        text = (
            "version: 0.1\n"
            "log: {level: warn, accesslog: {disabled: true}}\n"
            f"storage: {{filesystem: {{rootdirectory: {self.root / 'storage'}}}, "
            "delete: {enabled: true}}\n"
            f"http: {{addr: '{self.address}'}}\n"
        )
        if self.users:
            (self.root / "htpasswd").write_text(_htpasswd(self.users))
            text += f"auth: {{htpasswd: {{realm: dlk8s, path: {self.root / 'htpasswd'}}}}}\n"
        config.write_text(text)
        with (self.root / "registry.log").open("wb") as log:
            self._popen = subprocess.Popen(
                ["docker-registry", "serve", str(config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=die_with_parent(),
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not _serving(f"http://{self.address}/v2/"):
            if self._popen.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RegistryError(f"docker-registry did not start: {self.log_tail()}")
            time.sleep(0.1)
        return self

    def log_tail(self, chars: int = 3000) -> str:
        log = self.root / "registry.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else ""

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def stop(self) -> None:
        """TERM by pid, then KILL; the storage stays for whoever made ``root``."""
        if self._popen is None:
            return
        if self._popen.poll() is None:
            self._popen.terminate()
            try:
                self._popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
        self._popen = None

    def __enter__(self) -> LocalRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _listen_in(netns: Path, port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` inside the network namespace ``netns``.

    setns(2) moves only the calling thread, so a thread of its own does it
    and ends; every other thread of this process stays where it was.
    """
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def inside() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            fd = os.open(netns, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({netns})")
            finally:
                os.close(fd)
            made.append(socket.create_server(("127.0.0.1", port)))
        except BaseException as err:
            failed.append(err)

    thread = threading.Thread(target=inside, name="registry-listen")
    thread.start()
    thread.join()
    if failed:
        raise RegistryError(f"cannot listen in {netns}: {failed[0]}")
    return made[0]


@dataclass
class NodeRegistry:
    """The node reaches ``registry`` at its own 127.0.0.1, over plain HTTP."""

    node: RealNode
    registry: LocalRegistry
    _listener: socket.socket | None = field(init=False, default=None)
    _open: set[socket.socket] = field(init=False, default_factory=set)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(init=False, default_factory=list)

    def open(self) -> NodeRegistry:
        host = self.registry.address
        hosts = self.node.root / HOSTS_DIR / host / "hosts.toml"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        hosts.write_text(
            f'server = "http://{host}"\n\n[host."http://{host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
        )
        self._listener = _listen_in(self.node.netns, self.registry.port)
        self._start(self._accept, "registry-relay")
        return self

    def _start(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                inside, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                outside = socket.create_connection(("127.0.0.1", self.registry.port), timeout=10)
            except OSError:
                inside.close()
                continue
            outside.settimeout(None)
            with self._lock:
                self._open |= {inside, outside}
            self._start(self._pump, "registry-pump", inside, outside)
            self._start(self._pump, "registry-pump", outside, inside)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()

    def __enter__(self) -> NodeRegistry:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
