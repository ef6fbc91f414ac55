"""The chart repeats nothing by hand: what it holds twice is generated, and stays so.

tools/chartdoc.py (`make chart-generate`) writes templates/crds.yaml from the
repository's crds/, and the values schema and the docs values table from
values.yaml. These tests fail when a generated file is stale, when a value has
no comment, or when a symlink is back under charts/ (GitOps tools that fetch a
chart from git drop symlinks); the second half shows on altered copies that
each check can fail. test_chart_schema.py and test_chart_usage.py test the
schema's generation and the lint for unused values.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import chart_values
import chartdoc
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
HELM = ROOT / ".tools" / "bin" / "helm4"


@pytest.fixture(scope="module")
def generated() -> dict[Path, str]:
    files, problems = chartdoc.expected(ROOT)
    assert problems == []
    return files


# --- the checkout ------------------------------------------------------------


def test_crd_template_is_generated_from_crds(generated: dict[Path, str]) -> None:
    current = (ROOT / chartdoc.CRD_TEMPLATE).read_text()
    assert current == generated[chartdoc.CRD_TEMPLATE], "run `make chart-generate`"


def test_schema_is_generated_from_values(generated: dict[Path, str]) -> None:
    current = (ROOT / chartdoc.SCHEMA).read_text()
    assert current == generated[chartdoc.SCHEMA], "run `make chart-generate`"


def test_docs_values_table_is_generated_from_values(generated: dict[Path, str]) -> None:
    current = (ROOT / chartdoc.DOCS).read_text()
    assert current == generated[chartdoc.DOCS], "run `make chart-generate`"


def test_every_value_has_a_comment() -> None:
    values = chart_values.read_values(ROOT)
    rows, problems = chart_values.rows(values)
    assert values.problems + problems == []
    documented = {row.name for row in rows if not row.section}
    assert {"cloud", "crds.install", "crds.keep", "operator.leaderElection.enabled"} <= documented


def test_no_symlink_under_charts() -> None:
    links = [
        os.path.join(folder, name)
        for folder, dirs, files in os.walk(ROOT / "charts")
        for name in dirs + files
        if os.path.islink(os.path.join(folder, name))
    ]
    assert links == []


def test_check_passes_on_the_checkout() -> None:
    assert chartdoc.check(ROOT) == []


def _helm_crds(chart: Path, *args: str) -> dict[str, dict]:
    if not HELM.exists():
        pytest.skip(f"{HELM} missing: run `make tools`")
    out = subprocess.run(
        [str(HELM), "template", "dlk8s", str(chart), "--show-only", "templates/crds.yaml", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(out) if doc}


def _without_release_metadata(crd: dict) -> dict:
    crd = json.loads(json.dumps(crd))
    for key in ("labels", "annotations"):
        crd["metadata"].pop(key, None)
    return crd


def _sources(root: Path) -> dict[str, dict]:
    return {
        crd["metadata"]["name"]: crd
        for crd in (yaml.safe_load(p.read_text()) for p in sorted((root / "crds").glob("*.yaml")))
    }


def test_chart_renders_the_crds_of_crds_dir() -> None:
    rendered = _helm_crds(ROOT / "charts" / "dlk8s")
    sources = _sources(ROOT)
    assert sorted(rendered) == sorted(sources)
    for name, crd in rendered.items():
        assert _without_release_metadata(crd) == _without_release_metadata(sources[name])
        source_labels = sources[name]["metadata"].get("labels", {})
        assert source_labels.items() <= crd["metadata"]["labels"].items()
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


# --- altered copies: each check can fail -------------------------------------


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def _stale(path: str) -> str:
    """What the check says of a generated file that its sources no longer make."""
    return f"{path}: differs from its sources; run `make chart-generate`"


def test_check_fails_when_a_crd_changes(copy: Path) -> None:
    _edit(copy / "crds/tfjobs.dlk8s.io.yaml", "shortNames: [tfj]", "shortNames: [tfj, tfjx]")
    assert chartdoc.check(copy) == [_stale(chartdoc.CRD_TEMPLATE)]


def test_check_fails_when_a_crd_is_added(copy: Path) -> None:
    shutil.copy(copy / "crds/tfjobs.dlk8s.io.yaml", copy / "crds/zzz.dlk8s.io.yaml")
    assert chartdoc.check(copy) == [_stale(chartdoc.CRD_TEMPLATE)]


def test_check_fails_when_the_crd_template_is_edited(copy: Path) -> None:
    _edit(copy / chartdoc.CRD_TEMPLATE, "shortNames: [tfj]", "shortNames: [tfjob]")
    assert len(chartdoc.check(copy)) == 1


@pytest.mark.parametrize(
    ("value", "description"),
    [
        # one values.yaml's comment gives, edited; one on a key values.yaml lacks
        ("cloud", "written by hand"),
        ("global", "no comment in values.yaml says this"),
    ],
    ids=["edited", "added"],
)
def test_check_fails_when_a_schema_description_is_edited(
    copy: Path, value: str, description: str
) -> None:
    schema_path = copy / chartdoc.SCHEMA
    schema = json.loads(schema_path.read_text())
    schema["properties"][value]["description"] = description
    schema_path.write_text(chartdoc.dump_json(schema))
    assert chartdoc.check(copy) == [_stale(chartdoc.SCHEMA)]


def test_check_fails_when_the_docs_table_is_edited(copy: Path) -> None:
    _edit(copy / chartdoc.DOCS, "| `replicaCount` | `1` |", "| `replicaCount` | `2` |")
    assert chartdoc.check(copy) == [_stale(chartdoc.DOCS)]


def test_check_fails_when_the_docs_lose_the_table_markers(copy: Path) -> None:
    _edit(copy / chartdoc.DOCS, chartdoc.TABLE_END, "")
    problems = chartdoc.check(copy)
    assert any("no values table markers" in p for p in problems), problems


def test_check_fails_when_a_value_has_no_comment(copy: Path) -> None:
    _edit(copy / chart_values.VALUES, "# -- Priority class of the operator pods.\n", "")
    problems = chartdoc.check(copy)
    assert f"{chart_values.VALUES}: priorityClassName has no `# --` comment" in problems[0]


def test_check_fails_on_a_new_value_without_comment_or_template(copy: Path) -> None:
    _edit(copy / chart_values.VALUES, "  logLevel: info\n", "  logLevel: info\n  burst: 4\n")
    problems = chartdoc.check(copy)
    assert any("operator.burst has no `# --` comment" in p for p in problems), problems
    assert any("operator.burst is read by no template" in p for p in problems), problems
    assert _stale(chartdoc.SCHEMA) in problems


def test_check_fails_on_a_symlink_in_the_chart(copy: Path) -> None:
    (copy / "charts/dlk8s/files/crds").symlink_to(copy / "crds")
    problems = chartdoc.check(copy)
    assert problems == [
        "charts/dlk8s/files/crds: a symlink in the chart (GitOps tools that fetch charts from git"
        " drop symlinks)"
    ]


def test_generate_carries_a_comment_into_schema_and_docs(copy: Path) -> None:
    _edit(
        copy / chart_values.VALUES,
        "# -- Priority class of the operator pods.",
        "# -- Priority class of the operator pods, e.g. `system-cluster-critical`.\n"
        "# @default -- none",
    )
    assert len(chartdoc.check(copy)) == 3  # the schema, the docs and the chart README are stale
    assert chartdoc.generate(copy) == []
    assert chartdoc.check(copy) == []
    schema = json.loads((copy / chartdoc.SCHEMA).read_text())
    assert schema["properties"]["priorityClassName"]["description"] == (
        "Priority class of the operator pods, e.g. `system-cluster-critical`."
    )
    assert (
        "| `priorityClassName` | none | Priority class of the operator pods, e.g."
        " `system-cluster-critical`. |"
    ) in (copy / chartdoc.DOCS).read_text()


def test_generated_crd_template_carries_backquotes_and_braces_verbatim(copy: Path) -> None:
    tricky = 'Runs `{{ .Values.x }}` as | text, with \\ and "quotes".'
    _edit(
        copy / "crds/tfjobs.dlk8s.io.yaml",
        "categories: [dlk8s]",
        f"categories: [dlk8s, {json.dumps(tricky)}]",
    )
    assert chartdoc.generate(copy) == []
    rendered = _helm_crds(copy / "charts" / "dlk8s", "--set", "crds.keep=false")
    tfjob = rendered["tfjobs.dlk8s.io"]
    assert tricky in tfjob["spec"]["names"]["categories"]
    assert "annotations" not in tfjob["metadata"]
    assert _without_release_metadata(tfjob) == _without_release_metadata(
        _sources(copy)["tfjobs.dlk8s.io"]
    )


def test_chart_alone_renders_the_crds(tmp_path: Path) -> None:
    """What a GitOps tool fetches: the chart's folder alone, without crds/ beside it."""
    shutil.copytree(ROOT / "charts" / "dlk8s", tmp_path / "dlk8s", symlinks=True)
    rendered = _helm_crds(tmp_path / "dlk8s")
    assert sorted(rendered) == sorted(_sources(ROOT))


def test_a_new_version_reaches_the_chart_and_a_stale_one_fails(copy: Path) -> None:
    (copy / chartdoc.VERSION).write_text("0.2.0\n")
    assert any("Chart.yaml" in p for p in chartdoc.check(copy))
    chartdoc.generate(copy)
    chart = yaml.safe_load((copy / chartdoc.CHART_YAML).read_text())
    assert (chart["version"], chart["appVersion"]) == ("0.2.0", "0.2.0")
    assert chartdoc.check(copy) == []
    (copy / chartdoc.VERSION).write_text("latest\n")
    assert any("not a semantic version" in p for p in chartdoc.check(copy))


def test_the_chart_readme_carries_the_values_table(copy: Path) -> None:
    readme = copy / chartdoc.CHART_README
    _edit(readme, "| `cloud` |", "| `cloudy` |")
    assert any("README.md" in p for p in chartdoc.check(copy))
