"""Checks charts/dlk8s/values.schema.json for drift that helm lint cannot see.

Every closed object (additionalProperties: false) must list its property names
in propertyNames.enum as well: that duplicate is what makes helm print the
allowed keys when a user misspells one, so it has to match `properties`.

Usage: python tools/ct/check_values_schema.py [charts/dlk8s/values.schema.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parents[2] / "charts" / "dlk8s" / "values.schema.json"


def problems(node: Any, path: str = "#") -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if node.get("additionalProperties") is False and "properties" in node:
            names = sorted(node.get("propertyNames", {}).get("enum", []))
            if names != sorted(node["properties"]):
                found.append(
                    f"{path}: propertyNames.enum {names} != properties {sorted(node['properties'])}"
                )
        for key, value in node.items():
            found += problems(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += problems(value, f"{path}/{i}")
    return found


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    found = problems(json.loads(path.read_text()))
    for line in found:
        print(f"{path}: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
