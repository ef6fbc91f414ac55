"""Checks of a job's spec, as human-readable problems naming the field path.

The CRD checks most of this already, but it may be older than the operator
or bypassed, so the operator checks again everything its own code relies on:
what the CRD enforces, plus the shape of every field the builders read or
modify (env, volumeMounts, resources, volumes, template labels). A job with
any problem is failed with reason InvalidSpec rather than half-built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlk8s.job.computeresources import is_quantity
from dlk8s.job.failurepolicy import rules_problems
from dlk8s.job.objects import Obj, as_int, as_list, dig, is_int, is_string_map, is_text, show
from dlk8s.job.vocabulary import MAX_REPLICAS, CleanPodPolicy, RestartPolicy, SuccessPolicy

_CONTAINER_LISTS = ("containers", "initContainers")


def metadata_problems(job: Obj) -> list[str]:
    meta = job.get("metadata")
    if not isinstance(meta, dict):
        return ["metadata: must be an object"]
    return [
        f"metadata.{key}: must be a non-empty string"
        for key in ("name", "namespace", "uid")
        if not is_text(meta.get(key))
    ]


def optional_object(path: str, value: object, check: Callable[[str, Obj], list[str]]) -> list[str]:
    """An optional object at `path`: nothing when it is absent, one problem
    when it is not an object, else what `check(path, value)` finds in it."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"{path}: must be an object"]
    return check(path, value)


def run_policy_problems(job: Obj, roles: tuple[str, ...] = ()) -> list[str]:
    """spec.runPolicy's problems, for a kind of these roles (its
    podFailurePolicy may name only those; without roles, any)."""

    def check(path: str, policy: Obj) -> list[str]:
        problems = _run_policy_problems(path, policy)
        success = policy.get("successPolicy")
        problems += one_of(f"{path}.successPolicy", success, SuccessPolicy.ALLOWED)
        if roles and success == SuccessPolicy.ALL_WORKERS and "WORKER" not in roles:
            problems.append(
                f"{path}.successPolicy: AllWorkers needs a WORKER role; this kind has none"
            )
        failures = policy.get("podFailurePolicy")
        return problems + rules_problems(f"{path}.podFailurePolicy", failures, roles or None)

    return optional_object("spec.runPolicy", dig(job, "spec", "runPolicy"), check)


def _run_policy_problems(path: str, policy: Obj) -> list[str]:
    problems = one_of(
        f"{path}.cleanPodPolicy", policy.get("cleanPodPolicy"), CleanPodPolicy.ALLOWED
    )
    problems += int_at_least(
        f"{path}.ttlSecondsAfterFinished", policy.get("ttlSecondsAfterFinished"), 0
    )
    problems += int_at_least(
        f"{path}.activeDeadlineSeconds", policy.get("activeDeadlineSeconds"), 1
    )
    problems += int_at_least(f"{path}.backoffLimit", policy.get("backoffLimit"), 0)
    if policy.get("suspend") not in (None, True, False):
        problems.append(f"{path}.suspend: must be true or false")
    return problems


@dataclass(frozen=True, kw_only=True)
class ReplicaRules:
    """How one kind's spec.replicaSpecs[] must look.

    The first deciding role leads the job (TFJob's MASTER, MXJob's SCHEDULER,
    Caffe2Job's MASTER): its entry has exactly one pod, and where no other
    role can decide in its place the job needs exactly one such entry. Either
    way, the job needs pods of some deciding role.
    """

    role_field: str  # e.g. "tfReplicaType"
    roles: tuple[str, ...]
    # The port field (e.g. "tfPort"; None for a kind without one) and its default.
    port: tuple[str | None, int]
    container: str  # the kind's main container, e.g. "tensorflow"
    # As Kind.deciding_roles; by default the first role alone.
    deciding_roles: tuple[str, ...] = ()
    # Roles that may omit the template or the main container (a default one is added).
    defaultable_roles: tuple[str, ...] = ()
    # The role of an entry without the role field (the CRD's default), if any.
    default_role: str | None = None

    def __post_init__(self) -> None:
        if not self.deciding_roles:
            object.__setattr__(self, "deciding_roles", self.roles[:1])

    @property
    def port_field(self) -> str | None:
        return self.port[0]

    def role(self, entry: Obj) -> Any:
        """An entry's role, or the default when it names none (as the CRD defaults it)."""
        role = entry.get(self.role_field)
        return self.default_role if role is None else role


def replica_specs_problems(job: Obj, rules: ReplicaRules) -> list[str]:
    specs = dig(job, "spec", "replicaSpecs")
    if not isinstance(job.get("spec"), dict):
        return ["spec: must be an object"]
    if not isinstance(specs, list) or not specs:
        return ["spec.replicaSpecs: must be a non-empty list"]
    problems: list[str] = []
    for index, entry in enumerate(specs):
        problems += _replica_problems(f"spec.replicaSpecs[{index}]", entry, rules)
    return problems + _role_count_problems(specs, rules)


def _replica_problems(path: str, entry: object, rules: ReplicaRules) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{path}: must be an object"]
    role = rules.role(entry)
    problems = []
    if role not in rules.roles:
        allowed = ", ".join(rules.roles)
        problems.append(f"{path}.{rules.role_field}: must be one of {allowed} (got {show(role)})")
    problems += int_between(f"{path}.replicas", entry.get("replicas"), 0, MAX_REPLICAS)
    if rules.port_field:
        problems += port_problems(f"{path}.{rules.port_field}", entry.get(rules.port_field))
    problems += one_of(f"{path}.restartPolicy", entry.get("restartPolicy"), RestartPolicy.ALLOWED)
    return problems + _template_problems(
        path, entry.get("template"), role in rules.defaultable_roles, rules
    )


def _template_problems(
    path: str, template: object, defaultable: bool, rules: ReplicaRules
) -> list[str]:
    path = f"{path}.template"
    if template is None and defaultable:
        return []
    if not isinstance(template, dict):
        return [f"{path}: must be an object"]
    problems = optional_object(
        f"{path}.metadata", template.get("metadata"), template_metadata_problems
    )
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return [*problems, f"{path}.spec: must be an object"]
    problems += pod_spec_problems(f"{path}.spec", spec)
    names = [c.get("name") for c in as_list(spec.get("containers")) if isinstance(c, dict)]
    if not defaultable and rules.container not in names:
        problems.append(f'{path}.spec.containers: no container named "{rules.container}"')
    return problems


def template_metadata_problems(path: str, meta: Obj) -> list[str]:
    return [
        f"{path}.{key}: must map strings to strings"
        for key in ("labels", "annotations")
        if meta.get(key) is not None and not is_string_map(meta.get(key))
    ]


def pod_spec_problems(path: str, spec: Obj) -> list[str]:
    """The parts of a PodSpec the operator reads or changes."""
    problems: list[str] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        problems.append(f"{path}.containers: must be a non-empty list")
    problems += container_lists_problems(path, spec)
    return problems + objects_with_names_problems(f"{path}.volumes", spec.get("volumes"))


def container_lists_problems(path: str, spec: Obj) -> list[str]:
    """containers and initContainers: lists of containers with unique names."""
    problems: list[str] = []
    seen: set[str] = set()
    for key in _CONTAINER_LISTS:
        items = spec.get(key)
        if items is not None and not isinstance(items, list):
            problems.append(f"{path}.{key}: must be a list")
            continue
        for index, container in enumerate(as_list(items)):
            problems += container_problems(f"{path}.{key}[{index}]", container, seen)
    return problems


def container_problems(path: str, container: object, seen: set[str]) -> list[str]:
    if not isinstance(container, dict):
        return [f"{path}: must be an object"]
    name = container.get("name")
    problems = []
    if not isinstance(name, str) or not name:
        problems.append(f"{path}.name: must be a non-empty string")
    elif name in seen:
        problems.append(f"{path}.name: {name!r} is used by another container")
    else:
        seen.add(name)
    problems += objects_with_names_problems(f"{path}.env", container.get("env"))
    problems += volume_mounts_problems(f"{path}.volumeMounts", container.get("volumeMounts"))
    return problems + resources_problems(f"{path}.resources", container.get("resources"))


def objects_with_names_problems(path: str, items: object) -> list[str]:
    """An optional list of objects, each with a non-empty string `name`."""
    if items is None:
        return []
    if not isinstance(items, list):
        return [f"{path}: must be a list"]
    return [
        f"{path}[{index}]: must be an object with a non-empty string name"
        for index, item in enumerate(items)
        if not (isinstance(item, dict) and is_text(item.get("name")))
    ]


def volume_mounts_problems(path: str, mounts: object) -> list[str]:
    problems = objects_with_names_problems(path, mounts)
    return problems + [
        f"{path}[{index}].mountPath: must be a non-empty string"
        for index, mount in enumerate(as_list(mounts))
        if isinstance(mount, dict) and not is_text(mount.get("mountPath"))
    ]


def resources_problems(path: str, resources: object) -> list[str]:
    """Requests and limits: objects whose values are quantities (the
    autoscaler and the default containers read them)."""
    return optional_object(path, resources, _quantities_problems)


def _quantities_problems(path: str, resources: Obj) -> list[str]:
    problems = []
    for key in ("limits", "requests"):
        items = resources.get(key)
        if items is None:
            continue
        if not isinstance(items, dict):
            problems.append(f"{path}.{key}: must be an object")
            continue
        problems += [
            f"{path}.{key}.{name}: {show(value)} is not a quantity"
            for name, value in items.items()
            if not isinstance(name, str) or not is_quantity(value)
        ]
    return problems


def _role_count_problems(specs: list[object], rules: ReplicaRules) -> list[str]:
    entries = [e for e in specs if isinstance(e, dict)]
    roles = [rules.role(e) for e in entries]
    problems = [
        f"spec.replicaSpecs: {role} appears more than once"
        for role in rules.roles
        if roles.count(role) > 1
    ]
    leader, *fallbacks = rules.deciding_roles
    if not fallbacks and roles.count(leader) != 1:
        problems.append(
            f"spec.replicaSpecs: needs exactly one entry with {rules.role_field} "
            f"{leader} (found {roles.count(leader)})"
        )
    for index, entry in enumerate(specs):
        if (
            isinstance(entry, dict)
            and rules.role(entry) == leader
            and entry.get("replicas", 1) != 1
        ):
            problems.append(f"spec.replicaSpecs[{index}].replicas: must be 1 for {leader}")
    deciding = [e for e in entries if rules.role(e) in rules.deciding_roles]
    if not problems and not any(as_int(e.get("replicas"), 1) > 0 for e in deciding):
        names = " or ".join(rules.deciding_roles)
        problems.append(
            f"spec.replicaSpecs: needs an entry with {rules.role_field} {names}"
            " and at least one replica (nothing else can decide the job)"
        )
    return problems


def optional_string_problems(path: str, value: object) -> list[str]:
    return [] if value is None or is_text(value) else [f"{path}: must be a non-empty string"]


def one_of(path: str, value: object, allowed: tuple[str, ...]) -> list[str]:
    if value is None or value in allowed:
        return []
    return [f"{path}: must be one of {', '.join(allowed)} (got {show(value)})"]


def int_at_least(path: str, value: object, minimum: int) -> list[str]:
    if value is None or (is_int(value) and value >= minimum):
        return []
    return [f"{path}: must be an integer of at least {minimum}"]


def int_between(path: str, value: object, low: int, high: int) -> list[str]:
    """An optional integer within [low, high] (None: absent, the default applies)."""
    if value is None or (is_int(value) and low <= value <= high):
        return []
    return [f"{path}: must be an integer from {low} to {high}"]


def port_problems(path: str, value: object) -> list[str]:
    return int_between(path, value, 1, 65535)
