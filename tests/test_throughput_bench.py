"""benchmarks/throughput.py (issue 18) end to end on the CPU: ours judges a tiny batch built from CUDA-L1's
release, a line per candidate lands in the JSONL as it finishes, and the summary's tables come from those
lines (a run cut short too). The anchors need CUDA, so here only their loading is checked: KernelBench's
eval imports by path through the stand-in modules, and a candidate that crashes its harness process is
that harness's failure, not the benchmark's. The GPU test judges one record with both anchors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1_helpers import FAST, REPO, read_ledger, shared_dir

SCRIPT = REPO / "benchmarks" / "throughput.py"
SHARED = shared_dir()
RELEASE = SHARED / "cudal1" / "a100.jsonl" if SHARED else None
ANCHORS = SHARED / "anchors" if SHARED else None
needs_release = pytest.mark.skipif(RELEASE is None or not RELEASE.exists(), reason="needs shared/cudal1/a100.jsonl")
needs_anchors = pytest.mark.skipif(ANCHORS is None or not ANCHORS.is_dir(), reason="needs shared/anchors")
SELECTION = json.loads((REPO / "benchmarks" / "throughput_batch.json").read_text(encoding="utf-8"))


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def lines_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "throughput.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def ours_run(tmp_path_factory) -> Path:
    """Ours on 2 torch-only records and 1 task x 2 rollouts, with the tests' fast judging options."""
    if RELEASE is None or not RELEASE.exists():
        pytest.skip("needs shared/cudal1/a100.jsonl")
    out = tmp_path_factory.mktemp("throughput")
    bench("--release", str(RELEASE), "--out", str(out), "--harnesses", "ours", "--records", "2",
          "--rollout-tasks", "1", "--rollouts", "2", "--ours-args", " ".join(FAST))
    return out


def test_selection_follows_its_rule() -> None:
    records, rollouts = SELECTION["records"], SELECTION["rollout_tasks"]
    assert len(records) == 12 and len(rollouts) == 2
    assert sum(r["backend"] == "load_inline" for r in records) <= 3
    assert all(r["backend"] == "torch" for r in records[:9] + rollouts)
    assert {r["level_id"] for r in records + rollouts} == {1, 2}
    chosen = [(r["level_id"], r["task_id"]) for r in records + rollouts]
    assert len(set(chosen)) == len(chosen)  # no rollout task is also a record
    assert all(SELECTION["rollout_cpu_check"][f"L{r['level_id']}/{r['task_id']}::release"] == "OK" for r in rollouts)


@needs_release
def test_ours_writes_a_line_per_candidate_and_a_summary(ours_run: Path) -> None:
    lines = lines_of(ours_run)
    assert [line["kind"] for line in (lines[0], lines[-1])] == ["run_start", "run_end"]
    candidates = [line for line in lines if line["kind"] == "candidate"]
    task = SELECTION["rollout_tasks"][0]
    rollout = f"L{task['level_id']}/{task['task_id']}"
    expected = {f"L{r['level_id']}/{r['task_id']}::release" for r in SELECTION["records"][:2]}
    expected |= {f"{rollout}::rollout1", f"{rollout}::rollout2"}
    assert {c["key"] for c in candidates} == expected
    assert all(c["harness"] == "ours" and c["wall_s"] > 0 and "trials" in c["phase_s"] for c in candidates)
    # the rollout task's candidate was accepted when the selection was made: its rollouts are timed here
    timed = [c for c in candidates if c["part"] == "rollouts"]
    assert all(c["verdict"] == "OK" and c["speedup"] > 0 and c["timed_s"] > 0 for c in timed), timed
    # rollouts are distinct sources: each has its own build hash
    ledger = read_ledger(ours_run / "ours-ledger.jsonl")
    mine = [r for r in ledger if (r["level"], r["problem_id"]) == (task["level_id"], task["task_id"])]
    assert len({r["candidate_sha256"] for r in mine}) == 2

    summary = json.loads((ours_run / "throughput.json").read_text(encoding="utf-8"))
    ours = summary["harnesses"]["ours"]
    wall = lines[-1]["wall_s"]
    assert ours["candidates"] == 4 and ours["wall_s"] == pytest.approx(wall)
    assert ours["candidates_per_hour"] == pytest.approx(4 * 3600 / wall)
    assert ours["timed_s"] == pytest.approx(sum(c["timed_s"] for c in candidates))
    assert {"trials", "timing"} <= set(ours["phase_s"])
    assert 0 < ours["startup_s"] < wall and 0 < ours["outside_phases_s"] < wall  # where the rest of the wall went
    # the timing phase by step, the timed regions inside its samples
    steps = ours["timing_steps_s"]
    assert {"setup", "samples", "digests", "element_checks"} <= set(steps) and ours["timed_s"] <= steps["samples"]
    assert sum(steps.values()) <= ours["phase_s"]["timing"] + 1e-2
    # the references' starts by step, inside the reference_start phase
    starts = ours["reference_steps_s"]
    assert {"spare_wait", "probe_trial"} <= set(starts) and sum(starts.values()) <= ours["phase_s"]["reference_start"] + 1e-2
    table = (ours_run / "throughput.md").read_text(encoding="utf-8")
    assert "| harness | candidates | correct | wall s | candidates/hour |" in table
    assert f"| ours | 4 | {ours['correct']} | {wall:.1f} | {ours['candidates_per_hour']:.0f} |" in table
    assert "Our timing runs by step (s, summed; timed regions" in table
    assert "Our reference starts by step (s, summed;" in table
    for c in candidates:  # the verdict column: each candidate's code (and speedup when timed)
        cell = c["verdict"] + (f" {c['speedup']:.2f}x" if c["speedup"] is not None else "")
        assert f"| {c['key']} | {c['part']} |" in table and cell in table


@needs_release
def test_summarize_a_run_cut_short(ours_run: Path, tmp_path: Path) -> None:
    """A device call cut at its limit leaves no end line: the run's wall is up to its last candidate."""
    lines = lines_of(ours_run)
    cut = tmp_path / "cut"
    cut.mkdir()
    kept = [line for line in lines if line["kind"] != "run_end"][:-1]
    (cut / "throughput.jsonl").write_text("".join(json.dumps(line) + "\n" for line in kept), encoding="utf-8")
    bench("--summarize", str(cut), "--out", str(tmp_path / "summary"))
    ours = json.loads((tmp_path / "summary" / "throughput.json").read_text(encoding="utf-8"))["harnesses"]["ours"]
    assert ours["candidates"] == 3
    assert ours["wall_s"] == pytest.approx(max(line.get("t_s", 0) for line in kept))


@needs_anchors
def test_standins_let_kernelbench_eval_import_by_path(tmp_path: Path) -> None:
    """Every stand-in forced (as on the GPU machine, which lacks pydantic, litellm, dotenv and openai)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from throughput_anchors import STANDINS, write_standins
    finally:
        sys.path.remove(str(SCRIPT.parent))
    write_standins(tmp_path, list(STANDINS))
    probe = (f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(ANCHORS)!r}]\n"
             "import pydantic, kernelbench_upstream.eval as kb\n"
             f"assert pydantic.__file__.startswith({str(tmp_path)!r})\n"
             "r = kb.KernelExecResult(compiled=True)\n"
             "assert (r.compiled, r.correctness, r.runtime, r.metadata) == (True, False, -1.0, {})\n"
             "r.metadata['x'] = 1; assert kb.KernelExecResult().metadata == {}\n"
             "print(kb.eval_kernel_against_ref.__name__)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "eval_kernel_against_ref", done.stderr[-3000:]


@needs_release
@needs_anchors
def test_an_anchor_crash_is_that_harness_failure(tmp_path: Path) -> None:
    """On the CPU KernelBench's eval refuses to run (it asserts CUDA) after its import by path: the candidate's
    line says CRASHED, the benchmark goes on and summarizes."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU path")
    bench("--release", str(RELEASE), "--anchors", str(ANCHORS), "--out", str(tmp_path), "--harnesses",
          "kernelbench", "--records", "1", "--rollout-tasks", "0")
    (line,) = [c for c in lines_of(tmp_path) if c["kind"] == "candidate"]
    assert line["harness"] == "kernelbench" and line["correct"] is False
    assert line["verdict"].startswith("CRASHED (exit status")
    assert "CUDA is not available" in (tmp_path / "kernelbench.log").read_text(encoding="utf-8")
    assert "kernelbench" in json.loads((tmp_path / "throughput.json").read_text(encoding="utf-8"))["harnesses"]


@needs_release
@needs_anchors
def test_cudal1_verdict_comes_from_its_log(tmp_path: Path) -> None:
    """CUDA-L1's pipeline loads by path and, on the CPU, stops at its laziness check: the verdict is its
    log's last line, read back, not a crash."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU path")
    bench("--release", str(RELEASE), "--anchors", str(ANCHORS), "--out", str(tmp_path), "--harnesses", "cudal1",
          "--records", "1", "--rollout-tasks", "0")
    (line,) = [c for c in lines_of(tmp_path) if c["kind"] == "candidate"]
    assert line["correct"] is False and line["verdict"].startswith("FAILED: ") and "CUDA" in line["verdict"]
    assert line["detail"]["info"] == "stage2:Lazyness Check Failed" and line["detail"]["done"] is True


@pytest.mark.gpu
@needs_release
@needs_anchors
def test_both_anchors_judge_one_record_on_the_gpu(tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    bench("--release", str(RELEASE), "--anchors", str(ANCHORS), "--out", str(tmp_path), "--harnesses",
          "kernelbench,cudal1", "--records", "1", "--rollout-tasks", "0", timeout=600)
    lines = {c["harness"]: c for c in lines_of(tmp_path) if c["kind"] == "candidate"}
    assert set(lines) == {"kernelbench", "cudal1"}
    for harness, line in lines.items():
        assert line["correct"] is True and line["speedup"] > 0 and line["timed_s"] > 0, (harness, line)
    table = (tmp_path / "throughput.md").read_text(encoding="utf-8")
    assert "kernelbench~cudal1 1/1" in table
