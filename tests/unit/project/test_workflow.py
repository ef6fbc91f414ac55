"""The hosting service's workflow: it lints clean, the lint can fail, and it
runs only make targets that are tested here.

actionlint (pinned in tools/versions.env) runs with the flags `make lint`
gives it, read from the Makefile, on the repository's workflows and on a
broken copy of them, which it must refuse.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONS = ROOT / ".github" / "actions"
# The make targets the workflow may call, and what tests each here.
TESTED_TARGETS: dict[str, Path | None] = {
    "test": None,  # the suite itself: what every change passes
    "publish": ROOT / "tests" / "e2e" / "realnode" / "test_publish.py",
}
MAKEFILES = [ROOT / "Makefile", *sorted(ROOT.glob("*/*.mk"))]
# Commands a run step may call besides make: the runner's set-up, before
# the tool chain exists.
SETUP_COMMANDS = {"apt-get", "git"}


def actionlint(cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = ROOT / ".tools" / "bin" / "actionlint"
    if not tool.exists():
        pytest.skip("actionlint missing: `make tools` builds it into .tools/bin")
    line = re.search(r"^ACTIONLINT := \$\(TOOLS_BIN\)/actionlint(.*)$", _makefile(), re.M)
    assert line, "the Makefile defines ACTIONLINT"
    argv = [str(tool), *shlex.split(line.group(1))]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def _makefile() -> str:
    return (ROOT / "Makefile").read_text()


def workflows() -> dict[str, dict[str, Any]]:
    found = {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.y*ml"))}
    assert found, "no workflow in .github/workflows"
    return found


def run_steps() -> list[str]:
    """The script of every run step, in the workflows and in the local actions."""
    steps = [
        step
        for flow in workflows().values()
        for job in flow["jobs"].values()
        for step in job.get("steps", [])
    ]
    for action in sorted(ACTIONS.glob("*/action.y*ml")):
        steps += yaml.safe_load(action.read_text())["runs"].get("steps", [])
    return [str(step["run"]) for step in steps if "run" in step]


def commands(script: str) -> list[list[str]]:
    """Each command of a shell script, as words (continued lines joined)."""
    joined = script.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


def test_actionlint_passes_on_the_workflows() -> None:
    done = actionlint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_fails_on_a_broken_workflow(tmp_path: Path) -> None:
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    # Git marks the project's root for actionlint.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    flow = tmp_path / ".github" / "workflows" / "ci.yml"
    text = flow.read_text()
    assert "needs: test\n" in text
    flow.write_text(text.replace("needs: test\n", "needs: tests\n"))
    done = actionlint(tmp_path)
    assert done.returncode != 0
    assert '"tests"' in done.stdout


def test_the_workflow_calls_only_make_targets_tested_here() -> None:
    called = []
    for script in run_steps():
        for words in commands(script):
            if words[0] == "make":
                targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
                called += targets
                assert set(targets) <= set(TESTED_TARGETS), words
            else:
                assert words[0] in SETUP_COMMANDS, f"not a make target: {words}"
    assert sorted(set(called)) == sorted(TESTED_TARGETS)
    for target, tested_by in TESTED_TARGETS.items():
        assert any(re.search(rf"^{target}:", m.read_text(), re.M) for m in MAKEFILES), target
        # The test runs the target itself: make's argv names it.
        assert tested_by is None or f'"{target}"' in tested_by.read_text()


def test_make_test_runs_on_pull_requests_and_make_publish_only_on_version_tags() -> None:
    flow = workflows()["ci.yml"]
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in on
    assert on["push"]["tags"] == ["v*"]
    jobs = flow["jobs"]
    runs = {name: " ".join(str(s.get("run", "")) for s in j["steps"]) for name, j in jobs.items()}
    assert "make test" in runs["test"]
    assert "make publish" in runs["publish"]
    assert "refs/tags/v" in jobs["publish"]["if"]
    assert jobs["publish"]["needs"] == "test"
    # The login comes from the repository's secrets, never from the file.
    assert "secrets." in jobs["publish"]["env"]["REGISTRY_PASSWORD"]
