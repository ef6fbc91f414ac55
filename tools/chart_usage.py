"""The lint for values that no template reads.

A value of values.yaml that nothing reads is a promise the chart does not
keep: a user sets it and nothing changes. docs/chart.md ("Values: the schema
and the lint") states what counts as a read; in short, `.Values.a.b` in an
action reads `a.b` and all under it, except as the whole right side of
`$x := ...`, which names `a.b` `$x` for the reads `$x.c` of the same file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chart_values import CHART, VALUES, KeyPath, name

TEMPLATES = CHART / "templates"

_READ = re.compile(r"\.Values\b((?:\.\w+)*)")
_VARIABLE = re.compile(r"\$(\w+)((?:\.\w+)*)")
_DECLARATION = re.compile(r"\$(\w+)\s*:?=\s*(\S+)")
_VALUES_CHAIN = re.compile(r"[$\w.]*?\.Values\b((?:\.\w+)*)")


def _path(chain: str) -> KeyPath:
    return tuple(part for part in chain.split(".") if part)


def _literal_end(text: str, start: int) -> int:
    """Where the string, raw string or character literal opening at `start` ends."""
    quote = text[start]
    at = start + 1
    while at < len(text) and text[at] != quote:
        at += 2 if quote != "`" and text[at] == "\\" else 1
    return at + 1


def _trimmed(code: str) -> str:
    code = code.strip()
    if code[:1] == "-" and code[1:2].isspace():
        code = code[1:]
    if code[-1:] == "-" and code[-2:-1].isspace():
        code = code[:-1]
    return code.strip()


def actions(text: str) -> list[str]:
    """The code of each action of a Go template, without literals and comments."""
    found: list[str] = []
    at = text.find("{{")
    while at >= 0:
        at += 2
        code: list[str] = []
        while at < len(text) and not text.startswith("}}", at):
            if text[at] in "\"`'":
                at = _literal_end(text, at)
                code.append(" ")
            elif text.startswith("/*", at):
                end = text.find("*/", at + 2)
                at = len(text) if end < 0 else end + 2
            else:
                code.append(text[at])
                at += 1
        found.append(_trimmed("".join(code)))
        at = text.find("{{", at + 2)
    return found


def _aliased(chain: str, aliases: dict[str, set[KeyPath]]) -> set[KeyPath] | None:
    """The value paths a variable declared as `chain` stands for, if it names values."""
    read = _VALUES_CHAIN.fullmatch(chain)
    if read:
        return {_path(read[1])}
    variable = _VARIABLE.fullmatch(chain)
    if variable and variable[1] in aliases:
        return {(*target, *_path(variable[2])) for target in aliases[variable[1]]}
    return None


def template_reads(text: str) -> set[KeyPath]:
    """The value paths one template file reads."""
    aliases: dict[str, set[KeyPath]] = {}
    reads: set[KeyPath] = set()
    for code in actions(text):
        declaration = _DECLARATION.fullmatch(code)
        targets = _aliased(declaration[2], aliases) if declaration else None
        if declaration and targets is not None:
            aliases.setdefault(declaration[1], set()).update(targets)
            continue
        reads.update(_path(match[1]) for match in _READ.finditer(code))
        for match in _VARIABLE.finditer(code):
            for target in aliases.get(match[1], ()):
                reads.add((*target, *_path(match[2])))
    return reads


def chart_reads(chart: Path) -> set[KeyPath]:
    """The value paths the chart's templates read."""
    reads: set[KeyPath] = set()
    for path in sorted((chart / "templates").rglob("*")):
        if path.is_file():
            reads |= template_reads(path.read_text())
    return reads


def unused_values(values: dict[str, Any], reads: set[KeyPath]) -> list[KeyPath]:
    """The keys of `values` no read uses, each reported at its highest unused key."""
    if () in reads:
        return []  # a template reads .Values whole
    unused: list[KeyPath] = []

    def walk(node: dict[str, Any], path: KeyPath) -> None:
        for key, value in node.items():
            here = (*path, str(key))
            if here in reads:
                continue
            below = any(len(r) > len(here) and r[: len(here)] == here for r in reads)
            if not below:
                unused.append(here)
            elif isinstance(value, dict) and value:
                walk(value, here)

    walk(values, ())
    return unused


def problems(root: Path, values: dict[str, Any]) -> list[str]:
    return [
        f"{VALUES}: {name(path)} is read by no template under {TEMPLATES}: use it there, or"
        " remove it"
        for path in unused_values(values, chart_reads(root / CHART))
    ]
