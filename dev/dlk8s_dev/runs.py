"""Where a run of the local cluster keeps its directories, and who owns them.

A run (one process that starts a cluster: `make cluster`, `make demo`, a
test session, a benchmark) makes directories named after its pid: the
control plane's ``dlk8s-cluster-<pid>-*`` (in /dev/shm: etcd is faster in
memory) and the real node's ``dlk8s-node-<pid>-<k>`` (in /var/tmp: images
take gigabytes). Each holds a marker, ``.dlk8s-owner``, with the pid, that
process's start time and the boot it ran in: a pid alone would keep a dead
run's directories forever once another process reuses the number, and
would outlive a reboot. A run whose marker names a live process is never
touched; anything else is a dead run's, and the next start removes it.

``DLK8S_DEV_SCRATCH`` puts both kinds of directory under one folder of
your choice instead (e.g. where /var/tmp is small).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

# Every control-plane directory starts with this plus the pid of the process
# that made it, so a leak check finds what this process started and nothing
# that a concurrent run on the same machine owns.
WORKDIR_PREFIX = "dlk8s-cluster-"
MARKER = ".dlk8s-owner"
SCRATCH_ENV = "DLK8S_DEV_SCRATCH"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")

# How long a start waits for each part to answer. A part that crashes fails
# the wait at once (its exit is checked on every look), so this bounds only a
# slow start: on a 2-core machine running three test processes, clusters, a
# real node and training containers at once (load 12 and more), parts took
# several times their quiet start, and a start that fails for being slow
# fails a test that would have passed.
START_WAIT = 300.0


def control_plane_base() -> Path:
    """Where the control plane's directory goes: memory if there is some to spare."""
    scratch = os.environ.get(SCRATCH_ENV)
    if scratch:
        return Path(scratch)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else Path(tempfile.gettempdir())


def node_base() -> Path:
    """Where a real node's directory goes: on disk, next to the image store."""
    scratch = os.environ.get(SCRATCH_ENV)
    return Path(scratch) if scratch else Path("/var/tmp")


@dataclass(frozen=True)
class Owner:
    """One process, told apart from any later process with the same pid."""

    pid: int
    # Clock ticks from boot to its start (/proc/<pid>/stat field 22): a
    # process that reuses the pid started later.
    start: int
    # The boot it ran in: after a reboot, every run of before is dead.
    boot: str


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def process(pid: int) -> Owner | None:
    """The process ``pid`` is now, or None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its end.
    fields = stat[stat.rindex(")") + 2 :].split()
    return Owner(pid, int(fields[19]), _boot_id())


def me() -> Owner:
    own = process(os.getpid())
    assert own is not None
    return own


def mark(directory: Path, owner: Owner | None = None) -> None:
    """Say in ``directory`` which process owns it (written whole or not at all)."""
    tmp = directory / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(asdict(owner or me())))
    tmp.rename(directory / MARKER)


def owner_of(directory: Path) -> Owner | None:
    try:
        data = json.loads((directory / MARKER).read_text())
        return Owner(int(data["pid"]), int(data["start"]), str(data["boot"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def alive(owner: Owner) -> bool:
    return process(owner.pid) == owner


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owned_by_live_run(directory: Path, pid_in_name: int) -> bool:
    """Whether the run that made ``directory`` still lives.

    Without a marker (a run between its mkdir and its marker, or one from
    before markers) the pid in the name decides, which errs on keeping.
    """
    owner = owner_of(directory)
    if owner is None:
        return pid_alive(pid_in_name)
    return alive(owner)


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Processes (but this one) whose command line holds ``text``, e.g. a run's directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append((int(entry.name), cmdline.strip()))
    return found


def size_of(path: Path) -> int:
    """Bytes of disk (or memory) under ``path``, each hard-linked file once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
