"""What the kinds with a spec.replicaSpecs[] list (TFJob, MXJob, Caffe2Job)
share: their Kind, made from their ReplicaRules and the parts that differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlk8s.job.api import Kind, Obj, Replica, replicas_from_specs
from dlk8s.job.validation import ReplicaRules, replica_specs_problems


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
        field, port = rules.port
        return replicas_from_specs(job, rules.role_field, field, port, rules.default_role)

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
