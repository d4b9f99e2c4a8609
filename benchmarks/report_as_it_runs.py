"""A pytest plugin for device calls that may be cut short: each test's outcome, duration and (for a
failure) its report are appended to ``$CUDAL1_TEST_REPORT`` the moment it ends, so a run killed at
the call's limit still says which tests failed and why (pytest's summary comes only at the end).

    CUDAL1_TEST_REPORT=tests-report.txt python3 -m pytest -p report_as_it_runs ...   # benchmarks/ on sys.path
"""

from __future__ import annotations

import os

import pytest


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("CUDAL1_TEST_REPORT")
    if not path or (report.when != "call" and report.passed):
        return
    outcome = "SKIPPED" if report.skipped else "FAILED" if report.failed else "PASSED"
    lines = [f"{outcome} {report.nodeid} ({report.when}, {report.duration:.1f} s)"]
    if report.failed:
        lines += [report.longreprtext, "-" * 80]
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
