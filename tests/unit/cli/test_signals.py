"""SIGTERM stops `dlk8s-operator run` whichever of its threads the kernel
hands it to (cli.main.until_stopped), in a process of its own."""

from __future__ import annotations

import subprocess
import sys

# The signal goes to a thread that is not the main one, as the kernel may
# send a process's SIGTERM to any thread that does not block it.
ELSEWHERE = """
import signal, threading, time
from dlk8s.cli.main import stop_on_signals, until_stopped

stop = stop_on_signals()

def elsewhere():
    time.sleep(0.2)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    time.sleep(600)

threading.Thread(target=elsewhere, daemon=True).start()
until_stopped(stop)
print("stopped")
"""


def test_a_sigterm_caught_by_another_thread_still_stops_the_main_one() -> None:
    # The timeout only ends a hang: an untimed wait would sit here until it.
    done = subprocess.run(
        [sys.executable, "-c", ELSEWHERE], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "stopped\n"), done.stderr
