"""Judged timings reach pytest-benchmark: saved runs, comparisons, regressions, xdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cudal1_helpers import candidate_source, read_ledger, write_candidate, write_task

def slow_candidate() -> str:
    return candidate_source(forward="time.sleep(0.02)\nreturn torch.relu(x)", header="import time")


def saved_runs(storage: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(storage.rglob("*.json"))]


@pytest.fixture
def layout(pytester: pytest.Pytester) -> tuple[Path, Path]:
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_relu")
    write_candidate(cands, 1, "1_relu", "fast")
    return tasks, cands


def test_saved_runs_hold_both_sides_and_compare(judge_run, pytester: pytest.Pytester, layout) -> None:
    tasks, cands = layout
    storage = pytester.path / "bench"
    args = (f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", f"--benchmark-storage=file://{storage}")
    first, records = judge_run(*args, "--benchmark-autosave")
    assert first.ret == 0 and len(records) == 1
    (run,) = saved_runs(storage)
    names = {b["fullname"]: b for b in run["benchmarks"]}
    assert set(names) == {f"L1/1_relu::fast[{side}]" for side in
                          ("reference", "candidate", "reference:call", "candidate:call")}
    cand = names["L1/1_relu::fast[candidate]"]
    timing = records[0]["timing"]
    assert cand["stats"]["rounds"] == timing["candidate"]["n"]
    assert cand["stats"]["median"] == pytest.approx(timing["candidate"]["median_ms"] / 1e3)
    assert cand["extra_info"]["speedup"] == pytest.approx(timing["speedup"])
    assert run["machine_info"]["gpu"] == "none" and "torch" in run["machine_info"]
    # the storage folder is per GPU
    assert [p.relative_to(storage).parts[0] for p in storage.rglob("*.json")] == ["cpu"]

    second, _ = judge_run(*args, "--benchmark-autosave", "--benchmark-compare", "--cudal1-benchmark-tables")
    assert second.ret == 0
    for row in ("*L1/1_relu::fast?candidate? (0001*", "*L1/1_relu::fast?candidate? (NOW)*"):
        second.stdout.fnmatch_lines([row])  # the table sorts rows by time: check each on its own
    assert len(saved_runs(storage)) == 2


def test_compare_fail_catches_a_candidate_that_got_slower(judge_run, pytester: pytest.Pytester, layout) -> None:
    tasks, cands = layout
    storage = pytester.path / "bench"
    args = (f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", f"--benchmark-storage=file://{storage}")
    first, _ = judge_run(*args, "--benchmark-autosave")
    assert first.ret == 0
    write_candidate(cands, 1, "1_relu", "fast", slow_candidate())  # same item id, slower code
    second, records = judge_run(*args, "--benchmark-compare=0001", "--benchmark-compare-fail=median:5%")
    assert records[0]["verdict"]["reason"] == "OK"  # still correct: only its speed regressed
    assert second.ret != 0
    pytest.LineMatcher(second.outlines + second.errlines).fnmatch_lines(
        ["*Performance has regressed*", "*L1/1_relu::fast?candidate?*"])


@pytest.mark.slow
def test_xdist_workers_save_every_item(judge_run, pytester: pytest.Pytester, layout) -> None:
    tasks, cands = layout
    for name in ("fast_b", "fast_c"):
        write_candidate(cands, 1, "1_relu", name)
    out = pytester.path / "bench.json"
    result, records = judge_run(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", "-n", "2",
                                f"--benchmark-json={out}", timeout=400)
    assert result.ret == 0, "\n".join(result.outlines[-30:])
    assert sorted(r["candidate_name"] for r in records) == ["fast", "fast_b", "fast_c"]
    saved = json.loads(out.read_text())
    assert len(saved["benchmarks"]) == 12  # per item: both sides under the kernel and the call measure
    assert {b["fullname"].split("[")[0] for b in saved["benchmarks"]} == {
        "L1/1_relu::fast", "L1/1_relu::fast_b", "L1/1_relu::fast_c"}
    assert len(read_ledger(pytester.path / "cudal1-ledger.jsonl")) == 3
