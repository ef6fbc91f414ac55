"""values.schema.json is generated whole from values.yaml (tools/chart_schema.py).

On a small values.yaml of its own, each rule of the generation shows: the
type from the default, the description from the `# --` comment, the
keywords of `# @schema` lines and blocks, closed sections with their
`propertyNames`, `required: true` lifted into the parent, the header's
annotation on the root; and each mistake in the annotations is reported. On
a copy of the chart, an annotation reaches the schema and Helm enforces it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import chart_schema
import chart_values
import chartdoc
import pytest

ROOT = Path(__file__).resolve().parents[3]
HELM = ROOT / ".tools" / "bin" / "helm4"

FIXTURE = """\
# The header.
# @schema
# title: fixture
# $defs:
#   port: {type: integer, minimum: 1}
# properties:
#   global: {type: object}
# @schema

# -- Where it runs.
# @schema required: true
# @schema enum: ["", gke]
cloud: ""
# -- How many.
count: 2
# -- A share.
ratio: 0.5
# -- On or off.
enabled: true
# -- Extra labels.
# @schema additionalProperties: {type: string}
labels: {}
# -- Flags, each one
# `--flag`.
# @schema
# items:
#   type: string
#   pattern: ^--
# @schema
args: []
# -- A section.
server:
  # -- Its port.
  # @schema $ref: "#/$defs/port"
  port: 80
  # @schema type: [boolean, "null"]
  elect: null
# -- Free-form, taken whole.
# @schema additionalProperties: true
context:
  runAsUser: 1
"""


def _schema(tmp_path: Path, text: str) -> tuple[dict, list[str]]:
    values = tmp_path / chart_values.VALUES
    values.parent.mkdir(parents=True, exist_ok=True)
    values.write_text(text)
    read = chart_values.read_values(tmp_path)
    schema, problems = chart_schema.build_schema(read)
    return schema, read.problems + problems


def test_the_schema_follows_defaults_comments_and_annotations(tmp_path: Path) -> None:
    schema, problems = _schema(tmp_path, FIXTURE)
    assert problems == []
    assert list(schema)[:4] == ["$schema", "title", "$comment", "$defs"]
    assert schema == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fixture",
        "$comment": chart_schema.COMMENT,
        "$defs": {"port": {"type": "integer", "minimum": 1}},
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "cloud": {"type": "string", "description": "Where it runs.", "enum": ["", "gke"]},
            "count": {"type": "integer", "description": "How many."},
            "ratio": {"type": "number", "description": "A share."},
            "enabled": {"type": "boolean", "description": "On or off."},
            "labels": {
                "type": "object",
                "description": "Extra labels.",
                "additionalProperties": {"type": "string"},
            },
            "args": {
                "type": "array",
                "description": "Flags, each one `--flag`.",
                "items": {"type": "string", "pattern": "^--"},
            },
            "server": {
                "type": "object",
                "description": "A section.",
                "additionalProperties": False,
                "properties": {
                    "port": {"$ref": "#/$defs/port", "description": "Its port."},
                    "elect": {"type": ["boolean", "null"]},
                },
                "propertyNames": {"enum": ["elect", "port"]},
            },
            "context": {
                "type": "object",
                "description": "Free-form, taken whole.",
                "additionalProperties": True,
            },
            "global": {"type": "object"},
        },
        "propertyNames": {
            "enum": [
                "args",
                "cloud",
                "context",
                "count",
                "enabled",
                "global",
                "labels",
                "ratio",
                "server",
            ]
        },
        "required": ["cloud"],
    }


def test_a_closed_object_of_an_annotation_lists_its_keys(tmp_path: Path) -> None:
    schema, problems = _schema(
        tmp_path,
        "# -- Secrets.\n"
        "# @schema items: {type: object, additionalProperties: false,"
        " properties: {name: {type: string}, key: {type: string}}}\n"
        "secrets: []\n",
    )
    assert problems == []
    items = schema["properties"]["secrets"]["items"]
    assert list(items) == ["type", "additionalProperties", "properties", "propertyNames"]
    assert items["propertyNames"] == {"enum": ["key", "name"]}


def test_a_comment_block_that_runs_into_a_key_is_that_keys(tmp_path: Path) -> None:
    schema, problems = _schema(tmp_path, "# -- Where.\n# @schema enum: [a, b]\ncloud: a\n")
    assert problems == []
    assert schema["properties"]["cloud"]["enum"] == ["a", "b"]
    assert "enum" not in schema


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# -- Null.\nelect: null\n", "elect: a default of null gives no type"),
        ("# -- Open.\n# @schema\n# minimum: 1\ncount: 2\n", "`# @schema` block is not closed"),
        ("# -- List.\n# @schema [1, 2]\ncount: 2\n", "must hold a mapping of keywords"),
        ("# -- Broken.\n# @schema enum: [a\ncloud: a\n", "`# @schema` is not YAML"),
        ("# -- Twice.\n# @schema enum: [a]\n# @schema enum: [b]\ncloud: a\n", "sets enum twice"),
        ("# -- Req.\n# @schema required: yes please\ncloud: a\n", "`required` in `# @schema`"),
        ("# -- Said.\n# @schema description: again\ncloud: a\n", "described twice"),
        (
            "# -- Free.\n# @schema additionalProperties: true\nctx:\n"
            "  # @schema minimum: 1\n  runAsUser: 1\n",
            "ctx.runAsUser: its `# @schema` is not applied",
        ),
        (
            "# Header.\n# @schema properties: {cloud: {type: string}}\n\n# -- C.\ncloud: a\n",
            "adds property cloud, which values.yaml has",
        ),
    ],
    ids=[
        "null",
        "open-block",
        "not-a-mapping",
        "not-yaml",
        "twice",
        "required",
        "description",
        "inside-free-form",
        "extra-property",
    ],
)
def test_a_mistake_in_the_annotations_is_reported(tmp_path: Path, text: str, problem: str) -> None:
    _, problems = _schema(tmp_path, text)
    assert any(problem in p for p in problems), problems


def test_an_annotation_reaches_the_charts_schema_and_helm_enforces_it(copy: Path) -> None:
    values = copy / chart_values.VALUES
    text = values.read_text()
    old = "  # @schema minimum: 1\n  timeoutSeconds: 300\n"
    assert text.count(old) == 1
    values.write_text(
        text.replace(
            old, "  # @schema minimum: 1\n  # @schema maximum: 3600\n  timeoutSeconds: 300\n"
        )
    )
    assert chartdoc.check(copy) == [
        f"{chart_schema.SCHEMA}: differs from its sources; run `make chart-generate`"
    ]
    assert chartdoc.generate(copy) == []
    schema = json.loads((copy / chart_schema.SCHEMA).read_text())
    timeout = schema["properties"]["tests"]["properties"]["timeoutSeconds"]
    assert (timeout["minimum"], timeout["maximum"]) == (1, 3600)
    if not HELM.exists():
        pytest.skip(f"{HELM} missing: run `make tools`")
    argv = [str(HELM), "template", "dlk8s", str(copy / "charts" / "dlk8s")]
    for seconds, fails in (("3600", False), ("3601", True)):
        done = subprocess.run(
            [*argv, "--set", f"tests.timeoutSeconds={seconds}"], capture_output=True, text=True
        )
        assert (done.returncode != 0) is fails, done.stderr
        assert ("timeoutSeconds" in done.stderr) is fails, done.stderr
