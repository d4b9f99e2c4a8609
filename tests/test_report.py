"""The HTML report (issue 5): statistics, merging, the page's figures, and the page in a real browser.

The figures are checked by parsing the page (``html.parser``) and comparing with
values computed here, independently, from the ledgers the test wrote.
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from report_helpers import A100, ENV, H200, close, num, parse, rec

from pytest_cudal1 import ledger, report
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord

# A cheat code when this checkout has the anti-cheat codes, else the brief's stand-in.
CHEAT = Reason.__members__.get("GLOBAL_STATE_MODIFIED", Reason.WRONG_OUTPUT)
CHEAT2 = Reason.__members__.get("TIMER_MISMATCH", Reason.RUNTIME_ERROR)
# Written out again here, not imported, so the test checks the report's classification.
HONEST = {"BAD_TASK", "BAD_CANDIDATE_FILE", "NO_CODE", "REFERENCE_ERROR", "SYNTAX_ERROR", "IMPORT_ERROR", "COMPILE_ERROR",
          "COMPILE_TIMEOUT", "NO_MODELNEW", "INIT_ERROR", "RUNTIME_ERROR", "CUDA_ERROR", "OUT_OF_MEMORY", "TIMEOUT",
          "CRASH", "EARLY_EXIT", "PROTOCOL_VIOLATION", "STRUCTURE_MISMATCH", "SHAPE_MISMATCH", "DTYPE_MISMATCH",
          "DEVICE_MISMATCH", "NONFINITE_MISMATCH", "WRONG_OUTPUT", "NONDETERMINISTIC"}

# ------------------------------------------------------------ test data ---

MISMATCH = {"where": "output[0]", "index": [3, 17], "got": 0.25, "expected": -0.01, "max_abs_err": 0.26,
            "max_rel_err": 9.1, "n_bad": 512, "numel": 4096, "rtol": 1e-4, "recipe": "normal(0, 1), shape (16, 256)"}
CLOCKS = {"before": {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "temperature_c": 41, "power_w": 120.5,
                     "clock_event_reasons": []},
          "after": {"sm_clock_mhz": 1755, "mem_clock_mhz": 2619, "temperature_c": 66, "power_w": 610.0,
                    "clock_event_reasons": ["sw_thermal_slowdown"]}}
SETTING = {"setting": "torch.backends.cuda.matmul.allow_tf32",
           "before": {"allow_tf32": False, "cudnn.allow_tf32": True},
           "after": {"allow_tf32": True, "cudnn.allow_tf32": True}}


def h200_records() -> list[JudgedRecord]:
    return [
        rec(H200, "L1/1_ReLU", "torch_fast", speedup=1.10, backend="torch", when="2025-05-30T09:00:00+00:00"),  # superseded
        rec(H200, "L1/1_ReLU", "torch_fast", speedup=1.80, backend="torch", when="2025-06-01T10:00:00+00:00"),
        rec(H200, "L1/1_ReLU", "triton_kernel", speedup=2.60, kernels=["relu_kernel"]),
        rec(H200, "L1/1_ReLU", "wrong_leaky", Reason.WRONG_OUTPUT, backend="torch", evidence=MISMATCH,
            message="output[0]: 512 of 4096 elements beyond tolerance"),
        rec(H200, "L1/1_ReLU", "numba_cuda", Reason.BACKEND_UNAVAILABLE, backend="numba"),
        rec(H200, "L1/2_GELU_tanh", "triton_kernel", speedup=1.20, kernels=["gelu_fwd", "gelu_tail"]),
        rec(H200, "L1/2_GELU_tanh", "cuda_inline", Reason.CRASH, backend="cuda",
            evidence={"signal": 11, "log_tail": "Segmentation fault\n<core dumped> & more"}),
        rec(H200, "L1/3_Softmax_rows", "wrong_shape", Reason.SHAPE_MISMATCH, backend="torch",
            evidence={"where": "output", "shape": [128], "expected_shape": [128, 64]}),
        rec(H200, "L1/3_Softmax_rows", "triton_kernel", CHEAT, evidence=SETTING,
            message="a process-wide setting changed: allow_tf32"),
        rec(H200, "L2/1_Linear_Bias_ReLU_Scale", "torch_fast", speedup=0.90, backend="torch"),
        rec(H200, "L2/1_Linear_Bias_ReLU_Scale", "triton_kernel", speedup=1.55, ref_ms=2.5,
            gpu_state=CLOCKS, warnings=["candidate reported 0.1 ms per call but the controller saw 0.4 ms"]),
        rec(H200, "L3/1_MLP", "triton_kernel", speedup=3.10, ref_ms=4.0, kernels=["mlp_fused"]),
        rec(H200, "L3/1_MLP", "cuda_inline", CHEAT2, backend="cuda", speedup=40.0,
            evidence={"reported_ms": 0.01, "wall_ms": 0.4, "pair": 3}),
        rec(H200, "L3/1_MLP", "<img src=x onerror=alert(1)>", Reason.COMPILE_ERROR, backend="cpp",
            evidence={"log_tail": "error: expected ';' <script>alert(2)</script>"}),
    ]


def a100_records() -> list[JudgedRecord]:
    return [
        rec(A100, "L1/1_ReLU", "torch_fast", speedup=1.50, backend="torch"),
        rec(A100, "L1/1_ReLU", "triton_kernel", speedup=1.90, kernels=["relu_kernel"]),
        rec(A100, "L1/1_ReLU", "wrong_leaky", Reason.WRONG_OUTPUT, backend="torch", evidence=MISMATCH),
        rec(A100, "L1/2_GELU_tanh", "triton_kernel", speedup=1.05),
        rec(A100, "L1/2_GELU_tanh", "cuda_inline", speedup=1.40, backend="cuda"),
        rec(A100, "L1/3_Softmax_rows", "triton_kernel", Reason.TIMEOUT, evidence={"timeout_s": 60}),
        rec(A100, "L2/1_Linear_Bias_ReLU_Scale", "torch_fast", speedup=1.00, backend="torch"),  # not > 1
        rec(A100, "L2/1_Linear_Bias_ReLU_Scale", "triton_kernel", speedup=1.50, ref_ms=3.0),  # not > 1.5
    ]


def cpu_records() -> list[JudgedRecord]:
    return [rec("cpu", "L1/1_ReLU", "torch_fast", speedup=0.85, backend="torch"),
            rec("cpu", "L1/1_ReLU", "cpp", Reason.RUNTIME_ERROR, backend="cpp", evidence={"traceback": "Traceback\n  boom"})]


@pytest.fixture
def ledgers(tmp_path: Path) -> list[Path]:
    """One ledger per GPU, written the way the plugin writes them."""
    paths = []
    for name, records in (("h200", h200_records()), ("a100", a100_records()), ("cpu", cpu_records())):
        path = tmp_path / "runs" / name / "cudal1-ledger.jsonl"
        for r in records:
            ledger.append(path, r)
        paths.append(path)
    return paths


# ------------------------------------------------ independent expectations ---

def read_all(paths: list[Path]) -> list[JudgedRecord]:
    return [r for p in paths for r in ledger.read(p)]


def gpu_of(r: JudgedRecord) -> str:
    return r.environment.get("gpu") or "cpu"


def dedup(records: list[JudgedRecord]) -> list[JudgedRecord]:
    newest: dict[tuple, JudgedRecord] = {}
    for r in records:
        key = (gpu_of(r), r.task_id, r.candidate_name, r.candidate_sha256)
        if key not in newest or r.judged_at >= newest[key].judged_at:
            newest[key] = r
    return list(newest.values())


def expected(records: list[JudgedRecord], gpu: str, level: int | None = None) -> dict[str, Any]:
    rs = [r for r in dedup(records) if gpu_of(r) == gpu and (level is None or r.level == level)]
    done = [r for r in rs if r.verdict.reason is not Reason.BACKEND_UNAVAILABLE]
    tasks = sorted({r.task_id for r in done})
    best = {}
    for t in tasks:
        speeds = [r.timing.speedup for r in done if r.task_id == t and r.verdict.reason is Reason.OK]
        best[t] = max(speeds) if speeds else None
    speeds = [r.timing.speedup for r in done if r.verdict.reason is Reason.OK]
    rejected: dict[str, int] = {}
    for r in done:
        if r.verdict.reason is not Reason.OK:
            rejected[r.verdict.reason.value] = rejected.get(r.verdict.reason.value, 0) + 1
    out = {
        "tasks_judged": len(tasks), "tasks_correct": sum(b is not None for b in best.values()),
        "candidates_judged": len(done), "candidates_correct": sum(r.verdict.reason is Reason.OK for r in done),
        "mean": statistics.mean(speeds) if speeds else None, "median": statistics.median(speeds) if speeds else None,
        "geomean": statistics.geometric_mean(speeds) if speeds else None,
        "rejected": sum(rejected.values()), "by_reason": rejected,
        "cheats": sum(n for c, n in rejected.items() if c not in HONEST), "skipped": len(rs) - len(done),
        "best": best,
    }
    for p in (0, 1, 1.5, 2):
        out[f"fast_{p:g}"] = sum(1 for b in best.values() if b is not None and (p == 0 or b > p)) / len(tasks)
    return out


# ------------------------------------------------------- unit: statistics ---

def test_gpu_key_status_and_cheat_classification() -> None:
    assert report.gpu_key(rec(H200, "L1/1_ReLU", "a", speedup=1.0)) == H200
    assert report.gpu_key(rec("cpu", "L1/1_ReLU", "a", speedup=1.0)) == "cpu"
    assert report.status(rec(H200, "L1/1_ReLU", "a", speedup=1.0)) == "correct"
    assert report.status(rec(H200, "L1/1_ReLU", "a", Reason.CRASH)) == "rejected"
    assert report.status(rec(H200, "L1/1_ReLU", "a", Reason.BACKEND_UNAVAILABLE)) == "skipped"
    assert report.status(rec(H200, "L1/19_ReLU", "a", Reason.REFERENCE_TOO_LARGE)) == "skipped"  # a harness error
    assert report.status(rec(H200, "L3/33_VanillaRNN", "a", Reason.STATEFUL_REFERENCE)) == "skipped"
    for code in Reason:
        assert report.is_cheat(code.value) == (code.value not in HONEST | {"OK", "BACKEND_UNAVAILABLE",
                                                                           "REFERENCE_TOO_LARGE", "STATEFUL_REFERENCE"})


def test_fast_p_follows_kernelbench() -> None:
    rs = [rec(H200, "L1/1_ReLU", "a", speedup=0.5), rec(H200, "L1/1_ReLU", "b", speedup=2.5),  # best 2.5
          rec(H200, "L1/2_GELU_tanh", "a", speedup=1.5),  # exactly 1.5: not > 1.5
          rec(H200, "L1/3_Softmax_rows", "a", Reason.WRONG_OUTPUT, speedup=9.0),  # fast but wrong
          rec(H200, "L1/4_Sum", "a", speedup=0.8),
          rec(H200, "L1/5_Skip", "a", Reason.BACKEND_UNAVAILABLE)]  # not judged: not a task here
    assert report.fast_p(rs, 0) == 3 / 4
    assert report.fast_p(rs, 1) == 2 / 4
    assert report.fast_p(rs, 1.5) == 1 / 4
    assert report.fast_p(rs, 2) == 1 / 4
    assert report.fast_p(rs, 3) == 0
    assert report.fast_p([], 1) is None


def test_best_correct_and_untimed_correct() -> None:
    a, b = rec(H200, "L1/1_ReLU", "a", speedup=1.2), rec(H200, "L1/1_ReLU", "b", speedup=3.0)
    bad = rec(H200, "L1/1_ReLU", "c", CHEAT, speedup=50.0)
    assert report.best_correct([a, bad, b]) is b
    untimed = rec(H200, "L1/1_ReLU", "d")  # correct, no timing: counts for fast_0 only
    assert report.best_correct([untimed]) is untimed
    assert report.fast_p([untimed], 0) == 1 and report.fast_p([untimed], 1) == 0
    assert report.best_correct([bad]) is None


def test_means_over_correct_candidates() -> None:
    rs = [rec(H200, "L1/1_ReLU", "a", speedup=1.0), rec(H200, "L1/1_ReLU", "b", speedup=4.0),
          rec(H200, "L1/2_GELU_tanh", "a", speedup=2.0), rec(H200, "L1/2_GELU_tanh", "x", Reason.CRASH, speedup=99.0)]
    speeds = report.correct_speedups(rs)
    assert sorted(speeds) == [1.0, 2.0, 4.0]
    assert report.mean(speeds) == pytest.approx(7 / 3)
    assert report.median(speeds) == 2.0
    assert report.geomean(speeds) == pytest.approx(2.0)
    assert report.mean([]) is None and report.median([]) is None and report.geomean([]) is None


def test_rejections_by_reason_most_frequent_first() -> None:
    rs = [rec(H200, "L1/1_ReLU", str(i), r) for i, r in
          enumerate([Reason.CRASH, CHEAT2, Reason.CRASH, Reason.OK, Reason.BACKEND_UNAVAILABLE])]
    assert list(report.rejections_by_reason(rs).items())[0] == ("CRASH", 2)
    assert report.rejections_by_reason(rs) == {"CRASH": 2, CHEAT2.value: 1}


def test_latest_judgement_per_gpu_and_candidate_wins() -> None:
    old = rec(H200, "L1/1_ReLU", "a", speedup=1.0, when="2025-01-01T00:00:00+00:00")
    new = rec(H200, "L1/1_ReLU", "a", speedup=2.0, when="2025-02-01T00:00:00+00:00")
    other_gpu = rec(A100, "L1/1_ReLU", "a", speedup=1.5, when="2024-01-01T00:00:00+00:00")
    edited = rec(H200, "L1/1_ReLU", "a", speedup=3.0, sha="f" * 64, when="2024-01-01T00:00:00+00:00")
    assert report.latest([new, old, other_gpu, edited]) == [new, other_gpu, edited]
    later_z = rec(H200, "L1/1_ReLU", "a", speedup=4.0, when="2025-02-01T00:30:00Z")  # another spelling of UTC
    earlier_tz = rec(H200, "L1/1_ReLU", "a", speedup=5.0, when="2025-02-01T01:00:00+02:00")  # 2025-01-31T23:00Z
    assert report.latest([later_z, earlier_tz]) == [later_z]


def test_histogram_log_bins_and_axis() -> None:
    h = report.histogram([1.0, 1.1, 1.5, 2.0, 0.6])
    assert sum(c for _, _, c in h) == 5
    for lo, hi, _ in h:
        assert hi == pytest.approx(lo * math.sqrt(2))
    assert [c for lo, hi, c in h if lo <= 1.0 < hi] == [2]
    axis = report.LogAxis([0.3, 5.0], 0, 100)
    assert (axis.lo, axis.hi) == (0.25, 8.0)
    assert axis(0.25) == 0 and axis(8.0) == 100 and axis(1.0) == 40


def test_clocks_seen_reads_gpu_state_before_and_after() -> None:
    r = rec(H200, "L1/1_ReLU", "a", speedup=1.0, gpu_state=CLOCKS)
    assert report.clocks_seen([r]) == {"mem_clock_mhz": (2619.0, 2619.0), "sm_clock_mhz": (1755.0, 1980.0)}


def test_read_records_formats(tmp_path: Path) -> None:
    r1, r2 = rec(H200, "L1/1_ReLU", "a", speedup=1.3, kernels=["k1"]), rec(A100, "L1/1_ReLU", "b", Reason.CRASH)
    del r2.environment["commit"]  # the saved run's commit fills in only what a record lacks
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text(json.dumps(r1.to_json()) + "\n" + "not json\n" + json.dumps({"foreign": 1}) + "\n"
                     + json.dumps(r2.to_json()) + "\n" + json.dumps(r1.to_json())[:40])  # torn last line
    got = report.read_records(jsonl)
    assert [(g.candidate_name, g.speedup) for g in got] == [("a", 1.3), ("b", None)]
    assert report.kernels_of(got[0]) == ["k1"]
    bench = tmp_path / "0001_run.json"  # a saved benchmark run whose extra_info holds whole records
    bench.write_text(json.dumps({"commit_info": {"id": "deadbeef0123", "dirty": False}, "benchmarks": [
        {"name": "a", "extra_info": {"cudal1": r1.to_json()}}, {"name": "b", "extra_info": r2.to_json()},
        {"name": "plain", "extra_info": {}}]}))
    got = report.read_records(bench)
    assert [g.candidate_name for g in got] == ["a", "b"]
    assert got[0].environment["commit"] == "abc123def456" and got[1].environment["commit"] == "deadbeef0123"
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([r1.to_json(), r2.to_json()]))
    assert len(report.read_records(listed)) == 2
    assert report.input_files([tmp_path]) == [bench, jsonl, listed]


BENCH_RUN = Path(__file__).parent / "report_fixtures" / "benchmark_run_cpu.json"  # saved by --benchmark-autosave


def test_saved_benchmark_run_becomes_records() -> None:
    """pytest-benchmark saves each judged item as <item>[reference] and <item>[candidate] (benchmark_bridge)."""
    data = json.loads(BENCH_RUN.read_text())
    got = {(r.task_id, r.candidate_name): r for r in report.read_records(BENCH_RUN)}
    by_side = {b["name"]: b for b in data["benchmarks"]}
    items = {b["group"] for b in data["benchmarks"]}
    assert set(got) == {tuple(i.rsplit("::", 1)) for i in items} and len(got) == 6
    for (task, cand), r in got.items():
        ref, can = by_side[f"{task}::{cand}[reference]"], by_side[f"{task}::{cand}[candidate]"]
        assert r.speedup == can["extra_info"]["speedup"]
        assert list(r.timing.speedup_ci) == can["extra_info"]["speedup_ci"]
        assert r.verdict.reason.value == can["extra_info"]["verdict"] and r.backend == can["extra_info"]["backend"]
        assert r.timing.reference.median_ms == pytest.approx(ref["stats"]["median"] * 1e3)
        assert r.timing.candidate.median_ms == pytest.approx(can["stats"]["median"] * 1e3)
        assert r.timing.candidate.calls_per_sample == can["stats"]["iterations"]
        assert (r.level, r.task_name) == (int(task[1]), task.split("/", 1)[1])
        assert report.gpu_key(r) == "cpu" and r.environment["host"] == data["machine_info"]["node"]
        assert r.judged_at == data["datetime"] and r.candidate_sha256 == ""


def test_merge_ledgers_with_a_saved_benchmark_run(ledgers: list[Path], tmp_path: Path) -> None:
    """A run saved on another GPU joins the ledgers as its own column group; a ledger's record wins a tie."""
    data = json.loads(BENCH_RUN.read_text())
    data["machine_info"].update(gpu="NVIDIA L4", gpu_driver="570.86", cuda="12.8")
    l4 = tmp_path / "runs" / "Linux-CPython-3.11-64bit-NVIDIA_L4" / "0001_unversioned.json"
    l4.parent.mkdir()
    l4.write_text(json.dumps(data))
    cpu_again = tmp_path / "cpu-run.json"  # the same CPU run as cpu_records(): the ledger's torch_fast wins
    cpu_again.write_text(BENCH_RUN.read_text())
    out = tmp_path / "merged.html"
    assert report.main([str(out), str(tmp_path / "runs"), str(cpu_again)]) == 0
    doc = parse(out)
    gpus = [r.attrs["data-gpu"] for r in doc.find("table", id="gpu-table").find("tbody").find_all("tr")]
    assert gpus == [A100, H200, "NVIDIA L4", "cpu"]  # by name, the CPU last
    row = doc.find("table", id="gpu-table").find("tr", data_gpu="NVIDIA L4")
    assert row.find("td", data_col="driver").text() == "570.86" and row.find("td", data_col="CUDA").text() == "12.8"
    speeds = {b["group"]: b["extra_info"]["speedup"] for b in data["benchmarks"]}
    table = doc.find("table", id="candidate-table")
    for item, speedup in speeds.items():
        task, cand = item.rsplit("::", 1)
        rows = [tr for tr in table.find("tbody").find_all("tr")
                if (tr.attrs["data-task"], tr.attrs["data-candidate"]) == (task, cand)]
        assert len(rows) == 1  # a saved run has no source hash: it joins the row of the same candidate
        assert num(rows[0].find("td", data_gpu="NVIDIA L4", data_col="speedup").attrs["data-sort"]) == speedup
    # On the CPU, L1/1_ReLU::torch_fast comes from the ledger (it has a source hash), not from the saved run.
    cpu_led = {r.candidate_name: r for r in cpu_records()}
    rows = [tr for tr in table.find("tbody").find_all("tr")
            if (tr.attrs["data-task"], tr.attrs["data-candidate"]) == ("L1/1_ReLU", "torch_fast")]
    cpu_cells = [tr.find("td", data_gpu="cpu", data_col="speedup").attrs["data-sort"] for tr in rows]
    assert [num(c) for c in cpu_cells if c] == [cpu_led["torch_fast"].speedup]
    stats = doc.find("table", id="stats").find("tr", data_gpu="NVIDIA L4", data_scope="all")
    want = [b["extra_info"]["speedup"] for b in data["benchmarks"] if b["name"].endswith("[candidate]")]
    assert num(stats.find("td", data_stat="geomean").attrs["data-value"]) == pytest.approx(statistics.geometric_mean(want))


# ------------------------------------------------------- the page itself ---

def test_report_figures_match_the_ledgers(ledgers: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert report.main([str(out), str(tmp_path / "runs"), "--title", "Nightly <run>"]) == 0
    records = read_all(ledgers)
    latest = dedup(records)
    doc = parse(out)
    gpus = [A100, H200, "cpu"]

    # Self-contained: nothing is fetched; autoescaping holds for hostile names and logs.
    for node in doc.iter():
        for attr in ("src", "href", "xlink:href", "action", "data"):
            v = node.attrs.get(attr)
            assert v is None or v.startswith(("#", "data:")), (node.tag, attr, v)
    assert not doc.find_all("script", src=True) and len(doc.find_all("script")) == 1
    assert not doc.find_all("img")
    assert doc.find("title").text() == "Nightly <run>"
    assert any("<script>alert(2)</script>" in n.text() for n in doc.find_all("pre"))

    # Header: GPUs with driver, CUDA and clocks; dates; commit.
    for g in gpus:
        row = doc.find("table", id="gpu-table").find("tr", data_gpu=g)
        facts = ENV[g]
        assert row.find("td", data_col="driver").text() == facts.get("driver", "—")
        assert row.find("td", data_col="CUDA").text() == (facts.get("cuda") or "—")
    clocks = doc.find("table", id="gpu-table").find("tr", data_gpu=H200).find("td", data_col="clocks").text()
    assert "sm_clock_mhz: 1755–1980" in clocks and "mem_clock_mhz: 2619" in clocks
    dates = sorted(r.judged_at for r in records)
    shown = doc.find("dd", data_field="dates")
    assert (shown.attrs["data-first"], shown.attrs["data-last"]) == (dates[0], dates[-1])
    assert shown.text() == "2025-05-30 09:00 UTC to 2025-06-01 10:00 UTC"
    assert "abc123def456" in doc.find("dd", data_field="commit").text()
    assert int(doc.find("dd", data_field="records").attrs["data-value"]) == len(latest) == len(records) - 1

    # Per GPU, overall and per level.
    stats = doc.find("table", id="stats")
    rows = stats.find("tbody").find_all("tr")
    want_scopes = []
    for g in gpus:
        want_scopes.append((g, "all"))
        want_scopes += [(g, f"level {lv}") for lv in sorted({r.level for r in latest if gpu_of(r) == g})]
    assert [(r.attrs["data-gpu"], r.attrs["data-scope"]) for r in rows] == want_scopes
    for row in rows:
        g, scope = row.attrs["data-gpu"], row.attrs["data-scope"]
        exp = expected(records, g, None if scope == "all" else int(scope.split()[1]))
        cell = {td.attrs["data-stat"]: td for td in row.find_all("td") if "data-stat" in td.attrs}
        for key in ("tasks_judged", "tasks_correct", "candidates_judged", "candidates_correct", "rejected",
                    "cheats", "skipped"):
            assert int(cell[key].attrs["data-value"]) == exp[key], (g, scope, key)
            assert cell[key].text() == str(exp[key])
        for p in ("0", "1", "1.5", "2"):
            assert close(num(cell[f"fast_{p}"].attrs["data-value"]), exp[f"fast_{p}"]), (g, scope, p)
            assert cell[f"fast_{p}"].text() == f"{100 * exp[f'fast_{p}']:.1f}%"
        for key in ("mean", "median", "geomean"):
            assert close(num(cell[key].attrs["data-value"]), exp[key]), (g, scope, key)
            assert cell[key].text() == ("—" if exp[key] is None else f"{exp[key]:.2f}×")
        shown = {s.attrs["data-reason"]: int(s.attrs["data-count"]) for s in cell["by_reason"].find_all("span")}
        assert shown == exp["by_reason"]
    h200 = expected(records, H200)
    assert h200["cheats"] == (CHEAT.value not in HONEST) + (CHEAT2.value not in HONEST)

    # Rejections by reason code, per GPU.
    for tr in doc.find("table", id="reasons").find("tbody").find_all("tr"):
        code = tr.attrs["data-reason"]
        for g in gpus:
            assert int(tr.find("td", data_gpu=g).attrs["data-value"]) == expected(records, g)["by_reason"].get(code, 0)

    # Every candidate row: times, speedup and interval, verdict, kernels; rejected ones link to their evidence.
    table = doc.find("table", id="candidate-table")
    body_rows = table.find("tbody").find_all("tr")
    keys = {(r.task_id, r.candidate_name) for r in latest}
    assert len(body_rows) == len(keys)
    assert len(table.find("thead").find_all("th", **{"class": "gpu-group"})) == len(gpus)
    evidence = {a.attrs["id"]: a for a in doc.find_all("article")}
    for r in latest:
        g = gpu_of(r)
        row = next(tr for tr in body_rows
                   if (tr.attrs["data-task"], tr.attrs["data-candidate"]) == (r.task_id, r.candidate_name))
        cells = {td.attrs["data-col"]: td for td in row.find_all("td", data_gpu=g)}
        assert row.find_all("td")[3].text() == r.backend
        verdict = cells["verdict"]
        assert verdict.attrs["data-reason"] == r.verdict.reason.value
        if r.timing:
            assert close(num(cells["ref_ms"].attrs["data-sort"]), r.timing.reference.median_ms)
            assert close(num(cells["cand_ms"].attrs["data-sort"]), r.timing.candidate.median_ms)
            assert close(num(cells["speedup"].attrs["data-sort"]), r.timing.speedup)
            assert cells["speedup"].find("span", **{"class": "s"}).text() == f"{r.timing.speedup:.2f}×"
            ci = cells["speedup"].find("span", **{"class": "ci"})
            assert close(num(ci.attrs["data-lo"]), r.timing.speedup_ci[0])
            assert close(num(ci.attrs["data-hi"]), r.timing.speedup_ci[1])
        else:
            assert cells["speedup"].text() == "" and cells["ref_ms"].attrs["data-sort"] == ""
        assert cells["kernels"].text() == ", ".join(getattr(r, "kernels", []) or [])
        if r.verdict.reason is Reason.OK:
            assert verdict.find("span").text() == "OK"
        elif r.verdict.reason is Reason.BACKEND_UNAVAILABLE:
            assert "skipped" in verdict.text()
        else:
            link = verdict.find("a")
            assert link.text() == r.verdict.reason.value
            art = evidence[link.attrs["href"][1:]]
            assert (art.attrs["data-task"], art.attrs["data-candidate"], art.attrs["data-gpu"], art.attrs["data-reason"]) \
                == (r.task_id, r.candidate_name, g, r.verdict.reason.value)
            assert art.find("a", href="#" + row.attrs["id"])  # and back
            for key, value in r.verdict.evidence.items():  # every piece of evidence is shown
                if key in ("before", "after"):
                    continue
                shown = art.find(data_key=key).text()
                if isinstance(value, str):
                    assert shown == value, key
                elif isinstance(value, list):
                    assert [float(x) for x in shown.strip("[]()").split(",")] == value, key
                else:
                    assert float(shown) == pytest.approx(value, rel=1e-5), key
    # The mismatch, the two clocks, the changed setting.
    mismatch = next(a for a in evidence.values() if a.attrs["data-reason"] == "WRONG_OUTPUT")
    m = mismatch.find("table", data_kind="mismatch")
    assert m.find("td", data_key="got").text() == "0.25" and m.find("td", data_key="expected").text() == "-0.01"
    setting = next(a for a in evidence.values() if a.attrs["data-candidate"] == "triton_kernel"
                   and a.attrs["data-task"] == "L1/3_Softmax_rows" and a.attrs["data-gpu"] == H200)
    changed = [tr.attrs["data-key"]
               for tr in setting.find("table", data_kind="setting").find_all("tr", **{"class": "changed"})]
    assert changed == ["allow_tf32"]
    clocked = next(a for a in evidence.values() if a.attrs["data-task"] == "L2/1_Linear_Bias_ReLU_Scale"
                   and a.attrs["data-gpu"] == H200)
    state = clocked.find("table", data_kind="GPU state")
    sm = state.find("tr", data_key="sm_clock_mhz")
    assert "changed" in sm.classes() and [td.text() for td in sm.find_all("td")] == ["sm_clock_mhz", "1980", "1755"]
    assert "controller saw 0.4 ms" in clocked.find("ul", **{"class": "warnings"}).text()

    # Per task: each GPU's best correct candidate.
    trows = doc.find("table", id="task-table").find("tbody").find_all("tr")
    assert [tr.attrs["data-task"] for tr in trows] == ["L1/1_ReLU", "L1/2_GELU_tanh", "L1/3_Softmax_rows",
                                                       "L2/1_Linear_Bias_ReLU_Scale", "L3/1_MLP"]
    for tr in trows:
        for g in gpus:
            best = expected(records, g)["best"]
            speed = tr.find("td", data_gpu=g, data_col="speedup").attrs["data-sort"]
            verdict = tr.find("td", data_gpu=g, data_col="verdict")
            if tr.attrs["data-task"] not in best:
                assert speed == "" and verdict.text() == "not judged"
            elif best[tr.attrs["data-task"]] is None:
                assert speed == "" and verdict.find("a").attrs["href"][1:] in evidence
            else:
                assert close(num(speed), best[tr.attrs["data-task"]]) and verdict.text() == "OK"

    # Charts: distribution per GPU, per-task bars across GPUs, GPU-vs-GPU scatter.
    dist = doc.find("svg", data_chart="distribution")
    for g in gpus:
        band = dist.find("g", data_gpu=g)
        speeds = [r.timing.speedup for r in latest if gpu_of(r) == g and r.verdict.reason is Reason.OK]
        assert sum(int(b.attrs["data-count"]) for b in band.find_all("rect")) == len(speeds)
        for s in speeds:  # each speedup falls in one drawn bin
            assert sum(num(b.attrs["data-lo"]) <= s * (1 + 1e-12) and s < num(b.attrs["data-hi"])
                       for b in band.find_all("rect")) == 1
    bars = doc.find("svg", data_chart="tasks")
    for g in gpus:
        for task, b in expected(records, g)["best"].items():
            grp = bars.find("g", data_task=task)
            if b is None:
                assert grp.find("text", data_gpu=g).text().startswith("×")
            else:
                assert close(num(grp.find("rect", data_gpu=g).attrs["data-speedup"]), b)
    scatters = doc.find_all("figure", **{"class": "chart-scatter"})
    assert {(f.attrs["data-a"], f.attrs["data-b"]) for f in scatters} == {(A100, H200), (A100, "cpu"), (H200, "cpu")}
    fig = next(f for f in scatters if (f.attrs["data-a"], f.attrs["data-b"]) == (A100, H200))
    ba, bh = expected(records, A100)["best"], expected(records, H200)["best"]
    both = {t for t in ba if t in bh and ba[t] is not None and bh[t] is not None}
    points = {c.attrs["data-task"]: (num(c.attrs["data-x"]), num(c.attrs["data-y"])) for c in fig.find_all("circle")}
    assert set(points) == both == {"L1/1_ReLU", "L1/2_GELU_tanh", "L2/1_Linear_Bias_ReLU_Scale"}
    for t, (x, y) in points.items():
        assert close(x, ba[t]) and close(y, bh[t])


def test_build_report_takes_plugin_dicts(tmp_path: Path) -> None:
    """``pytest_sessionfinish`` holds ``to_json()`` dicts; they make the same page as records."""
    records = a100_records()
    dicts = [r.to_json() for r in records]
    a = report.build_report(dicts, tmp_path / "a.html", commit="c0ffee")
    assert dicts == [r.to_json() for r in records]  # the session's records are left as they were
    b = report.build_report(records, tmp_path / "sub" / "b.html", commit="c0ffee")
    strip = lambda p: [line for line in p.read_text().splitlines() if 'data-field="generated"' not in line]  # noqa: E731
    assert strip(a) == strip(b)
    assert not list(tmp_path.glob(".*.tmp")) and not list((tmp_path / "sub").glob(".*.tmp"))


def test_report_with_no_records_and_one_gpu(tmp_path: Path) -> None:
    empty = parse(report.build_report([], tmp_path / "empty.html"))
    assert empty.find("table", id="stats").find("tbody").find_all("tr") == []
    one = parse(report.build_report(cpu_records(), tmp_path / "one.html"))
    assert one.find("p", id="chart-scatter-none")
    assert not one.find_all("figure", **{"class": "chart-scatter"})


def test_merge_command(ledgers: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "merged.html"
    proc = subprocess.run([sys.executable, "-m", "pytest_cudal1.report", str(out), *map(str, ledgers)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(read_all(ledgers))} records from 3 file(s), 3 GPU(s)" in proc.stdout
    assert parse(out).find("dd", data_field="sources").text() == ", ".join(map(str, ledgers))
    (tmp_path / "nothing.jsonl").write_text("")
    assert report.main([str(tmp_path / "x.html"), str(tmp_path / "nothing.jsonl")]) == 1
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(SystemExit):
        report.main([str(tmp_path / "x.html"), str(tmp_path / "missing.jsonl")])


# ------------------------------------------------------ a real browser ---

def chromium_binary() -> str | None:
    for name in (os.environ.get("CUDAL1_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class WebSocket:
    """The least of RFC 6455 that the DevTools protocol needs, for 127.0.0.1 only."""

    def __init__(self, url: str, timeout: float) -> None:
        u = urllib.parse.urlsplit(url)
        assert u.hostname in ("127.0.0.1", "localhost"), url
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            assert chunk, "DevTools closed the connection during the handshake"
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert head.split(b"\r\n")[0].split()[1] == b"101", head

    def send(self, text: str, opcode: int = 0x1) -> None:
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else
                                          bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                          bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._take(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._take(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._take(8))[0]
            mask = self._take(4) if b1 & 0x80 else None
            data = self._take(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if op == 0x9:
                self.send(data.decode(errors="replace"), opcode=0xA)
                continue
            if op == 0xA:
                continue
            message += data
            if b0 & 0x80:
                return message.decode()


class DevTools:
    """Calls and events of one page target."""

    def __init__(self, ws_url: str, timeout: float = 30.0) -> None:
        self.ws, self.timeout, self.next_id, self.events = WebSocket(ws_url, timeout), timeout, 0, []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, (method, msg["error"])
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e.get("method") == method:
                    return e
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(method)

    def js(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
    "--disable-client-side-phishing-detection", "--disable-breakpad", "--metrics-recording-only", "--mute-audio",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,"
    "NetworkTimeServiceQuerying,CertificateTransparencyComponentUpdater",
    # Nothing but this machine: the browser's own background requests (update checks, account lists) find
    # no name (every host maps to NOTFOUND) and go through a proxy that is a closed port on 127.0.0.1.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
    "--hide-scrollbars", "--window-size=1400,1800",
]


@pytest.fixture
def browser(tmp_path: Path):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (install Debian's chromium package or set CUDAL1_CHROMIUM)")
    profile = tmp_path / "chromium-profile"
    log = open(tmp_path / "chromium.log", "wb")
    proc = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        port_file, deadline = profile / "DevToolsActivePort", time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None, (tmp_path / "chromium.log").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "Chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        targets = json.load(direct.open(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        yield DevTools(page["webSocketDebuggerUrl"])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def test_report_in_headless_chromium(browser: DevTools, ledgers: list[Path], tmp_path: Path) -> None:
    records = dedup(read_all(ledgers))
    out = report.build_report(records, tmp_path / "report.html", title="cudal1 report (browser test)")
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=1800, deviceScaleFactor=1, mobile=False)
    browser.call("Page.navigate", url=out.resolve().as_uri())
    browser.wait_for("Page.loadEventFired")
    assert browser.js("document.documentElement.dataset.ready") == "1"

    seen = browser.js("""(() => {
      const n = s => document.querySelectorAll(s).length;
      const box = s => { const r = document.querySelector(s).getBoundingClientRect(); return [r.width, r.height]; };
      return {tables: n("table"), stats: n("#stats tbody tr"), cands: n("#candidate-table tbody tr"),
              tasks: n("#task-table tbody tr"), charts: n("svg.chart"), bars: n("svg[data-chart=distribution] rect"),
              points: n("svg[data-chart=scatter] circle"), evidence: n("article.evidence"),
              distBox: box("svg[data-chart=distribution]"), tableBox: box("#candidate-table"),
              // the GPU and summary tables, the last column (rejected by reason code) included, fit a
              // 1400 px window: nothing is cut behind a scrollbar
              overflow: ["#gpu-table", "#stats"].map(s => { const t = document.querySelector(s);
                return t.getBoundingClientRect().right - t.parentElement.getBoundingClientRect().right; })};
    })()""")
    assert max(seen["overflow"]) <= 0, seen["overflow"]
    assert seen["tables"] >= 5 and seen["stats"] > 0 and seen["tasks"] == 5
    assert seen["cands"] == len({(r.task_id, r.candidate_name) for r in records})
    assert seen["charts"] == 2 + 3 and seen["bars"] > 0 and seen["points"] > 0 and seen["evidence"] > 0
    assert min(seen["distBox"]) > 50 and min(seen["tableBox"]) > 50

    # Every sortable header sits above the column it sorts.
    misplaced = browser.js("""(() => {
      const bad = [];
      document.querySelectorAll('table.sortable').forEach(t => {
        const row = t.tBodies[0].rows[0];
        if (!row) return;
        t.querySelectorAll('th[data-sort-index]').forEach(th => {
          const cell = row.cells[+th.dataset.sortIndex];
          if (!cell || Math.abs(cell.getBoundingClientRect().left - th.getBoundingClientRect().left) > 1)
            bad.push(t.id + ': ' + th.textContent.trim());
        });
      });
      return bad;
    })()""")
    assert misplaced == []

    # Sorting: by the H200 speedup, ascending then descending, rows without one last.
    index = 4 + [A100, H200, "cpu"].index(H200) * 5 + 2  # 4 shared columns, then 5 per GPU
    col = browser.js(f"""(() => {{
      const th = [...document.querySelectorAll('#candidate-table th[data-sort-index]')]
        .find(h => h.textContent.startsWith('speedup') && +h.dataset.sortIndex === {index});
      const read = () => [...document.querySelectorAll('#candidate-table tbody tr')]
        .map(r => r.cells[+th.dataset.sortIndex].dataset.sort);
      th.click(); const up = read(); th.click(); const down = read();
      return {{up, down}};
    }})()""")
    h200 = sorted(r.timing.speedup for r in records if gpu_of(r) == H200 and r.timing)
    missing = len(col["up"]) - len(h200)
    assert [float(v) for v in col["up"] if v] == pytest.approx(h200) and col["up"][len(h200):] == [""] * missing
    assert [float(v) for v in col["down"] if v] == pytest.approx(h200[::-1]) and col["down"][len(h200):] == [""] * missing

    # Filtering: by status and by text.
    shown = browser.js("""(() => {
      const box = document.querySelector('.filters[data-for=candidate-table]');
      const sel = box.querySelector('select[data-attr=data-status]');
      const visible = () => [...document.querySelectorAll('#candidate-table tbody tr')].filter(r => r.offsetParent !== null);
      sel.value = 'rejected'; sel.dispatchEvent(new Event('change'));
      const rejected = visible().map(r => r.dataset.task + '::' + r.dataset.candidate);
      sel.value = ''; sel.dispatchEvent(new Event('change'));
      const text = box.querySelector('input[type=search]');
      text.value = 'gelu'; text.dispatchEvent(new Event('input'));
      const gelu = visible().map(r => r.dataset.task);
      const count = box.querySelector('.count').textContent;
      text.value = ''; text.dispatchEvent(new Event('input'));
      return {rejected, gelu, count, all: visible().length};
    })()""")
    assert set(shown["rejected"]) == {f"{r.task_id}::{r.candidate_name}" for r in records
                                      if r.verdict.reason not in (Reason.OK, Reason.BACKEND_UNAVAILABLE)}
    assert shown["gelu"] and set(shown["gelu"]) == {"L1/2_GELU_tanh"}
    assert shown["count"] == f"{len(shown['gelu'])} of {seen['cands']} rows" and shown["all"] == seen["cands"]

    shot = tmp_path / "report.png"
    shot.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
    height = min(8000, int(browser.js("document.documentElement.scrollHeight")))
    full = tmp_path / "report-full.png"
    full.write_bytes(base64.b64decode(browser.call(
        "Page.captureScreenshot", format="png", captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": 1400, "height": height, "scale": 1})["data"]))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

    # An evidence link lands on its section.
    assert browser.js("""(() => { const a = document.querySelector('#candidate-table a.rejected, #candidate-table a.cheat');
      a.click(); return location.hash === a.getAttribute('href') && !!document.querySelector(':target'); })()""")

    errors = [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == []
    urls = [e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
    assert urls and all(u.startswith(("file:", "data:")) for u in urls), urls

    keep = os.environ.get("CUDAL1_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for p in (shot, full, out):
            shutil.copy(p, Path(keep) / p.name)
    print(f"screenshot: {shot}\nfull page: {full}\nreport: {out}")


# ------------------------------------------------------- the pytest run ---

@pytest.mark.slow
@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_pytest_run_writes_the_report(pytester: pytest.Pytester, xdist: bool) -> None:
    if xdist:
        pytest.importorskip("xdist")
    args = ["-p", "no:cacheprovider", "--cudal1", "--cudal1-level", "1", "-k", "1_ReLU and torch_fast",
            "--cudal1-trials", "1", "--cudal1-time-budget", "0.3", "--cudal1-min-pairs", "3", "--cudal1-max-pairs", "5",
            f"--cudal1-cache-dir={pytester.path / 'cache'}", f"--cudal1-html={pytester.path / 'report.html'}"]
    result = pytester.runpytest_subprocess(*args, *(["-n", "2"] if xdist else []), timeout=300)
    assert result.ret == 0, result.stdout.str()
    doc = parse(pytester.path / "report.html")
    rows = doc.find("table", id="candidate-table").find("tbody").find_all("tr")
    assert [(r.attrs["data-task"], r.attrs["data-candidate"]) for r in rows] == [("L1/1_ReLU", "torch_fast")]
    recorded = list(ledger.read(pytester.path / "cudal1-ledger.jsonl"))
    assert len(recorded) == 1
    gpu = gpu_of(recorded[0])
    cell = rows[0].find("td", data_gpu=gpu, data_col="speedup")
    assert close(num(cell.attrs["data-sort"]), recorded[0].speedup)


def test_evidence_says_things_once_and_plainly() -> None:
    """A correct record's evidence states its message once; compile time is rounded; an empty log is not shown."""
    ok = rec(H200, "L1/1_ReLU", "warned", Reason.OK, 1.2, message="correct on 5 trials; speedup 1.200x",
             warnings=["clock moved 6%"])
    ok.compile_s = 0.156479
    bad = rec(H200, "L1/1_ReLU", "broken", Reason.COMPILE_ERROR, evidence={"log_tail": "", "stderr": "  \n"})
    html = report.render_report([ok, bad])
    article = html.split('data-candidate="warned"', 1)[1].split("</article>", 1)[0]
    assert article.count("correct on") == 1  # not "correct on every trial and accepted correct on 5 trials"
    assert "compile 0.156 s" in article and "0.156479" not in article
    broken = html.split('data-candidate="broken"', 1)[1].split("</article>", 1)[0]
    assert 'data-key="log_tail"' not in broken and 'data-key="stderr"' not in broken
