"""Session-wide rules every test run follows, local or CI."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from dlk8s_dev.localcluster import leftover_processes
from dlk8s_dev.stopping import interrupt_on_termination

IN_CI = os.environ.get("CI", "").lower() == "true"


# The folders of tests/e2e, each run whole by one process under `make test`
# (pytest -n 4 --dist loadgroup): a folder's session clusters are shared by
# its modules, and the four processes wait on different things at once.
# training/ and realnode/ run on a session's real node (a minute and about
# 40 CPU-seconds to start, once per process that asks for one: a module that
# needs it belongs in one of these two); kinds/ and operator/ on kwok. The
# modules that start clusters of their own (the demo, a release, Kueue,
# `make cluster`'s stops) fill up the shorter folders. The unit tests go
# wherever there is room, one by one.
#
# The suite is bound by its CPU: a process whose tests wait (for a pod to
# start, a lease to expire) leaves a core idle unless another has work. The
# folders are balanced on the modules' times in CI's JUnit report (run 44:
# the real node's jobs that train 1,275 s in one process, the other three
# 630 to 884 s; moving the demo and MXNet/Caffe2's training out of the first
# evens them; run 49: training/ 825 s of a run of 839 s, realnode/ 379 s,
# so the tenants' isolation, 74 s, went to realnode/). -n 5 (run 29) took
# longer and more CPU than -n 4: more clusters alive at once, each costing
# CPU while it lives.
E2E_FOLDERS = ("training", "realnode", "kinds", "operator")


def scope_of(nodeid: str) -> str:
    """What one process runs whole: an end-to-end test's folder; any other
    test is a scope of its own."""
    parts = nodeid.split("::", 1)[0].split("/")
    if parts[:2] != ["tests", "e2e"]:
        return nodeid
    return parts[2] if len(parts) > 3 else "e2e"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`, one process per folder of tests/e2e.

    pytest-xdist's own loadgroup reads xdist_group markers through the
    item's `_nodeid`, which pytest 9 no longer has: every test went to
    whichever process was free, and modules of one folder ran side by side.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FolderScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return FolderScheduling(config, log)


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
