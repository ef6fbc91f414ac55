"""How PaddleJob's pods start PaddlePaddle 3: the shell every role runs, the
elastic launcher's variables for a fault-tolerant job, and Fleet's
parameter-server variables for a job that is not.

The variable names are those Paddle 3.0's own launcher reads and sets
(paddle/distributed/launch: context/args_envs.py, controllers/ps.py), so a
program written for `python -m paddle.distributed.launch` runs unchanged.
docs/kinds.md (PaddleJob) says what each role runs and gets.
"""

from __future__ import annotations

from typing import Final

from dlk8s.job.children import service_host
from dlk8s.job.jobmodel import JobContext, Slot
from dlk8s.job.kinds.paddlejob.spec import (
    DEFAULT_PORT,
    MASTER,
    PSERVER,
    TRAINER,
    fault_tolerant,
    trainer_bounds,
)
from dlk8s.job.objects import as_int

ETCD_PORT: Final = 2379
# Where pserver 0 serves gloo's rendezvous in PS mode: Paddle's launcher's
# default (--gloo_port), or the next port if the job's pservers take it.
GLOO_PORT: Final = 6767
# The launcher writes its logs and each run's environment here: a volume of
# the operator's, so that a template's read-only root still lets it write.
LOG_VOLUME: Final = "dlk8s-paddle-log"
LOG_DIR: Final = "/var/log/dlk8s-paddle"
# Seconds a group of fewer than maxInstance trainers waits for more before
# it forms; Paddle's default (30) would slow every resize.
ELASTIC_TIMEOUT: Final = 10
# The launcher counts every re-formation against --max_restart, and the
# autoscaler may resize a long job any number of times. Failures are counted
# by the operator instead (elastic level 0 makes a failed program end its
# launcher): runPolicy.backoffLimit stays the job's one failure budget.
MAX_RESTART: Final = 1_000_000
# 0: a trainer whose program fails ends its launcher with the program's exit
# code, while the others hold and re-form without it (1 would retry the
# program in place, hiding a failure from the job's status).
ELASTIC_LEVEL: Final = 0

# How often a trainer's launcher may end for something else than its
# program's own end before the trainer fails: a peer that leaves kills the
# others' programs mid-collective (gloo aborts them: exit 134) before their
# launchers see it go, and a master that is recreated takes the etcd with it
# (the launchers fail: "etcd connection failed"); both are re-formations,
# not failures. A program the kernel kills again and again for its memory
# is a failure.
RELAUNCHES: Final = 5
RELAUNCH_WINDOW: Final = 600  # seconds

# The command's shell (`sh -c LAUNCHER paddle_k8s ARGS...`), by the image:
# - EDL's images have EDL's launcher: paddle_k8s with EDL's arguments;
# - an image with Paddle, in a fault-tolerant job (PADDLE_MASTER is set):
#   a trainer runs ENTRY under Paddle's elastic launcher, and the master and
#   pservers hold no program (Paddle 3's elastic training is collective; the
#   master's etcd is its rendezvous), waiting for the job to end;
# - otherwise ENTRY itself, in every role (PADDLE_TRAINING_ROLE says which);
#   in parameter-server mode once the pservers' names resolve: Paddle's PS
#   client and server crash (SIGSEGV) on a name the cluster's DNS does not
#   know yet, as a pod's is until its IP is published.
# A trainer waits for its etcd before each launch. ENTRY's end is written to
# PADDLE_LOG_DIR/dlk8s-entry-exit: exit 0 or 1-127 (its own failure) ends
# the trainer with that code. The launcher is started again when it gave
# up waiting for its peers (it exits 0 without running ENTRY), and, at most
# RELAUNCHES times in RELAUNCH_WINDOW, when ENTRY died by a signal or the
# launcher failed by itself.
# SIGTERM (the pod's deletion) ends the idle roles within a second: they
# sleep in the foreground, and start nothing a signal could miss. A trainer
# passes it on to Paddle's launcher once the launcher runs: a signal sent in
# the instant after a fork, while the child is still a copy of this shell
# (the same executable), is caught by that copy's trap and lost when it
# becomes the launcher. Once only: a second SIGTERM makes Paddle's launcher
# give its program 10 seconds and quit.
_LAUNCHER: Final = r"""if command -v paddle_k8s >/dev/null 2>&1; then exec paddle_k8s "$@"; fi
has_paddle='import importlib.util as u, sys; sys.exit(u.find_spec("paddle") is None)'
if [ -z "$PADDLE_MASTER" ] || ! python3 -c "$has_paddle" 2>/dev/null; then
  cd "${TRAINER_PACKAGE:-.}" || exit 1
  resolve='import socket, sys
for endpoint in sys.argv[1].split(","): socket.getaddrinfo(endpoint.rsplit(":", 1)[0], None)'
  if [ -n "$PADDLE_PSERVERS_IP_PORT_LIST" ] && command -v python3 >/dev/null 2>&1; then
    waited=""
    until python3 -c "$resolve" "$PADDLE_PSERVERS_IP_PORT_LIST" 2>/dev/null; do
      [ -n "$waited" ] || echo "paddle: waiting for the pservers' names to resolve:" \
        "$PADDLE_PSERVERS_IP_PORT_LIST"
      waited=1; sleep 1
    done
  fi
  exec sh -c "$ENTRY"
fi
stopping=""
trap 'stopping=1' TERM INT
if [ "$PADDLE_TRAINING_ROLE" != TRAINER ]; then
  echo "paddle: the $PADDLE_TRAINING_ROLE of an elastic Paddle job runs no program:" \
    "the trainers meet at $PADDLE_MASTER"
  while [ -z "$stopping" ]; do sleep 1; done
  exit 0
fi
cd "${TRAINER_PACKAGE:-.}" || exit 1
ended="$PADDLE_LOG_DIR/dlk8s-entry-exit"
reach='import socket, sys, urllib.parse as p; u = p.urlsplit(sys.argv[1])
socket.create_connection((u.hostname, u.port), timeout=2).close()'
window=$(date +%s); relaunches=0
while :; do
  until python3 -c "$reach" "$PADDLE_MASTER" 2>/dev/null; do
    [ -z "$stopping" ] || exit 143
    sleep 1
  done
  rm -f "$ended"
  PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python python3 -m paddle.distributed.launch \
    sh -c 'sh -c "$ENTRY"; code=$?; echo $code > "$PADDLE_LOG_DIR/dlk8s-entry-exit"; exit $code' &
  child=$!
  [ -n "$stopping" ] || { wait "$child"; code=$?; }
  if [ -n "$stopping" ]; then
    while [ "/proc/$child/exe" -ef "/proc/$$/exe" ]; do sleep 1; done
    kill -TERM "$child" 2>/dev/null
    while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
    exit "$code"
  fi
  entry=$(cat "$ended" 2>/dev/null || echo none)
  case "$entry" in
    none) [ "$code" -ne 0 ] || {
        echo "paddle: the launcher gave up waiting for minInstance trainers: starting it again"
        continue
      }
      why="the launcher failed (exit $code) before ENTRY ended" ;;
    0) exit 0 ;;
    *) [ "$entry" -ge 128 ] || exit "$entry"
      why="ENTRY died by a signal (exit $entry; a peer left?)" ;;
  esac
  now=$(date +%s)
  if [ $((now - window)) -gt RELAUNCH_WINDOW ]; then window=$now; relaunches=0; fi
  relaunches=$((relaunches + 1))
  if [ "$relaunches" -gt RELAUNCHES ]; then
    echo "paddle: $why, $relaunches times in RELAUNCH_WINDOW s: failing"
    exit "$code"
  fi
  echo "paddle: $why: joining the group again"
done"""
LAUNCHER: Final = _LAUNCHER.replace("RELAUNCH_WINDOW", str(RELAUNCH_WINDOW)).replace(
    "RELAUNCHES", str(RELAUNCHES)
)


def etcd_address(ctx: JobContext) -> str:
    """The job's etcd, beside its master (pods._master_template)."""
    master = next(s for s in ctx.slots if s.role == MASTER)
    return f"etcd://{service_host(ctx, master)}:{ETCD_PORT}"


def elastic_env(ctx: JobContext) -> list[tuple[str, str]]:
    """The elastic launcher's variables, the same for every pod of a
    fault-tolerant job (the launcher reads them in place of its flags)."""
    bounds = trainer_bounds(ctx.job.raw)
    assert bounds is not None  # validated
    low, high = bounds
    return [
        ("PADDLE_MASTER", etcd_address(ctx)),
        ("PADDLE_JOB_ID", ctx.job.name),
        ("PADDLE_NNODES", f"{low}:{high}" if low < high else str(low)),
        ("PADDLE_ELASTIC_LEVEL", str(ELASTIC_LEVEL)),
        ("PADDLE_ELASTIC_TIMEOUT", str(ELASTIC_TIMEOUT)),
        ("PADDLE_MAX_RESTART", str(MAX_RESTART)),
        ("PADDLE_LOG_DIR", LOG_DIR),
    ]


def _addresses(ctx: JobContext, role: str) -> str:
    return ",".join(f"{service_host(ctx, s)}:{s.replica.port}" for s in ctx.slots if s.role == role)


def ps_env(ctx: JobContext) -> list[tuple[str, str]]:
    """Fleet's parameter-server variables every pod of a job that is not
    fault tolerant shares, as Paddle's launcher in PS mode sets them."""
    port = as_int(ctx.job.raw["spec"].get("port"), DEFAULT_PORT)
    first_pserver = next(s for s in ctx.slots if s.role == PSERVER)
    gloo_port = GLOO_PORT if port != GLOO_PORT else GLOO_PORT + 1
    return [
        ("PADDLE_PSERVERS_IP_PORT_LIST", _addresses(ctx, PSERVER)),
        ("PADDLE_TRAINER_ENDPOINTS", _addresses(ctx, TRAINER)),
        ("PADDLE_TRAINERS_NUM", str(ctx.pod_count(TRAINER))),
        ("PADDLE_PORT", str(port)),
        # Gloo's barriers, as Paddle's launcher sets them: without them a
        # trainer that reaches Fleet's init_worker after another trainer has
        # finished waits forever at the pservers' barrier. Pserver 0 serves
        # their rendezvous (an HTTP store) while the trainers meet.
        ("PADDLE_WITH_GLOO", "1"),
        ("PADDLE_GLOO_RENDEZVOUS", "3"),
        ("PADDLE_GLOO_HTTP_ENDPOINT", f"{service_host(ctx, first_pserver)}:{gloo_port}"),
    ]


def slot_env(ctx: JobContext, slot: Slot) -> list[tuple[str, str]]:
    """The variables of one pod: its role for Fleet, and in PS mode its
    index, or for a pserver the name it has in PADDLE_PSERVERS_IP_PORT_LIST
    (Fleet finds a pserver's index by POD_IP:PADDLE_PORT in that list)."""
    if fault_tolerant(ctx.job.raw) or slot.role == MASTER:
        return []
    own = [("TRAINING_ROLE", slot.role), ("PADDLE_ROLE", slot.role)]
    if slot.role == TRAINER:
        return [*own, ("PADDLE_TRAINER_ID", str(slot.index))]
    return [*own, ("POD_IP", service_host(ctx, slot))]
