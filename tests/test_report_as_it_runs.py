"""``benchmarks/report_as_it_runs.py``: a device call cut at its limit still says what failed and why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_each_outcome_is_written_when_its_test_ends(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    report = pytester.path / "report.txt"
    monkeypatch.setenv("CUDAL1_TEST_REPORT", str(report))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BENCHMARKS), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_cut='''
        import os, pytest

        def test_passes():
            pass

        def test_fails():
            assert 1 == 2, "the reason"

        @pytest.mark.skip(reason="not here")
        def test_skipped():
            pass

        def test_is_cut():
            os._exit(9)  # the device call's limit: pytest never reaches its summary
    ''')
    result = pytester.runpytest_subprocess("-p", "report_as_it_runs", "-p", "no:randomly", "-p", "no:cacheprovider",
                                           "test_cut.py")
    assert result.ret == 9 and "short test summary" not in result.stdout.str()
    text = report.read_text()
    assert "PASSED test_cut.py::test_passes (call" in text
    assert "FAILED test_cut.py::test_fails (call" in text and "AssertionError: the reason" in text
    assert "SKIPPED test_cut.py::test_skipped (setup" in text
