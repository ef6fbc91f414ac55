"""What charts/dlk8s/values.yaml says about each key: its default, its `# --`
description and its `# @schema` annotation (docs/chart.md, "Values: the
schema and the lint", describes both comment forms)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CHART = Path("charts/dlk8s")
VALUES = CHART / "values.yaml"

KeyPath = tuple[str, ...]

_KEY = re.compile(
    r"^(?P<indent> *)(?P<key>[A-Za-z0-9_][A-Za-z0-9_./-]*|\"[^\"]*\"|'[^']*'):(?:\s|$)"
)
_BLOCK_SCALAR = re.compile(r":\s*[|>][-+0-9]*\s*(#.*)?$")
SCHEMA_MARK = "@schema"


@dataclass
class Doc:
    """The `# --` comment of one key of values.yaml."""

    path: KeyPath
    line: int
    description: str
    default: str | None = None


@dataclass
class Values:
    """values.yaml read once, for the schema, the docs table and the usage lint."""

    # the defaults, as Helm reads them
    values: dict[str, Any]
    # the `# --` comment of each documented key
    docs: dict[KeyPath, Doc] = field(default_factory=dict)
    # the `# @schema` annotation of each annotated key; () is the file's header
    schemas: dict[KeyPath, dict[str, Any]] = field(default_factory=dict)
    # the line of each annotation, for messages
    schema_lines: dict[KeyPath, int] = field(default_factory=dict)
    # what is wrong with the comments themselves
    problems: list[str] = field(default_factory=list)


def name(path: KeyPath) -> str:
    return ".".join(path) if path else "(the root)"


@dataclass
class _Comment:
    """One comment block split into its description lines and its annotation."""

    text: list[str] = field(default_factory=list)
    schema: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _split_comment(comments: list[str], line: int) -> _Comment:
    """Description lines apart from `# @schema <yaml>` lines and `# @schema` blocks."""
    out = _Comment()
    fragments: list[str] = []
    block: list[str] | None = None
    for raw in comments:
        body = raw.strip()[1:]
        if body.strip() == SCHEMA_MARK:
            if block is not None:
                fragments.append("\n".join(block))
            block = None if block is not None else []
        elif block is not None:
            block.append(body[1:] if body.startswith(" ") else body)
        elif body.strip().startswith(SCHEMA_MARK + " "):
            fragments.append(body.strip()[len(SCHEMA_MARK) + 1 :])
        else:
            out.text.append(body.strip())
    if block is not None:
        out.problems.append(f"{VALUES}:{line}: a `# @schema` block is not closed")
    for fragment in fragments:
        try:
            parsed = yaml.safe_load(fragment)
        except yaml.YAMLError as error:
            out.problems.append(f"{VALUES}:{line}: `# @schema` is not YAML: {error}")
            continue
        if not isinstance(parsed, dict):
            out.problems.append(f"{VALUES}:{line}: `# @schema` must hold a mapping of keywords")
            continue
        for key in parsed.keys() & out.schema.keys():
            out.problems.append(f"{VALUES}:{line}: `# @schema` sets {key} twice")
        out.schema.update(parsed)
    return out


def _doc(texts: list[str], path: KeyPath, line: int) -> Doc | None:
    starts = [i for i, t in enumerate(texts) if t == "--" or t.startswith("-- ")]
    if not starts:
        return None
    description: list[str] = []
    default: list[str] = []
    target = description
    for text in texts[starts[-1] :]:
        if text == "--" or text.startswith("-- "):
            target = description
            text = text[2:].strip()
        elif text.startswith("@default --"):
            target = default
            text = text[len("@default --") :].strip()
        if text:
            target.append(text)
    return Doc(path, line, " ".join(description), " ".join(default) or None)


def _header(lines: list[str]) -> list[str]:
    """The file's first comment block, when a blank line ends it: it annotates the
    whole schema (one not followed by a blank line is the first key's)."""
    header: list[str] = []
    for line in lines:
        if not line.lstrip().startswith("#"):
            break
        header.append(line)
    ended = len(header) < len(lines) and not lines[len(header)].strip()
    return header if ended else []


def _note(result: Values, path: KeyPath, comments: list[str], line: int) -> None:
    comment = _split_comment(comments, line)
    result.problems += comment.problems
    doc = _doc(comment.text, path, line)
    if doc is not None and path:
        result.docs[path] = doc
    if comment.schema:
        result.schemas[path] = comment.schema
        result.schema_lines[path] = line


def read_values(root: Path) -> Values:
    """values.yaml's values and the comments above each key."""
    text = (root / VALUES).read_text()
    lines = text.splitlines()
    result = Values(yaml.safe_load(text) or {})
    header = _header(lines)
    _note(result, (), header, 1)
    stack: list[tuple[int, str]] = []
    comments: list[str] = []
    skip_deeper_than: int | None = None
    for number, line in enumerate(lines[len(header) :], start=len(header) + 1):
        indent = len(line) - len(line.lstrip(" "))
        if skip_deeper_than is not None:
            if not line.strip() or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if line.strip().startswith("#"):
            comments.append(line)
            continue
        match = _KEY.match(line)
        if not match:
            # a blank line ends a comment block; a list item or a flow
            # continuation is part of the value above and never a key of its own
            comments = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"].strip("\"'")))
        _note(result, tuple(k for _, k in stack), comments, number)
        comments = []
        if _BLOCK_SCALAR.search(line):
            skip_deeper_than = indent
    for path in [*result.docs, *result.schemas]:
        if path and lookup(result.values, path) is MISSING:
            result.problems.append(
                f"{VALUES}: a comment on {name(path)}, which is no key of the values"
                " (inside a list?)"
            )
    return result


MISSING = object()


def lookup(values: Any, path: KeyPath) -> Any:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return MISSING
        values = values[key]
    return values


@dataclass
class Row:
    """A key of values.yaml: a section (its keys are documented one by one) or a value."""

    # where the key sits
    path: KeyPath
    # its default
    value: Any
    # its `# --` comment, if any
    doc: Doc | None
    # whether its keys carry their own comments (then it has no row of its own)
    section: bool

    @property
    def name(self) -> str:
        return ".".join(self.path)


def rows(values: Values) -> tuple[list[Row], list[str]]:
    """Every key of values.yaml in file order, and the undocumented ones as problems."""
    found: list[Row] = []
    problems: list[str] = []

    def walk(node: dict[str, Any], path: KeyPath) -> None:
        for key, value in node.items():
            here = (*path, str(key))
            doc = values.docs.get(here)
            section = isinstance(value, dict) and any(
                len(p) > len(here) and p[: len(here)] == here for p in values.docs
            )
            found.append(Row(here, value, doc, section))
            if section:
                walk(value, here)
            elif doc is None:
                problems.append(
                    f"{VALUES}: {'.'.join(here)} has no `# --` comment (describe it, or describe"
                    " each of its keys)"
                )
            elif not doc.description:
                problems.append(
                    f"{VALUES}:{doc.line}: the `# --` comment of {'.'.join(here)} is empty"
                )

    walk(values.values, ())
    return found, problems
