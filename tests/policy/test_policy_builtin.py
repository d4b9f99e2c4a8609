"""The built-in policy's rewrites: which are offered, how rounds combine them, and that the real judge accepts them.

torch.compile rewrites are generated and parse, but are not judged here: today's judge
rejects them GLOBAL_STATE_MODIFIED on the CPU (inductor sets TORCHINDUCTOR_CACHE_DIR and
_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR in the environment) and DEFERRED_WORK on an H200
(inductor's compile worker threads outlive forward); see benchmarks/results/2026-12-01-H200-builtin-rewrites/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from cudal1_helpers import FAST, by_candidate, read_ledger, reason, run_pytest
from kernelbench.loaders import load_tasks
from policy import builtin
from policy.builtin import Rewrite, first_round, next_round, render, steps_of, write_candidates
from policy.exemplars import ExemplarDB, gpu_of
from pytest_cudal1.candidates import load_candidates

TASKS = {t.name: t for t in load_tasks(None)[0]}
CONV, RELU = TASKS["2_Conv2d_ReLU_Add"], TASKS["1_ReLU"]
JUDGED = [Rewrite(("channels_last",)), Rewrite(("cuda_graph",)), Rewrite(("channels_last", "cuda_graph"))]


def test_channels_last_is_offered_only_for_convolutions() -> None:
    assert [r.name for r in first_round(RELU)] == [
        "builtin_compile_default", "builtin_compile_max_autotune", "builtin_compile_reduce_overhead",
        "builtin_cuda_graph"]
    assert Rewrite(("channels_last",)) in first_round(CONV)


@pytest.mark.parametrize("rewrite", first_round(CONV) + JUDGED[2:], ids=lambda r: r.name)
def test_every_rewrite_is_a_self_contained_candidate_module(rewrite: Rewrite) -> None:
    source = render(CONV, rewrite)
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert {"Model", "ModelNew"} <= set(classes) and "__init__" not in {
        f.name for f in classes["ModelNew"].body if isinstance(f, ast.FunctionDef)}  # Model's constructor, inherited
    assert CONV.source.rstrip() in source
    assert steps_of(source) == rewrite.steps


def test_compile_modes_and_output_clones() -> None:
    assert "mode='max-autotune-no-cudagraphs'" in render(RELU, Rewrite(("compile_max_autotune",)))
    overhead = render(RELU, Rewrite(("compile_reduce_overhead",)))
    assert "mode='reduce-overhead'" in overhead and "torch.clone, compiled(*inputs)" in overhead


def test_later_rounds_combine_the_best_compatible_steps() -> None:
    measured = {Rewrite(("channels_last",)): 2.0, Rewrite(("compile_default",)): 1.5,
                Rewrite(("compile_reduce_overhead",)): 1.4, Rewrite(("cuda_graph",)): 1.2,
                Rewrite(("compile_max_autotune",)): None}
    combos = next_round(measured, top=4)
    assert Rewrite(("channels_last", "compile_default")) in combos
    assert Rewrite(("compile_default", "compile_reduce_overhead")) in combos  # different layers stack
    assert all(not {"cuda_graph", "compile_reduce_overhead"} <= set(c.steps) for c in combos)  # two graph layers
    assert all("compile_max_autotune" not in c.steps for c in combos)  # it failed
    measured[Rewrite(("channels_last", "compile_default"))] = 2.5
    assert Rewrite(("channels_last", "compile_default")) not in next_round(measured, top=4)  # never re-proposed


def test_write_candidates_uses_the_judges_folder_layout(tmp_path: Path) -> None:
    paths = write_candidates(CONV, JUDGED, tmp_path)
    cands, errors = load_candidates(tmp_path)
    assert not errors and sorted(c.name for c in cands) == sorted(r.name for r in JUDGED)
    assert all((c.level, c.problem_id) == (CONV.level, CONV.problem_id) for c in cands)
    assert paths[0] == tmp_path / "level2" / "2_Conv2d_ReLU_Add" / "builtin_channels_last.py"
    assert builtin.steps_of("import torch\n") is None


def test_the_real_judge_accepts_the_rewrites_and_they_become_exemplars(tmp_path: Path) -> None:
    cands = tmp_path / "cands"
    write_candidates(CONV, JUDGED, cands)
    ledger_path = tmp_path / "ledger.jsonl"
    result = run_pytest(tmp_path, *FAST, f"--cudal1-tasks={CONV.origin}", f"--cudal1-candidates={cands}",
                        f"--cudal1-ledger={ledger_path}", f"--cudal1-cache-dir={tmp_path / 'cache'}", timeout=900)
    records = by_candidate(read_ledger(ledger_path))
    verdicts = {name.split("::")[1]: reason(r) for name, r in records.items()}
    log = "\n".join(result.outlines[-30:])
    assert set(verdicts) == {r.name for r in JUDGED}, log
    # Every rewrite is correct and passes the checks, on a loaded CPU too: the timing audit that compares the
    # two sides' harness overhead (5-10 ms apart per sample at load average ~8) is confirmed by a second run.
    assert set(verdicts.values()) == {"OK"}, log
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        report = db.import_ledger(ledger_path, [CONV])
        stored = {e.code: e.speedup for e in db.successes(CONV.sha256, gpu_of(next(iter(records.values()))))}
    assert report.stored == 3 and report.no_code == 0
    assert stored == {render(CONV, r): records[f"{CONV.id}::{r.name}"]["speedup"] for r in JUDGED}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_rewrites_capture_and_replay_correctly_on_the_gpu(tmp_path: Path) -> None:
    """On CUDA the graph step really captures (no eager fallback) and replays fresh inputs correctly."""
    cands = tmp_path / "cands"
    rewrites = [Rewrite(("cuda_graph",)), Rewrite(("channels_last", "cuda_graph"))]
    write_candidates(CONV, rewrites, cands)
    write_candidates(RELU, [Rewrite(("cuda_graph",))], cands)
    ledger_path = tmp_path / "ledger.jsonl"
    tasks = Path(CONV.origin).parents[1]
    result = run_pytest(tmp_path, *FAST, f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                        f"--cudal1-ledger={ledger_path}", f"--cudal1-cache-dir={tmp_path / 'cache'}", timeout=900)
    records = read_ledger(ledger_path)
    assert len(records) == 3 and {reason(r) for r in records} == {"OK"}, "\n".join(result.outlines[-30:])
    assert all(any(f["rule"] == "CUDA_GRAPH" for f in r["static_findings"]) for r in records)
