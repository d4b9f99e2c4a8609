"""``--cudal1-no-kernel-list``: the profiled call after timing is skipped (issue 18: it cost ~5.7 s a candidate).

The profiler's first use in a process loads CUPTI (5.6–5.8 s on the H200, a second use 5 ms), and every
candidate is a fresh process, so the kernel listing is the largest fixed cost of judging there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cudal1_helpers import FAST, read_ledger, run_pytest, write_candidate, write_task


def test_skipping_the_kernel_list_cannot_go_with_custom_kernels_only(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--cudal1", "--cudal1-no-kernel-list", "--cudal1-custom-kernels-only",
                                           "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--cudal1-custom-kernels-only needs the kernel listing" in result.stderr.str()


@pytest.mark.gpu
def test_the_kernel_list_is_there_by_default_and_empty_when_skipped(tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    write_task(tmp_path / "tasks", 1, "1_relu")
    write_candidate(tmp_path / "cands", 1, "1_relu", "fast")
    kernels = {}
    for name, extra in (("listed", ()), ("skipped", ("--cudal1-no-kernel-list",))):
        ledger = tmp_path / f"{name}.jsonl"
        result = run_pytest(tmp_path, *FAST, *extra, f"--cudal1-tasks={tmp_path / 'tasks'}",
                            f"--cudal1-candidates={tmp_path / 'cands'}", f"--cudal1-ledger={ledger}",
                            f"--cudal1-cache-dir={tmp_path / 'cache'}")
        (record,) = read_ledger(ledger)
        assert record["verdict"]["reason"] == "OK", result.stdout.str()
        kernels[name] = (record["kernels"], "profile" in record["phase_s"])
    assert kernels["listed"][0] and not kernels["skipped"][0], kernels
