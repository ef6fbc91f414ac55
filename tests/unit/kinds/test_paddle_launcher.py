"""The command every PaddleJob pod runs, run here by a real `sh`.

EDL's images carried paddle_k8s; no image since does. The launcher runs it
where it is, and otherwise ENTRY in TRAINER_PACKAGE (see
dlk8s.job.kinds.paddle_pods.LAUNCHER).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dlk8s.job.kinds.paddle_pods import LAUNCHER


def launch(tmp_path: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The host's PATH has no paddle_k8s; a test that wants one puts it in bin.
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    return subprocess.run(
        ["sh", "-c", LAUNCHER, "paddle_k8s", *arguments],
        env={"PATH": path, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_an_image_with_edls_launcher_runs_it_with_edls_arguments(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "paddle_k8s"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\necho "edl: $*"\n')
    script.chmod(0o755)
    done = launch(tmp_path, "start_trainer", "v2", ENTRY="echo entry", TRAINER_PACKAGE="/")
    assert (done.returncode, done.stdout) == (0, "edl: start_trainer v2\n")


def test_without_it_entry_runs_in_the_trainer_package(tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    entry = 'echo "$PADDLE_TRAINING_ROLE in $(pwd)"; exit 3'
    done = launch(
        tmp_path,
        "start_new_pserver",
        ENTRY=entry,
        TRAINER_PACKAGE=str(package),
        PADDLE_TRAINING_ROLE="PSERVER",
    )
    # ENTRY's exit code is the container's: it decides the pod's outcome.
    assert (done.returncode, done.stdout) == (3, f"PSERVER in {package}\n")


@pytest.mark.parametrize("package", ["", None])
def test_without_a_workspace_entry_runs_where_the_image_starts(
    tmp_path: Path, package: str | None
) -> None:
    env = {"ENTRY": "pwd"} | ({} if package is None else {"TRAINER_PACKAGE": package})
    done = launch(tmp_path, "start_master", **env)
    assert (done.returncode, done.stdout) == (0, f"{tmp_path}\n")


def test_a_missing_trainer_package_fails_the_pod_saying_so(tmp_path: Path) -> None:
    done = launch(tmp_path, "start_new_trainer", ENTRY="echo ran", TRAINER_PACKAGE="/nowhere")
    assert done.returncode != 0
    assert done.stdout == ""
    assert "/nowhere" in done.stderr
