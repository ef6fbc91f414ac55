"""The lint for values no template reads (tools/chart_usage.py, run by
`make chart-lint` through `tools/chartdoc.py check`).

What a template reads is shown on one template that uses every form (a
direct read, a variable for a section, `with`, `range`, `index`, `.ctx` and
`$` roots, and reads that are none: string literals, comments, text outside
actions); which keys are unused on small values; and on a fixture chart and
on copies of the real one that the check fails exactly when a value is left
unread.
"""

from __future__ import annotations

from pathlib import Path

import chart_usage
import chart_values
import chartdoc
import pytest

ROOT = Path(__file__).resolve().parents[3]

TEMPLATE = """\
{{- if .Values.a.enabled }}
{{- $s := .Values.b }}
{{- $t := $s.inner }}
name: {{ $s.name | quote }}
deep: {{ $t.leaf }}
whole: {{- toYaml $s.list | nindent 2 }}
{{- with .ctx.Values.c }}{{ toYaml . }}{{ end }}
{{- range $k, $v := $.Values.d }}{{ $k }}: {{ $v }}{{ end }}
{{- $p := index .Values.e .Values.f }}{{ $p.x }}
literal: {{ "{{ .Values.g }}" }} {{ `.Values.h` }} {{ printf "%s" 'x' }}
{{- /* .Values.i in a comment */}}
text .Values.j outside any action
all of b: {{ $s }}
{{- end }}
"""


def test_what_a_template_reads() -> None:
    assert chart_usage.template_reads(TEMPLATE) == {
        ("a", "enabled"),
        ("b", "name"),
        ("b", "inner", "leaf"),
        ("b", "list"),
        ("b",),
        ("c",),
        ("d",),
        ("e",),
        ("f",),
    }


def test_a_variable_for_a_section_reads_nothing_until_used() -> None:
    assert chart_usage.template_reads("{{- $s := .Values.b }}{{ $s.name }}") == {("b", "name")}


VALUES = {
    "a": {"enabled": True, "size": 1},
    "free": {"x": {"y": 1}},
    "gone": {"x": 1, "y": {"z": 2}},
    "labels": {},
    "list": [],
}


@pytest.mark.parametrize(
    ("reads", "unused"),
    [
        # a section read whole uses every key under it; a list is read as one
        (
            {("a", "enabled"), ("a", "size"), ("free",), ("gone",), ("labels",), ("list",)},
            [],
        ),
        # a key read into (an entry of a free-form map) is used
        (
            {("a",), ("free",), ("gone",), ("labels", "team"), ("list",)},
            [],
        ),
        # a section read into is checked key by key; an unread one is reported once
        (
            {("a", "enabled"), ("free", "x", "y"), ("labels",), ("list",)},
            [("a", "size"), ("gone",)],
        ),
        # a template that reads .Values whole uses everything
        ({()}, []),
    ],
    ids=["whole", "into-a-leaf", "key-by-key", "values-whole"],
)
def test_which_values_are_unused(reads: set[tuple[str, ...]], unused: list) -> None:
    assert chart_usage.unused_values(VALUES, reads) == unused


@pytest.fixture
def fixture_chart(tmp_path: Path) -> Path:
    """A checkout whose chart reads every value but `replicas`."""
    templates = tmp_path / chart_usage.TEMPLATES
    (templates / "tests").mkdir(parents=True)
    (templates / "_helpers.tpl").write_text(
        '{{- define "x.image" }}{{ .Values.image.tag }}{{- end }}\n'
    )
    (templates / "tests" / "pod.yaml").write_text("{{ toYaml .Values.podLabels }}\n")
    (templates / "NOTES.txt").write_text("{{ .Values.image.repository }}\n")
    return tmp_path


FIXTURE_VALUES = {"image": {"repository": "x", "tag": ""}, "podLabels": {}, "replicas": 1}


def test_a_fixture_chart_with_an_unused_value_fails(fixture_chart: Path) -> None:
    assert chart_usage.problems(fixture_chart, FIXTURE_VALUES) == [
        f"{chart_values.VALUES}: replicas is read by no template under {chart_usage.TEMPLATES}:"
        " use it there, or remove it"
    ]


def test_a_fixture_chart_whose_values_are_all_read_passes(fixture_chart: Path) -> None:
    (fixture_chart / chart_usage.TEMPLATES / "deployment.yaml").write_text(
        "replicas: {{ .Values.replicas }}\n"
    )
    assert chart_usage.problems(fixture_chart, FIXTURE_VALUES) == []


def test_every_value_of_the_chart_is_read() -> None:
    values = chart_values.read_values(ROOT).values
    assert chart_usage.problems(ROOT, values) == []


@pytest.mark.parametrize(
    ("template", "old", "unused"),
    [
        (
            "deployment.yaml",
            "      {{- with .Values.priorityClassName }}\n"
            "      priorityClassName: {{ . }}\n"
            "      {{- end }}\n",
            "priorityClassName",
        ),
        # read through `$sm := .Values.metrics.serviceMonitor`: the section is
        # checked key by key
        (
            "servicemonitor.yaml",
            "      {{- with $sm.interval }}\n      interval: {{ . }}\n      {{- end }}\n",
            "metrics.serviceMonitor.interval",
        ),
    ],
    ids=["direct", "through-a-variable"],
)
def test_the_check_fails_when_a_template_stops_reading_a_value(
    copy: Path, template: str, old: str, unused: str
) -> None:
    path = copy / chart_usage.TEMPLATES / template
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, ""))
    assert chartdoc.check(copy) == [
        f"{chart_values.VALUES}: {unused} is read by no template under {chart_usage.TEMPLATES}:"
        " use it there, or remove it"
    ]
