"""The timing-quality benchmark runs its CPU paths: the script behind issue 4's committed GPU numbers broke
once without a test noticing (its overhead section timed before any placement existed)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "timing_quality.py"
PROBLEMS = ROOT.parent / "shared" / "kernelbench" / "problems.jsonl"


@pytest.fixture(scope="module")
def timing_quality():
    spec = importlib.util.spec_from_file_location("timing_quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not PROBLEMS.exists(), reason="needs ../shared/kernelbench/problems.jsonl")
def test_overhead_section_runs_as_a_script(tmp_path: Path) -> None:
    out = tmp_path / "tq.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--tasks", str(PROBLEMS), "--out", str(out), "--only",
                           "overhead"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    overhead = json.loads(out.read_text())["overhead"]
    assert "error" not in overhead, overhead
    assert overhead["clock"] == "perf_counter"
    assert 0 < overhead["timed_call_ms"] < overhead["controller_wall_ms_per_sample"]


@pytest.mark.parametrize("judged", [False, True], ids=["one_pair", "judged"])
def test_precision_times_one_kernel_ten_times(timing_quality, tmp_path: Path, monkeypatch, judged: bool) -> None:
    monkeypatch.setattr(timing_quality, "PRECISION_KERNELS", (("tiny", "torch.randn(1 << 12)", "x + 1.0", False),))
    saved: list[int] = []
    rows = timing_quality.precision(tmp_path, pairs=5, eager_too=False, judged=judged, processes=2,
                                    saved=lambda rows: saved.append(len(rows[0]["runs"])))
    (row,) = rows
    assert saved == list(range(1, 11))  # saved after every measurement
    assert len(row["medians_ms"]) == 10 and all(m > 0 for m in row["medians_ms"])
    assert row["spread"] == pytest.approx((max(row["medians_ms"]) - min(row["medians_ms"])) / row["median_ms"])
    assert 0 <= row["intervals_holding_1"] <= 10
    assert row["processes"] == (2 if judged else 1)
    if judged:  # the judge's phases and the pooled method say how each judgment ran
        assert all("timing" in run["phase_s"] for run in row["runs"])
        assert "in 2 worker-process pairs" in row["runs"][0]["method"]
