"""What the kinds with a spec.replicaSpecs[] list (TFJob, MXJob, Caffe2Job)
share: their Kind, made from their ReplicaRules and the parts that differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlk8s.job.jobmodel import Kind, Replica
from dlk8s.job.objects import Obj, as_dict, as_int, as_str
from dlk8s.job.validation import ReplicaRules, replica_specs_problems
from dlk8s.job.vocabulary import RestartPolicy


def _nothing_more(job: Obj) -> list[str]:
    return []


def replica_specs_kind(
    name: str,
    rules: ReplicaRules,
    port_name: str,
    checks: Callable[[Obj], list[str]] = _nothing_more,
    **parts: Any,
) -> Kind:
    """`checks` adds the kind's own problems (its other spec fields) to those
    of spec.replicaSpecs; `parts` are the Kind's decorate_pod, extras and
    preflight."""

    def validate(job: Obj) -> list[str]:
        return replica_specs_problems(job, rules) + checks(job)

    def replicas(job: Obj) -> tuple[Replica, ...]:
        """A kind without a port field gets its default port on every replica."""
        field, port = rules.port
        return tuple(
            Replica(
                role=rules.role(entry),
                replicas=as_int(entry.get("replicas"), 1),
                port=as_int(entry.get(field), port) if field else port,
                template=as_dict(entry.get("template")),
                restart_policy=as_str(entry.get("restartPolicy"), RestartPolicy.EXIT_CODE),
            )
            for entry in job["spec"]["replicaSpecs"]
        )

    return Kind(
        name=name,
        roles=rules.roles,
        deciding_roles=rules.deciding_roles,
        container=rules.container,
        port_name=port_name,
        validate=validate,
        replicas=replicas,
        **parts,
    )
