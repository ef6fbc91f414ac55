"""Scenario 14, slow-api: every pod create waits 25 s in an admission
webhook (a policy engine under load), while API Priority and Fairness
gives the operator's ServiceAccount a priority level of its own with few
seats that rejects what does not fit (429 with Retry-After) (issue 49).

The operator's requests time out after 30 s in all, the longest a webhook
may take; its creates hold their seats for the webhook's 25 s, so most of
its other requests meanwhile are refused. Must be zero: the usual
(duplicate pods: more than one per replica; no pod is disrupted here);
the notes say how many requests were refused or timed out.
"""

from __future__ import annotations

import json
from typing import Any

from bench.chaos.jobs import mixed
from bench.chaos.ledger import duplicates
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.chaos.webhook import SlowWebhook

DELAY = 25.0  # seconds the webhook takes on each pod create
NAME = "chaos-throttle"


def slow_api(suite: Suite) -> Row:
    row = Row(f"pod creates held {DELAY:.0f}s by a webhook; the operator throttled by APF (429)")
    jobs = 10 if suite.args.short else 30
    ns = suite.namespace("chaos-slow")
    names = [f"w{i}" for i in range(jobs)]
    with SlowWebhook(suite.cluster, ns, DELAY) as hook, throttled(suite):
        ops = Operators(suite.install).start()
        op = ops.procs[0]
        op.wait_ready()
        suite.submit(ns, [mixed(n, i, workers=1, run="20s") for i, n in enumerate(names)])
        suite.judge(row, ns, dict.fromkeys(names, "Succeeded"), timeout=600)
        refused = errors(op.metrics())
        calls = hook.calls
    row.duplicates = duplicates(suite.ledger, ns)
    row.restarts = ops.restarts
    row.notes.append(
        f"{calls} webhook calls for {len(suite.ledger.of(ns))} pods;"
        f" requests refused or failed: {refused or 'none'}"
    )
    ops.stop()
    return row


class throttled:  # noqa: N801 (a context manager read as a phrase)
    """The operators' ServiceAccount's requests in a priority level of one
    nominal share that lends and borrows nothing and rejects what waits."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite

    def __enter__(self) -> None:
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

    def __exit__(self, *exc: object) -> None:
        for kind in ("flowschema", "prioritylevelconfiguration"):
            self.suite.cluster.kubectl("delete", kind, NAME, check=False)


def errors(metrics: str) -> dict[str, float]:
    """dlk8s_api_errors_total by code."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("dlk8s_api_errors_total{"):
            code = line.split('code="', 1)[1].split('"', 1)[0]
            found[code] = found.get(code, 0.0) + float(line.rsplit(" ", 1)[1])
    return {code: n for code, n in found.items() if n}
