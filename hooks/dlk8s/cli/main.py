"""The `dlk8s-operator` command: `run` the operator, `smoke`-test an install, or
`convert` the older operators' manifests."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal, NoReturn

from dlk8s.autoscaler.loop import DEFAULT_PERIOD, AutoscalerLoop
from dlk8s.autoscaler.manifests import COUNTS
from dlk8s.autoscaler.plan import DEFAULT_MAX_LOAD, DEFAULT_RESERVE_AFTER
from dlk8s.cli import convert, smoke
from dlk8s.job.config import Admission, load_config
from dlk8s.runtime import leader, logs, metrics, serving
from dlk8s.runtime.access import MetricsAccess
from dlk8s.runtime.client import Kube, load_api_client
from dlk8s.runtime.clock import seconds_left
from dlk8s.runtime.controller import API_PARALLELISM, WORKERS, Controller
from dlk8s.runtime.health import Health
from dlk8s.runtime.orphans import being_uninstalled
from dlk8s.runtime.passes import STUCK_PASS_SECONDS

log = logging.getLogger("dlk8s")
# How long the autoscaler and the controller together get to stop on SIGTERM
# before the lease is released anyway (release itself takes a few seconds
# more at worst): within the 30 s the kubelet waits before its SIGKILL.
WORK_STOP_SECONDS: Final = 10.0
# How often the main thread wakes to run a signal handler (until_stopped).
SIGNAL_POLL_SECONDS: Final = 0.5


def _env(name: str, default: str = "") -> str:
    return os.environ.get(f"DLK8S_{name}", default)


def _service_types(value: str) -> tuple[str, ...]:
    known = ("ClusterIP", "NodePort", "LoadBalancer")
    types = tuple(t.strip() for t in value.split(",") if t.strip())
    unknown = [t for t in types if t not in known]
    if unknown or not types:
        raise argparse.ArgumentTypeError(f"{value!r}: a comma-separated list of {', '.join(known)}")
    return types


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _common_flags() -> argparse.ArgumentParser:
    """Flags that work before and after the command alike (`--log-level debug
    run` and `run --log-level debug`): no default here, so a command's parser
    never overwrites what was given before it; the defaults are set once."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="kubeconfig path (default $KUBECONFIG); the in-cluster ServiceAccount when unset",
    )
    common.add_argument(
        "--log-level",
        default=argparse.SUPPRESS,
        type=str.lower,
        choices=["debug", "info", "warning", "error"],
        help="log level (DLK8S_LOG_LEVEL, default info)",
    )
    return common


@dataclass(frozen=True)
class RunFlag:
    """One flag of `run`, whose default an environment variable sets (README.md lists them)."""

    # The flag as given on the command line.
    flag: str
    # Its environment variable, without the DLK8S_ prefix.
    env: str
    # The default when that variable is unset, spelled as in the environment.
    default: str
    # What `--help` says of it.
    help: str
    # Reads the variable's value and the flag's argument alike.
    parse: Callable[[str], object] = str
    # "value": takes one argument; "switch": --x and --no-x; "optional": --x
    # alone means true, or --x=true/false.
    style: Literal["value", "switch", "optional"] = "value"

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        default = self.parse(_env(self.env, self.default))
        if self.style == "switch":
            parser.add_argument(
                self.flag, action=argparse.BooleanOptionalAction, default=default, help=self.help
            )
        elif self.style == "optional":
            parser.add_argument(
                self.flag, type=self.parse, nargs="?", const=True, default=default, help=self.help
            )
        else:
            parser.add_argument(self.flag, type=self.parse, default=default, help=self.help)


RUN_FLAGS: Final = (
    RunFlag("--namespace", "NAMESPACE", "", "watch one namespace; all namespaces when empty"),
    RunFlag(
        "--config-file",
        "CONFIG_FILE",
        "/etc/dlk8s/config/controller_config_file.yaml",
        "the controller config (GPU drivers, images) the chart renders",
    ),
    RunFlag(
        "--workers",
        "WORKERS",
        str(WORKERS),
        "jobs reconciled at once (one job is never on two workers)",
        int,
    ),
    RunFlag(
        "--api-parallelism",
        "API_PARALLELISM",
        str(API_PARALLELISM),
        "API calls in flight at once (creates of one job go out in parallel)",
        int,
    ),
    RunFlag(
        "--leader-elect",
        "LEADER_ELECT",
        "false",
        "act only while holding the leader Lease (alone, or =true/false)",
        _truthy,
        "optional",
    ),
    RunFlag(
        "--deployment",
        "DEPLOYMENT",
        "",
        "NAMESPACE/NAME of the operator's own Deployment: gone as the operator"
        " stops, it is being uninstalled and lets go of every pod (the chart sets it)",
    ),
    RunFlag(
        "--leader-election-namespace",
        "LEADER_ELECTION_NAMESPACE",
        "default",
        "namespace of the leader Lease",
    ),
    RunFlag(
        "--leader-election-id",
        "LEADER_ELECTION_ID",
        "dlk8s-operator-leader",
        "name of the leader Lease",
    ),
    RunFlag(
        "--lease-duration",
        "LEASE_DURATION",
        "15",
        "seconds a standby waits for a leader that stopped renewing (killed, not stopped)",
        int,
    ),
    RunFlag(
        "--kueue",
        "KUEUE",
        "false",
        "jobs that name a Kueue LocalQueue wait for Kueue to admit their Workload"
        " (alone, or =true/false; docs/kueue.md)",
        _truthy,
        "optional",
    ),
    RunFlag(
        "--network-policies",
        "NETWORK_POLICIES",
        "false",
        "give each job a NetworkPolicy: its pods take connections from its own pods only"
        " (alone, or =true/false; docs/security.md)",
        _truthy,
        "optional",
    ),
    RunFlag(
        "--tensorboard-service-types",
        "TENSORBOARD_SERVICE_TYPES",
        "ClusterIP",
        "the TensorBoard Service types a TFJob may ask for, comma-separated"
        " (NodePort and LoadBalancer reach outside the cluster)",
        _service_types,
    ),
    RunFlag(
        "--autoscaler",
        "AUTOSCALER",
        "true",
        "move elastic PaddleJobs' trainer and PyTorchJobs' worker counts with the cluster's"
        " free resources"
        " (needs to read nodes and every pod)",
        _truthy,
        "switch",
    ),
    RunFlag(
        "--autoscaler-max-load",
        "AUTOSCALER_MAX_LOAD",
        f"{DEFAULT_MAX_LOAD:g}",
        "grow trainers only while requested CPU and memory stay under this share",
        float,
    ),
    RunFlag(
        "--autoscaler-period",
        "AUTOSCALER_PERIOD",
        f"{DEFAULT_PERIOD:g}",
        "seconds between autoscaler passes when nothing changes",
        float,
    ),
    RunFlag(
        "--autoscaler-reserve-after",
        "AUTOSCALER_RESERVE_AFTER",
        f"{DEFAULT_RESERVE_AFTER:g}",
        "seconds an elastic job that cannot be placed waits before a node is kept"
        " for it (one more each further period, up to one per trainer it waits for)",
        float,
    ),
    RunFlag(
        "--stuck-pass-seconds",
        "STUCK_PASS_SECONDS",
        f"{STUCK_PASS_SECONDS:g}",
        "/healthz fails once one pass of a job has run this long (a wedged worker)",
        float,
    ),
    RunFlag(
        "--metrics-addr",
        "METRICS_ADDR",
        "127.0.0.1:8443",
        "host:port for /metrics over HTTPS, for callers the API server authenticates and"
        " allows `get` on /metrics (docs/security.md); empty disables",
    ),
    RunFlag(
        "--metrics-cert-dir",
        "METRICS_CERT_DIR",
        "/etc/dlk8s/metrics-certs",
        "folder of the metrics certificate, tls.crt and tls.key (read again when they change)",
    ),
    RunFlag(
        "--probe-addr",
        "PROBE_ADDR",
        "127.0.0.1:8081",
        "host:port for /healthz and /readyz in plain HTTP; empty disables",
    ),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parser() -> argparse.ArgumentParser:
    # A parent per parser: parents share their action objects, and the
    # defaults set below must stay on the top-level parser's own.
    parser = argparse.ArgumentParser(
        prog="dlk8s-operator", description=__doc__, parents=[_common_flags()]
    )
    parser.set_defaults(
        kubeconfig=os.environ.get("KUBECONFIG") or None, log_level=_env("LOG_LEVEL", "info")
    )
    parser.add_argument("--version", action="version", version=importlib.metadata.version("dlk8s"))
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the operator", parents=[_common_flags()])
    for flag in RUN_FLAGS:
        flag.add_to(run)

    check = sub.add_parser(
        "smoke", help="submit a tiny TFJob and wait for it to succeed", parents=[_common_flags()]
    )
    smoke.add_arguments(check)

    migrate = sub.add_parser(
        "convert",
        help="print dlk8s manifests for the older operators' job manifests",
        parents=[_common_flags()],
    )
    convert.add_arguments(migrate)
    return parser


def _controller_and_autoscaler(
    kube: Kube, args: argparse.Namespace
) -> tuple[Controller, AutoscalerLoop | None]:
    """The controller, and the autoscaler unless it is turned off."""
    admission = Admission() if args.autoscaler else None
    controller = Controller.watching(
        kube,
        replace(
            load_config(args.config_file),
            admission=admission,
            network_policies=args.network_policies,
            tensorboard_service_types=args.tensorboard_service_types,
        ),
        namespace=args.namespace or None,
        kueue=args.kueue,
        workers=args.workers,
        api_parallelism=args.api_parallelism,
        stuck_after=args.stuck_pass_seconds,
    )
    autoscaler = (
        AutoscalerLoop(
            kube,
            lambda: [job for kind in COUNTS for job in controller.jobs(kind)],
            period=args.autoscaler_period,
            max_load=args.autoscaler_max_load,
            reserve_after=args.autoscaler_reserve_after,
            admission=admission,
        )
        if args.autoscaler
        else None
    )
    return controller, autoscaler


def run(args: argparse.Namespace) -> NoReturn:
    api_client = load_api_client(args.kubeconfig, pool_size=args.api_parallelism + 8)
    kube = Kube(api_client)  # the election's own, and the metrics' access checks
    stop = stop_on_signals()
    election = None
    if args.leader_elect:
        lease = leader.Lease(
            args.leader_election_id, args.leader_election_namespace, args.lease_duration
        )
        election = leader.Election(kube, lease, lambda: start(), stop)
        # An audit log then tells the replicas' requests apart.
        api_client.user_agent = f"dlk8s-operator {election.identity}"
    # The work writes through the election's fence (runtime.leader).
    work = Kube(api_client, may_write=election.may_write if election is not None else None)
    controller, autoscaler = _controller_and_autoscaler(work, args)

    def start() -> None:
        controller.start()
        if autoscaler is not None:
            autoscaler.start()

    health = Health(stop, controller, election)
    servers = _servers(args, kube, health)
    for server in servers:
        server.start()
    metrics.register_jobs_collector(controller.count_jobs)

    deployment = args.deployment
    if deployment and being_uninstalled(kube, deployment):
        # Else every stop would look like an uninstall.
        log.warning(
            "the Deployment named by --deployment is not there: the operator will"
            " not tell an uninstall from a restart, and keeps the pods' finalizers",
            extra={"target": deployment},
        )
        deployment = ""
    if election is not None:
        election.start()
    else:
        start()

    until_stopped(stop)
    began = time.monotonic()
    _stop_work(controller, autoscaler)
    if deployment and being_uninstalled(kube, deployment):
        _let_go(controller, work)  # while it leads: the work writes only then
    if election is not None:
        election.release()  # the work stopped first: never two writers
    for server in servers:
        server.stop()
    log.info("stopped", extra={"duration": round(time.monotonic() - began, 1)})
    _leave(1 if election is not None and election.lost else 0)


def _leave(code: int) -> NoReturn:
    """Exit now, without the interpreter's join of the API pool's threads.

    The work has stopped and the lease is handed back, but a call the
    stopped controller no longer waits for may still be in flight, and
    concurrent.futures would wait for each at exit, up to the client's
    timeout: past the kubelet's SIGKILL, after another instance leads.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _servers(
    args: argparse.Namespace, kube: Kube, health: Health
) -> list[serving.ProbeServer | serving.MetricsServer]:
    """The probes' listener and the metrics' (either may be turned off)."""
    servers: list[serving.ProbeServer | serving.MetricsServer] = []
    if args.probe_addr:
        servers.append(serving.ProbeServer(args.probe_addr, health.ready, health.checks))
    if args.metrics_addr:
        access = MetricsAccess(kube)
        cert_dir = Path(args.metrics_cert_dir)
        servers.append(serving.MetricsServer(args.metrics_addr, access.check, cert_dir))
    return servers


def _stop_work(controller: Controller, autoscaler: AutoscalerLoop | None) -> None:
    # One deadline for all of it, so that the lease is handed back well
    # before the kubelet's SIGKILL (30 s) leaves it to expire.
    deadline = time.monotonic() + WORK_STOP_SECONDS
    if autoscaler is not None:
        autoscaler.stop(seconds_left(deadline))
    controller.stop(seconds_left(deadline))


def _let_go(controller: Controller, work: Kube) -> None:
    """The operator is being uninstalled: no one is left to count the pods'
    ends, and its finalizer would hold every later delete of one."""
    released, failed = controller.orphans.release_everything(work)
    log.info(
        "uninstalled: the pods' tracking finalizer removed",
        extra={"action": f"{released} pods", **({"error": f"{failed} failed"} if failed else {})},
    )


def until_stopped(stop: threading.Event) -> None:
    """Wait for `stop` in the main thread, waking now and then.

    The kernel hands a process's SIGTERM to any of its threads, and CPython
    runs the handler in the main thread only once that thread runs again:
    blocked in an untimed wait, it never does, and the signal waits with it
    (seen: an operator that ignored SIGTERM until the kubelet's SIGKILL).
    """
    while not stop.wait(SIGNAL_POLL_SECONDS):
        pass


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("stopping", extra={"action": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.log_level)
    if args.command == "run":
        run(args)
    if args.command == "convert":
        return convert.run(args)
    return smoke.run(args)


if __name__ == "__main__":
    sys.exit(main())
