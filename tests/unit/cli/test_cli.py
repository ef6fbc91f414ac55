"""The command line: flags work where the docs say, and every flag is documented."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from dlk8s.cli import main

README = Path(__file__).resolve().parents[3] / "README.md"


def run_flags() -> dict[str, str]:
    """Every long option of `dlk8s-operator run` (global ones included) and its help."""
    root = main.build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return {
        option: action.help or ""
        for action in sub.choices["run"]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-level", "debug", "--kubeconfig", "/k", "run"],
        ["run", "--log-level", "debug", "--kubeconfig", "/k"],
    ],
)
def test_global_flags_work_before_and_after_the_command(argv: list[str]) -> None:
    args = main.parse_args(argv)
    assert (args.log_level, args.kubeconfig) == ("debug", "/k")


def test_leader_elect_takes_no_value_or_a_boolean() -> None:
    assert main.parse_args(["run", "--leader-elect"]).leader_elect is True
    assert main.parse_args(["run", "--leader-elect", "false"]).leader_elect is False
    assert main.parse_args(["run", "--leader-elect=true"]).leader_elect is True


def test_every_run_flag_has_help_and_a_row_in_the_readme() -> None:
    flags = run_flags()
    assert "--workers" in flags
    assert [f for f, text in flags.items() if not text.strip()] == []
    rows = [
        line.split("|")[1] for line in README.read_text().splitlines() if line.startswith("| `--")
    ]
    documented = {flag for cell in rows for flag in re.findall(r"`(--[a-z-]+)`", cell)}
    assert sorted(set(flags) - documented) == []
