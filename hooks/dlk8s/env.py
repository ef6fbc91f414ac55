"""Environment variables of containers we build (on our own deep copies)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dlk8s.api import Obj, as_list


def set_env(container: Obj, values: Mapping[str, str]) -> None:
    """Variables the operator owns (TF_CONFIG, ...): any user value is replaced,
    since a stale cluster layout would make the job hang, not fail."""
    kept = [
        item
        for item in as_list(container.get("env"))
        if not (isinstance(item, dict) and item.get("name") in values)
    ]
    container["env"] = kept + [{"name": name, "value": value} for name, value in values.items()]


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
