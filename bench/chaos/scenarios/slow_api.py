"""Scenario 14, slow-api: every pod create waits 25 s in an admission
webhook (a policy engine under load), while API Priority and Fairness
gives the operator's ServiceAccount a priority level of its own with few
seats (13 here) that rejects what does not fit (429 with Retry-After), and
another client of the same ServiceAccount keeps 8 slow creates in flight
(dry runs, through the same webhook): the operator's requests often meet a
full priority level (issue 49).

The operator's requests time out after 30 s in all, the longest a webhook
may take. Must be zero: the usual
(duplicate pods: more than one per replica; no pod is disrupted here);
the notes say how many requests were refused or timed out.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from kubernetes import client

from bench.chaos.jobs import mixed
from bench.chaos.ledger import duplicates
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.chaos.webhook import SlowWebhook
from bench.common.operator import ApiError, Kube, TransportError

DELAY = 25.0  # seconds the webhook takes on each pod create
NAME = "chaos-throttle"
# The other client's creates in flight: most of the level's 13 seats, so
# that the operator's requests often find it full; with 20 (all of it, all
# the time) a starting operator's lists were refused until it gave up, and
# with 10 its 60 creates, 3 at a time for 25 s each, took 10 minutes.
LOAD = 8


def slow_api(suite: Suite) -> Row:
    row = Row(f"pod creates held {DELAY:.0f}s by a webhook; the operator throttled by APF (429)")
    jobs = 6 if suite.args.short else 12
    ns = suite.namespace("chaos-slow")
    names = [f"w{i}" for i in range(jobs)]
    ops = Operators(suite.install).start()
    op = ops.procs[0]
    op.wait_ready()  # before the throttle: a level full from the start starves a start
    with SlowWebhook(suite.cluster, ns, DELAY) as hook, throttled(suite, ns) as load:
        suite.submit(ns, [mixed(n, i, workers=1, run="20s") for i, n in enumerate(names)])
        suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=600)
        refused = errors(op.metrics())
        calls = hook.calls
    row.duplicates = duplicates(suite.ledger, ns)
    row.restarts = ops.restarts
    row.notes.append(
        f"{calls - (load.sent - load.refused)} webhook calls for {len(suite.ledger.of(ns))} pods;"
        f" the operator's requests refused or failed, by code: {refused or 'none'};"
        f" the other client's: {load.sent} sent, {load.refused} refused"
    )
    ops.stop()
    return row


class throttled:  # noqa: N801 (a context manager read as a phrase)
    """The operators' ServiceAccount's requests in a priority level of one
    nominal share that lends and borrows nothing and rejects what waits,
    filled by LOAD slow dry-run pod creates in `namespace` with the same
    ServiceAccount's token."""

    def __init__(self, suite: Suite, namespace: str) -> None:
        self.suite, self.namespace = suite, namespace
        self.sent = self.refused = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> throttled:
        install = self.suite.install
        account = {"name": install.service_account, "namespace": install.namespace}
        sa = {"kind": "ServiceAccount", "serviceAccount": account}
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "PriorityLevelConfiguration",
                "metadata": {"name": NAME},
                "spec": {
                    "type": "Limited",
                    "limited": {
                        "nominalConcurrencyShares": 1,
                        "lendablePercent": 0,
                        "borrowingLimitPercent": 0,
                        "limitResponse": {"type": "Reject"},
                    },
                },
            },
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {"name": NAME},
                "spec": {
                    "priorityLevelConfiguration": {"name": NAME},
                    "matchingPrecedence": 500,
                    "distinguisherMethod": {"type": "ByUser"},
                    "rules": [
                        {
                            "subjects": [sa],
                            "resourceRules": [
                                {
                                    "verbs": ["*"],
                                    "apiGroups": ["*"],
                                    "resources": ["*"],
                                    "namespaces": ["*"],
                                    "clusterScope": True,
                                }
                            ],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                        }
                    ],
                },
            },
        ]
        listing = {"apiVersion": "v1", "kind": "List", "items": objects}
        self.suite.cluster.kubectl("apply", "-f", "-", input=json.dumps(listing))
        kube = self._as_operator()
        for _ in range(LOAD):
            thread = threading.Thread(target=self._load, args=(kube,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(DELAY + 15)
        for kind in ("flowschema", "prioritylevelconfiguration"):
            self.suite.cluster.kubectl("delete", kind, NAME, check=False)

    def _as_operator(self) -> Kube:
        install, cluster = self.suite.install, self.suite.cluster
        token = cluster.kubectl(
            "create", "token", install.service_account, "-n", install.namespace
        ).stdout.strip()
        cfg = client.Configuration()
        cfg.host, cfg.ssl_ca_cert = cluster.server, str(cluster.ca_file)
        cfg.api_key = {"authorization": f"Bearer {token}"}
        cfg.connection_pool_maxsize = LOAD
        return Kube(client.ApiClient(cfg))

    def _load(self, kube: Kube) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "load-", "namespace": self.namespace},
            "spec": {"containers": [{"name": "c", "image": "load"}]},
        }
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while not self._stop.is_set():
            refused = False
            try:
                kube.request(
                    "POST", path, query=[("dryRun", "All")], body=pod, resource="pods",
                    timeout=DELAY + 10,
                )  # fmt: skip
            except ApiError as err:
                refused = err.status == 429  # APF's; anything else reached the webhook
            except TransportError:
                pass
            with self._lock:
                self.sent += 1
                self.refused += refused
            if refused:
                self._stop.wait(0.2)


def errors(metrics: str) -> dict[str, float]:
    """dlk8s_api_errors_total by code."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("dlk8s_api_errors_total{"):
            code = line.split('code="', 1)[1].split('"', 1)[0]
            found[code] = found.get(code, 0.0) + float(line.rsplit(" ", 1)[1])
    return {code: n for code, n in found.items() if n}
