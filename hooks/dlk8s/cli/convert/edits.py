"""Edits of one object's fields that tell what they did: rename, move, drop."""

from __future__ import annotations

from typing import Any

from dlk8s.cli.convert.notes import Notes
from dlk8s.job.objects import Obj

# A field the seed spelled otherwise: (old name, dlk8s name, why; may be empty).
Rename = tuple[str, str, str]
# A field dlk8s has no place for: (name, why it is dropped).
Drop = tuple[str, str]


def unshared(value: Any) -> Any:
    """A copy in which no two places share an object: YAML anchors and aliases
    make one object appear in several replicas, and a change to one must not
    change the others (nor make the output carry anchors)."""
    if isinstance(value, dict):
        return {k: unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unshared(v) for v in value]
    return value


def replace_key(obj: Obj, old: str, new: str, value: Any) -> None:
    """obj with `old` replaced by `new: value` at the same place (the order is kept)."""
    items = [(new, value) if k == old else (k, v) for k, v in obj.items()]
    obj.clear()
    obj.update(items)


def drop(obj: Obj, key: str, path: str, note: Notes, why: str) -> Any:
    value = obj.pop(key)
    note(path, f"dropped: {why}")
    return value


def drop_all(obj: Obj, drops: tuple[Drop, ...], path: str, note: Notes) -> None:
    """Drops each of `drops` that obj has; `path` is obj's own."""
    for key, why in drops:
        if key in obj:
            drop(obj, key, f"{path}.{key}", note, why)


def rename(obj: Obj, old: str, new: str, path: str, note: Notes, why: str = "") -> None:
    """Renames obj[old] to obj[new] where it stands."""
    parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
    if new in obj:
        del obj[old]
        note(path, f"dropped: {parent}{new} is set as well and wins")
        return
    replace_key(obj, old, new, obj[old])
    note(path, f"renamed to {parent}{new}" + (f" ({why})" if why else ""))


def rename_all(obj: Obj, renames: tuple[Rename, ...], path: str, note: Notes) -> None:
    """Renames each of `renames` that obj has; `path` is obj's own."""
    for old, new, why in renames:
        if old in obj:
            rename(obj, old, new, f"{path}.{old}", note, why)


def drop_unknown(obj: Obj, known: tuple[str, ...], path: str, note: Notes) -> None:
    for key in [k for k in obj if k not in known]:
        drop(obj, key, f"{path}.{key}", note, "dlk8s has no such field")
