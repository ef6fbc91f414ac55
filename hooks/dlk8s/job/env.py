"""Environment variables of containers we build (on our own deep copies)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from dlk8s.job.children import cluster_spec
from dlk8s.job.jobmodel import JobContext, Slot
from dlk8s.job.objects import EnvVar, Obj, as_list


def set_env(
    container: Obj,
    values: Mapping[str, str],
    fields: Mapping[str, str] | None = None,
    secrets: Mapping[str, tuple[str, str]] | None = None,
) -> None:
    """Variables the operator owns (TF_CONFIG, ...): any user value is replaced,
    since a stale cluster layout would make the job hang, not fail. ``fields``
    maps more of them to what the pod reads of itself (a downward-API
    fieldPath), ``secrets`` to a key of a Secret (its name, the key)."""
    fields, secrets = fields or {}, secrets or {}
    owned = {*values, *fields, *secrets}
    kept = [
        item
        for item in as_list(container.get("env"))
        if not (isinstance(item, dict) and item.get("name") in owned)
    ]
    container["env"] = (
        kept
        + [{"name": name, "value": value} for name, value in values.items()]
        + [
            {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for name, path in fields.items()
        ]
        + secret_refs(secrets)
    )


def secret_refs(secrets: Mapping[str, tuple[str, str]]) -> list[EnvVar]:
    """Variables read from Secrets: name -> (the Secret's name, its key)."""
    return [
        EnvVar(name=name, valueFrom={"secretKeyRef": {"name": secret, "key": key}})
        for name, (secret, key) in secrets.items()
    ]


def add_env_defaults(container: Obj, values: Iterable[tuple[str, str]]) -> None:
    """Variables the user may override (driver paths, ...): added only when
    the container does not set the name already."""
    env = list(as_list(container.get("env")))
    present = {
        item.get("name")
        for item in env
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    }
    for name, value in values:
        if name not in present:
            env.append({"name": name, "value": value})
            present.add(name)
    if env:
        container["env"] = env


def cluster_config(ctx: JobContext, slot: Slot, **extra: object) -> str:
    """{"cluster": {role: [addresses]}, "task": {"type": role, "index": i}}
    plus `extra`, as compact JSON with sorted keys (TF_CONFIG, CAFFE2_CONFIG),
    so a job always yields identical pods.

    Spliced from the cluster layout serialized once per pass: with many
    replicas, every pod repeats the same (large) layout.
    """
    parts = {
        "cluster": ctx.remember("cluster_config", lambda: compact_json(cluster_spec(ctx))),
        "task": compact_json({"type": slot.role.lower(), "index": slot.index}),
    } | {key: compact_json(value) for key, value in extra.items()}
    return "{" + ",".join(f"{compact_json(k)}:{v}" for k, v in sorted(parts.items())) + "}"


def compact_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
