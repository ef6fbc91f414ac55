"""Session-wide rules every test run follows, local or CI."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from dlk8s_dev.localcluster import leftover_processes
from dlk8s_dev.stopping import interrupt_on_termination

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`, the groups of tests/groups.py (see why there)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    from .groups import scope_of

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return GroupScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP (a CI runner's timeout, a closed terminal) stop the
    session as Ctrl-C does, so the fixtures' teardown stops every cluster and
    removes what it made (in each xdist worker too: a signal to the process
    group reaches them all)."""
    interrupt_on_termination()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator:
    """Under CI=true a skip is a failure: a skipped check is a missing check."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI=true, which counts as a failure: {reason}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing a test started may outlive the session."""
    leftovers = leftover_processes()
    if leftovers:
        for pid, cmd in leftovers:
            print(f"\nleft running after the session: pid {pid}: {cmd[:200]}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    startup = os.environ.get("DLK8S_CLUSTER_STARTUP_SECONDS")
    if startup:
        terminalreporter.write_line(f"local control plane start-up: {startup}s")
