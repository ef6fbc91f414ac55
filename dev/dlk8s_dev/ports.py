"""Ports for the servers a run starts, chosen so that nothing takes them first.

A port the kernel picks for `bind(0)` comes from its range for outgoing
connections (net.ipv4.ip_local_port_range): between choosing it and the
server binding it, any connection on the machine may be given it as its own
end, and the server fails with "address already in use" (CI saw kwok's
server do so while the suite ran its three processes). So a port is chosen
outside that range, and claimed for a while in a file the runs of this
machine share (each test process, each `make cluster`), which keeps them
from choosing it too before its server has bound it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

# One small file for the machine: the ports chosen lately, with when; kept
# under a lock while a port is chosen, and pruned as it is rewritten.
CLAIMS: Final = Path(tempfile.gettempdir()) / ".dlk8s-ports.json"
# Long enough for any server to bind its port after it was chosen (a start
# waits at most runs.START_WAIT for a part): a claim older than this is free.
CLAIM_SECONDS: Final = 600.0
LOWEST: Final = 10000  # below this are the usual ports of services
TRIES: Final = 500


def outgoing_range() -> range:
    """The kernel's ports for outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)  # the kernel's default


def free_port() -> int:
    """A port of 127.0.0.1 that no server holds, outside the outgoing range,
    and claimed for CLAIM_SECONDS against the other runs of this machine."""
    outgoing = outgoing_range()
    with _claims() as claimed:
        for _ in range(TRIES):
            port = random.randrange(LOWEST, 65536)
            if port in outgoing or str(port) in claimed:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # a server holds it
            claimed[str(port)] = time.time()
            return port
    raise OSError(f"no free port after {TRIES} tries outside {outgoing}")


@contextlib.contextmanager
def _claims() -> Iterator[dict[str, float]]:
    """The claims still in force, to add to; written back when the block ends."""
    fd = os.open(CLAIMS, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "r+") as file:
            try:
                found = json.loads(file.read() or "{}")
            except ValueError:
                found = {}  # a file cut short: its claims are lost, not the run
            found = found if isinstance(found, dict) else {}
            now = time.time()
            claimed = {
                k: v for k, v in found.items()
                if isinstance(v, (int, float)) and now - v < CLAIM_SECONDS
            }  # fmt: skip
            yield claimed
            file.seek(0)
            file.truncate()
            file.write(json.dumps(claimed))
    finally:
        os.close(fd)  # and with it the lock
