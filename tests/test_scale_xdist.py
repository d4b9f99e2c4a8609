"""``pytest -n N``: one GPU per worker, builds sized to the cores, items scheduled by task, one ledger and report.

The machine has no GPU: CUDA_VISIBLE_DEVICES="0,1" stands for two (CPU torch ignores it), so the
assignment is visible in each record's ``environment`` without one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cudal1_helpers import FAST, read_ledger, run_pytest, write, write_candidate, write_task

from pytest_cudal1.scheduling import task_scopes

xdist = pytest.importorskip("xdist")

# Each worker says what it was given: its GPU and its build threads (the judge's own objects).
WORKER_CONFTEST = '''
import json, os
from pathlib import Path

def pytest_sessionfinish(session):
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    state = session.config.pluginmanager.get_plugin("cudal1-session")
    if worker and state is not None and state._judge is not None:
        Path(f"worker-{worker}.json").write_text(json.dumps({
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "build_workers": state._judge.builds.workers}))
'''
TASKS = ("1_relu", "2_relu")
CANDIDATES = ("c1", "c2", "c3", "c4")


@pytest.fixture(scope="module")
def xdist_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    root = tmp_path_factory.mktemp("scale-xdist")
    for task in TASKS:
        write_task(root / "tasks", 1, task)
        for cand in CANDIDATES:
            write_candidate(root / "cands", 1, task, cand)
    write(root / "conftest.py", WORKER_CONFTEST)
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # inherited by the run's subprocess
    try:
        result = run_pytest(root, *FAST, f"--cudal1-tasks={root / 'tasks'}", f"--cudal1-candidates={root / 'cands'}",
                            f"--cudal1-cache-dir={root / 'cache'}", "--cudal1-html=report.html", "-n", "2", "-v",
                            timeout=600)
    finally:
        del os.environ["CUDA_VISIBLE_DEVICES"]
    return result, root


@pytest.mark.slow
def test_every_item_is_judged_once_into_one_ledger_and_one_report(xdist_run) -> None:
    result, root = xdist_run
    assert result.ret in (0, 1), "\n".join(result.outlines[-30:])  # 1: a verdict the loaded CPU's noise moved
    records = read_ledger(root / "cudal1-ledger.jsonl")  # json.loads of every line: a torn one fails
    ids = sorted(f"{r['task_id']}::{r['candidate_name']}" for r in records)
    assert ids == sorted(f"L1/{t}::{c}" for t in TASKS for c in CANDIDATES)  # each once
    assert [p.name for p in root.rglob("*.html")] == ["report.html"]
    report = (root / "report.html").read_text()
    assert all(f"L1/{t}" in report for t in TASKS)
    summary = result.outlines[next(i for i, ln in enumerate(result.outlines) if "cudal1 verdicts" in ln):]
    rows = [ln.split()[:2] for ln in summary if ln.startswith("L1/")]
    assert sorted(f"{t}::{c}" for t, c in rows) == ids  # the controller's summary has every worker's records
    assert any(ln.startswith("verdicts: ") for ln in summary)


@pytest.mark.slow
def test_workers_own_different_gpus_and_share_the_cores(xdist_run) -> None:
    result, root = xdist_run
    workers = {p.stem: json.loads(p.read_text()) for p in root.glob("worker-gw*.json")}
    assert sorted(workers) == ["worker-gw0", "worker-gw1"]
    assert workers["worker-gw0"]["cuda_visible_devices"] == "0"
    assert workers["worker-gw1"]["cuda_visible_devices"] == "1"
    assert {w["build_workers"] for w in workers.values()} == {max(1, (os.cpu_count() or 1) // 2)}
    records = read_ledger(root / "cudal1-ledger.jsonl")
    assert {r["environment"]["cuda_visible_devices"] for r in records} == {"0", "1"}  # the records say so too


@pytest.mark.slow
def test_a_tasks_candidates_run_back_to_back_on_one_worker(xdist_run) -> None:
    result, root = xdist_run
    result.stdout.fnmatch_lines(["*scheduling tests via TaskScheduling*"])  # -v prints xdist's scheduler
    records = read_ledger(root / "cudal1-ledger.jsonl")
    gpu = {f"{r['task_id']}::{r['candidate_name']}": r["environment"]["cuda_visible_devices"] for r in records}
    scopes = task_scopes([f"L1/{t}::{c}" for t in TASKS for c in CANDIDATES], workers=2)
    for scope in set(scopes.values()):
        assert len({gpu[i] for i, s in scopes.items() if s == scope}) == 1, scope  # a unit stays on one worker


def test_task_scopes_keep_tasks_whole_and_cut_large_ones() -> None:
    ids = [f"L1/big::c{i}" for i in range(8)] + [f"L1/t{i}::a" for i in range(8)]
    scopes = task_scopes(ids + ["tests/test_x.py::test_y"], workers=2)  # cap: ceil(17 / 4) = 5
    assert {scopes[f"L1/t{i}::a"] for i in range(8)} == {f"L1/t{i}" for i in range(8)}
    assert [scopes[f"L1/big::c{i}"] for i in range(8)] == ["L1/big#part1"] * 4 + ["L1/big#part2"] * 4
    assert "tests/test_x.py::test_y" not in scopes  # other tests keep xdist's loadscope
    assert set(task_scopes(ids, workers=1).values()) >= {"L1/big"}  # one worker: the cap is 8


def test_more_workers_than_gpus_is_a_usage_error(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    result = pytester.runpytest_subprocess("--cudal1", "-n", "2", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*-n 2: only 1 GPU(s) visible (0)*Use -n 1*"])


def test_n_auto_means_one_worker_per_gpu(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    result = pytester.runpytest_subprocess("--cudal1", "-n", "auto", "-k", "nothing_matches")
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
