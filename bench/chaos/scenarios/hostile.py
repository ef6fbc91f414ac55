"""Scenario 5, hostile: 31 hostile but schema-valid jobs (thousands of
replicas, huge annotations, names at the length limits, labels that claim
another job's pods, variables that collide with ours, also a PyTorchJob's,
a template that names its own pod or owner, ...) beside a bystander job
that must not be touched."""

from __future__ import annotations

from typing import Any

from bench.chaos.jobs import (
    init_clash,
    mxjob,
    pytorchjob,
    tfjob,
    with_container,
    with_env,
    with_exit,
    with_pod,
    with_ps_containers,
    with_template,
)
from bench.chaos.operators import Operators
from bench.chaos.suite import Row, Suite
from bench.common.operator import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE


def hostile(suite: Suite) -> Row:
    row = Row("31 hostile but schema-valid jobs beside a bystander")
    ns = suite.namespace("chaos-hostile")
    ops = Operators(suite.install).start()
    ops.procs[0].wait_ready()
    suite.submit(ns, [tfjob("bystander", workers=2, run=None)])
    suite.wait("the bystander", lambda: suite.settled(ns, {"bystander": "Running"}), 60)
    bystander = suite.jobs(ns)["bystander"]
    cases = hostile_jobs(bystander, 300 if suite.args.short else 2000)
    suite.submit(ns, [job for job, _ in cases])
    expected = {"bystander": "Running"} | {job["metadata"]["name"]: want for job, want in cases}
    suite.judge(row, ns, expected, timeout=420)
    touched = [life for life in suite.ledger.of(ns) if life.job == "bystander" and life.deleted]
    row.notes.append(f"bystander pods deleted or replaced: {len(touched)}")
    row.wrong += len(touched)
    row.restarts = ops.restarts
    ops.stop()
    return row


def hostile_jobs(bystander: dict[str, Any], many: int) -> list[tuple[dict[str, Any], str]]:
    """(job, the outcome it must reach)."""
    uid = bystander["metadata"]["uid"]
    claim = {LABEL_JOB_NAME: "bystander", LABEL_REPLICA_TYPE: "master", LABEL_REPLICA_INDEX: "0"}
    cases: list[tuple[dict[str, Any], str]] = [
        (mxjob("many", workers=many), "Running"),
        (
            with_template(tfjob("big-note", run=None), annotations={"note": "x" * 200_000}),
            "Running",
        ),
        (
            with_template(tfjob("huge-note", run=None), annotations={"note": "x" * 300_000}),
            "Refused",
        ),
        (tfjob("a" * 63, run=None), "Running"),
        (tfjob("b" * 64, run=None), "Running"),
        (tfjob("c" * 253, run=None), "Running"),
        (tfjob("d." + "e" * 100, run=None), "Running"),
        (tfjob("0digit-first", run=None), "Running"),
        (with_template(tfjob("claims", run=None), labels=claim), "Running"),
        (with_template(tfjob("claims-owner", run=None), owner=uid), "Running"),
        (with_template(tfjob("named", run=None), name="bystander-master-0"), "Running"),
        (with_template(tfjob("namespaced", run=None), namespace="kube-system"), "Running"),
        (
            with_env(
                tfjob("tf-config", run=None), {"TF_CONFIG": "{}", "KUBERNETES_SERVICE_HOST": "evil"}
            ),
            "Running",
        ),
        (
            with_env(pytorchjob("torch-env", run=None), {"MASTER_ADDR": "evil", "RANK": "7"}),
            "Running",
        ),
        (with_template(tfjob("label-too-long", run=None), labels={"team": "y" * 64}), "Refused"),
        (with_template(tfjob("label-unicode", run=None), labels={"team": "Ünïcode"}), "Refused"),
        (with_container(tfjob("typo", run=None), resource={"limits": {"cpu": "1"}}), "InvalidSpec"),
        (
            with_container(tfjob("privileged", run=None), securityContext={"privileged": True}),
            "Running",
        ),
        (with_pod(tfjob("pinned", run=None), nodeName="no-such-node"), "Creating"),
        (with_pod(tfjob("always", run=None), restartPolicy="Always"), "Running"),
        (with_pod(tfjob("host-net", run=None), hostNetwork=True), "Running"),
        (tfjob("deadline", run=None, runPolicy={"activeDeadlineSeconds": 1}), "Failed"),
        (tfjob("suspended", run=None, runPolicy={"suspend": True}), "Suspended"),
        (tfjob("ttl", run="1s", runPolicy={"ttlSecondsAfterFinished": 0}), "Deleted"),
        (with_exit(tfjob("retry-never", run=None, runPolicy={"backoffLimit": 0}), 137), "Failed"),
        (with_exit(tfjob("fails", run=None), 1), "Failed"),
        (tfjob("no-workers", workers=0, run=None), "Running"),
        (with_ps_containers(tfjob("ps-own", run=None)), "Running"),
        (with_env(tfjob("dup-env", run=None), {"A": "1"}, duplicate=True), "Running"),
        (init_clash(tfjob("init-clash", run=None)), "Refused"),
        (
            tfjob("hostile-tensorboard", run=None, tensorboard={"logDir": "/" + "l" * 1000}),
            "Running",
        ),
    ]
    return cases
