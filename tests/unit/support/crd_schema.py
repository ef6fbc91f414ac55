"""A small checker of the CRDs' structural schemas (crds/): types, enums,
bounds, required and unknown fields, what the apiserver would refuse or prune
(its CEL rules are the e2e tests' to check). `job_problems` adds the
operator's own validation; used wherever a test holds a job the CRD and the
operator must accept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import yaml

from dlk8s.job.kinds import KINDS

ROOT = Path(__file__).resolve().parents[3]


def _crd_schemas() -> dict[str, dict[str, Any]]:
    schemas = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        version = crd["spec"]["versions"][0]
        schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas


SCHEMAS = _crd_schemas()


def _type_ok(value: Any, kind: str | None) -> bool:
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    return kind is None or checks[kind](value)


# The bounds a schema sets on a number, and on a string's or a list's length,
# each with the note for a value that breaks it.
_BOUNDS: Final = {
    "number": (("minimum", "{size} below {bound}"), ("maximum", "{size} above {bound}")),
    "string": (("minLength", "shorter than {bound}"), ("maxLength", "longer than {bound}")),
    "list": (("minItems", "fewer than {bound} items"), ("maxItems", "more than {bound} items")),
}


def _bounds(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    if isinstance(value, str | list):
        size, kind = len(value), "string" if isinstance(value, str) else "list"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        size, kind = value, "number"
    else:
        return []
    (low, too_small), (high, too_large) = _BOUNDS[kind]
    found = []
    if low in schema and size < schema[low]:
        found.append(f"{path}: " + too_small.format(size=size, bound=schema[low]))
    if high in schema and size > schema[high]:
        found.append(f"{path}: " + too_large.format(size=size, bound=schema[high]))
    return found


def schema_problems(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """What the apiserver's structural checks would refuse or prune (CEL aside)."""
    if value is None:
        return [f"{path}: null (the apiserver drops it)"]
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: neither an integer nor a string"]
    elif (
        "anyOf" in schema
        and "type" not in schema
        and all(schema_problems(value, s, path) for s in schema["anyOf"])
    ):
        return [f"{path}: matches none of anyOf"]
    if not _type_ok(value, schema.get("type")):
        return [f"{path}: {type(value).__name__}, not {schema['type']}"]
    found: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} not in {schema['enum']}")
    found += _bounds(value, schema, path)
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        found.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        for index, item in enumerate(value):
            found += schema_problems(item, schema.get("items", {}), f"{path}[{index}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{path}.{key}: required")
        for key, item in value.items():
            if key in properties:
                found += schema_problems(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += schema_problems(item, extra, f"{path}.{key}")
            elif properties and not schema.get("x-kubernetes-preserve-unknown-fields"):
                found.append(f"{path}.{key}: unknown field (the apiserver would drop it)")
    return found


def job_problems(job: dict[str, Any]) -> list[str]:
    schema = SCHEMAS[job["kind"]]
    body = {k: v for k, v in job.items() if k != "metadata"}  # ObjectMeta is the apiserver's
    return schema_problems(body, schema) + KINDS[job["kind"]].validate(job)
