"""What a new user meets in the first hour (issue 15): the README's commands, progress, the verdict table last,
skipped and simulated rows, ``-k`` expressions, pasted node ids, the benchmark bridge's switches.

Collection-only runs are in-process (``pytester.runpytest``); judging runs are real subprocesses on the tiny
fixture task, one shared by several tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1_helpers import (FAST, REPO, candidate_source, read_ledger, run_pytest, task_source, write,
                            write_candidate, write_task)
from test_plugin_collection import FIXTURE_ARGS, collected

# A relu of 4M floats (a few ms a call), timed over 10-20 pairs: on a loaded machine the timer audit's medians
# then stay clear of a few preempted samples, and the verdicts these tests read are OK.
BIG_RELU = task_source(shape="2048, 2048")
STEADY = (*FAST, "--cudal1-min-pairs=10", "--cudal1-max-pairs=20", "--cudal1-time-budget=1")

# A "cpp" candidate (load_inline is named, never called) whose build -- an import in its own process,
# ``candidate --compile-only`` -- takes 30 s: a compiler's cost without a compiler (the judged import is quick).
SLOW_BUILD = candidate_source(header="""
    import sys
    import time
    from torch.utils.cpp_extension import load_inline

    if "--compile-only" in sys.argv:
        time.sleep(30)
    if False:
        load_inline(name="never", cpp_sources="", functions=[])
""")


# ------------------------------------------------------------ the README ---

def readme_commands() -> list[str]:
    """The README's two commands (the first line of the first two fenced blocks under "Set up and run")."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```\n(.*?)```", section, re.S)][:2]


def test_ci_runs_the_readme_commands_verbatim() -> None:
    commands = readme_commands()
    assert commands[1] == "pytest tests"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in commands:
        assert command in [line.strip() for line in ci], command


def test_an_editable_install_gives_in_process_runs_no_rewrite_warning(tmp_path: Path) -> None:
    # README command 1 in a fresh virtualenv: pip's editable install imports the package through setuptools'
    # finder, which pytest's rewrite hook never sees. Once the checkout is on sys.path (the root conftest puts
    # it there), its pytest_cudal1.egg-info names the packages, so an in-process pytester run marked them for
    # rewriting, already imported, and warned -- and collected() read the warning lines as item ids.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "-e",
                              str(REPO)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    write(tmp_path / "work" / "test_x.py", "def test_x():\n    pass\n")
    code = ("import sys, pytest, pytest_cudal1.plugin, kernelbench.loaders\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'test_x.py']))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    proc = subprocess.run([python, "-c", code], cwd=tmp_path / "work", env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot be rewritten" not in proc.stdout + proc.stderr, proc.stdout
    assert proc.stdout.splitlines()[0] == "test_x.py::test_x"


# ------------------------------------------------- candidates without tasks ---

def test_candidates_alone_pair_with_the_bundled_set(pytester: pytest.Pytester) -> None:
    cands = pytester.path / "mine"
    write_candidate(cands, 1, "1_ReLU", "my_relu")
    result = pytester.runpytest(f"--cudal1-candidates={cands}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert collected(result) == ["L1/1_ReLU::my_relu"]


def test_unmatched_candidates_name_the_task_set_searched_and_the_option(pytester: pytest.Pytester) -> None:
    cands = pytester.path / "mine"
    write_candidate(cands, 1, "99_Nowhere", "lost")
    result = pytester.runpytest(f"--cudal1-candidates={cands}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["cudal1: 1 candidate(s) name a problem not in the bundled set (*kernelbench*tasks*)"
                                 ", not judged: lost (L1/99); pass their tasks with --cudal1-tasks=PATH*"])


# ------------------------------------------------------- -k and node ids ---

@pytest.mark.parametrize("expr, level, backend, name", [
    ("L1", "L1/", None, None), ("L2", "L2/", None, None), ("ReLU", None, None, "ReLU"),
    ("cuda", None, "cuda", "cuda"), ("triton", None, "triton", "triton")])
def test_obvious_keyword_expressions(pytester: pytest.Pytester, expr: str, level: str | None, backend: str | None,
                                     name: str | None) -> None:
    every = collected(pytester.runpytest("--cudal1", "--collect-only", "-q"))
    got = collected(pytester.runpytest("--cudal1", "--collect-only", "-q", "-k", expr))
    assert got and len(got) < len(every)  # never everything (the old generic marker "cudal1" held "l1")
    if level:
        assert got == [i for i in every if i.startswith(level)]
    if name:
        assert all(name.lower() in i.lower() for i in got)
    if backend:  # every item of the backend, by its marker, is selected
        marked = collected(pytester.runpytest("--cudal1", "--collect-only", "-q", "-m", f"backend_{backend}"))
        assert marked and set(marked) <= set(got)


def test_a_printed_node_id_can_be_pasted_back(pytester: pytest.Pytester) -> None:
    one = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "L1/1_tiny_relu::wrong")
    assert one.ret == pytest.ExitCode.OK, one.stdout.str()
    assert collected(one) == ["L1/1_tiny_relu::wrong"]
    task = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "L1/2_bad_init", "L1/3_bad_inputs::ok")
    assert collected(task) == ["L1/2_bad_init::ok", "L1/3_bad_inputs::ok"]
    # beside a real test path, both are collected; an id that is no item selects nothing
    pytester.makepyfile(test_normal="def test_one():\n    pass\n")
    both = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "test_normal.py", "L1/2_bad_init::ok")
    assert sorted(collected(both)) == ["L1/2_bad_init::ok", "test_normal.py::test_one"]
    none = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "L1/1_tiny_relu::no_such")
    assert collected(none) == []


# ------------------------------------------------------ one shared run ---

@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory, session_cache: Path):
    """A torch, a CUDA (skipped here) and a Triton (simulated here) candidate of one task, judged once."""
    root = tmp_path_factory.mktemp("first-hour")
    tasks, cands = root / "tasks", root / "cands"
    write_task(tasks, 1, "1_relu", BIG_RELU)
    write_candidate(cands, 1, "1_relu", "fast")
    write_candidate(cands, 1, "1_relu", "cu", candidate_source(header="""
        from torch.utils.cpp_extension import load_inline
        if False:
            load_inline(name="never", cpp_sources="", cuda_sources="", functions=[])
    """))
    write_candidate(cands, 1, "1_relu", "tri", "import triton\n" + candidate_source())
    result = run_pytest(root, *STEADY, f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                        f"--cudal1-cache-dir={session_cache}", "--cudal1-html=report.html", "-p", "no:randomly",
                        "-p", "no:xdist", "-v")
    return result, root


def test_verdict_table_comes_last_and_benchmark_tables_only_when_asked(mixed_run) -> None:
    result, _ = mixed_run
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    out = result.outlines
    assert not any("Name (time in" in line for line in out)  # no pytest-benchmark table by default
    start = next(i for i, line in enumerate(out) if "cudal1 verdicts" in line)
    rest = out[start + 1:]
    assert rest[-1].startswith("=") and "passed" in rest[-1]  # only pytest's final line after the verdicts
    assert any(line.startswith("verdicts: ") for line in rest)


def test_skipped_items_are_in_the_table_the_counts_and_the_report(mixed_run) -> None:
    result, root = mixed_run
    result.assert_outcomes(passed=2, skipped=1)
    text = result.stdout.str()
    row = next(line for line in result.outlines if line.startswith("L1/1_relu") and " cu " in line)
    assert "SKIPPED" in row and "needs a CUDA GPU" in row
    assert "verdicts: OK 2, SKIPPED 1" in text
    html = (root / "report.html").read_text(encoding="utf-8")
    assert 'data-stat="skipped" data-value="1"' in html
    # the ledger is the reward trainer's: a pair not judged earns no line there
    assert sorted(r["candidate_name"] for r in read_ledger(root / "cudal1-ledger.jsonl")) == ["fast", "tri"]


def test_simulated_backends_are_labelled_and_kept_out_of_speed_aggregates(mixed_run) -> None:
    result, root = mixed_run
    row = next(line for line in result.outlines if line.startswith("L1/1_relu") and " tri " in line)
    assert "simulated" in row and "0.00x" not in row and "correctness check only" in row
    records = {r["candidate_name"]: r for r in read_ledger(root / "cudal1-ledger.jsonl")}
    html = (root / "report.html").read_text(encoding="utf-8")
    assert '<span class="sim"' in html
    mean = re.search(r'data-stat="mean" data-value="([^"]+)"', html).group(1)
    assert float(mean) == pytest.approx(records["fast"]["timing"]["speedup"], rel=1e-6)  # tri's not in it


def test_progress_lines_appear_when_judging(mixed_run) -> None:
    result, _ = mixed_run
    # under -v: every item's timing too, the simulated one named so
    result.stdout.fnmatch_lines(["cudal1: judging 3 item(s)*", "cudal1: L1/1_relu::fast: timing pairs (up to 1 s)",
                                 "cudal1: L1/1_relu::fast: timed * pairs in * s, speedup *x",
                                 "cudal1: L1/1_relu::tri: timed * pairs in * s, simulated"])


# --------------------------------------------- builds: waiting and progress ---

def test_build_wait_is_booked_as_waiting_never_as_timing(pytester: pytest.Pytester, tmp_path: Path) -> None:
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_relu", BIG_RELU)
    write_candidate(cands, 1, "1_relu", "a_fast")
    write_candidate(cands, 1, "1_relu", "b_slow_build", SLOW_BUILD)
    args = (*STEADY, f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", f"--cudal1-cache-dir={tmp_path}",
            "-p", "no:randomly", "-p", "no:xdist")
    result = pytester.runpytest_subprocess(*args, timeout=300)
    fast = next(r for r in read_ledger(pytester.path / "cudal1-ledger.jsonl") if r["candidate_name"] == "a_fast")
    assert fast["verdict"]["reason"] == "OK", fast["verdict"]
    # a_fast's timing waited for b_slow_build's build to finish (CPU timing never shares cores with compilers)
    assert fast["phase_s"]["build_wait"] > 5, fast["phase_s"]
    assert fast["phase_s"]["timing"] < 10, fast["phase_s"]  # a 1 s budget (plus set-up), not the build's 30 s
    result.stdout.fnmatch_lines([
        "cudal1: judging 2 item(s); 1 candidate build(s) started on * thread(s) (builds: * done, * running, * queued)",
        "cudal1: L1/1_relu::a_fast: waiting for the other builds before timing*"])
    # -q: the progress is quiet, as pytest users expect
    quiet = pytester.runpytest_subprocess(*args, "-q", timeout=300)
    assert any("verdicts: " in line for line in quiet.outlines)
    assert not any(line.startswith("cudal1: ") for line in quiet.outlines)


# ------------------------------------------------------ pytest-benchmark ---

def _saved_run(storage: Path) -> Path:
    return next(storage.rglob("*.json"))


def one_item_args(root: Path) -> tuple[str, ...]:
    """One torch candidate of the big relu task, judged fast."""
    write_task(root / "tasks", 1, "1_relu", BIG_RELU)
    write_candidate(root / "cands", 1, "1_relu", "fast")
    return (*STEADY, f"--cudal1-tasks={root / 'tasks'}", f"--cudal1-candidates={root / 'cands'}",
            f"--cudal1-cache-dir={root / 'cache'}")


def test_benchmark_switches_and_compare_fail_judges_candidates(pytester: pytest.Pytester, tmp_path: Path) -> None:
    storage = tmp_path / "bench"
    base = (*one_item_args(tmp_path),
            f"--benchmark-storage=file://{storage}", "-p", "no:xdist")
    first = pytester.runpytest_subprocess(*base, "--cudal1-benchmark-tables", "--benchmark-autosave", timeout=300)
    assert first.ret == 0, first.stdout.str()[-3000:]
    out = first.outlines
    table = next(i for i, line in enumerate(out) if "Name (time in" in line)
    assert table < next(i for i, line in enumerate(out) if "cudal1 verdicts" in line)  # tables, then verdicts

    # The saved reference ran 1000x faster than now (noise on unchanged code), the candidate 1000x slower:
    # only the candidate is judged, and it improved.
    saved = _saved_run(storage)
    data = json.loads(saved.read_text())
    for bench in data["benchmarks"]:
        scale = 1e-3 if bench["name"].endswith("[reference]") else 1e3
        for key in ("min", "max", "mean", "median"):
            bench["stats"][key] *= scale
    saved.write_text(json.dumps(data))
    compare = ("--benchmark-compare", "--benchmark-compare-fail=median:5%")
    calm = pytester.runpytest_subprocess(*base, *compare, timeout=300)
    assert calm.ret == 0, calm.stdout.str()[-3000:]
    assert "Performance has regressed" not in calm.stdout.str()

    # A candidate that regressed still fails.
    for bench in data["benchmarks"]:
        for key in ("min", "max", "mean", "median"):
            bench["stats"][key] *= 1e-6
    saved.write_text(json.dumps(data))
    worse = pytester.runpytest_subprocess(*base, *compare, timeout=300)
    assert worse.ret != 0
    text = worse.stdout.str() + worse.stderr.str()
    assert "Performance has regressed" in text and "[candidate]" in text and "[reference] - " not in text


def test_works_without_pytest_benchmark(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = pytester.runpytest_subprocess(*one_item_args(tmp_path), "-p", "no:benchmark", "-p", "no:xdist",
                                           timeout=300)
    assert result.ret == 0, result.stdout.str()[-3000:] + result.stderr.str()[-2000:]
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*cudal1 verdicts*", "verdicts: OK 1"])


# ------------------------------------------------------------- details ---

def test_verdict_rows_are_sorted_by_task_and_candidate() -> None:
    from pytest_cudal1.summary import summary_lines

    def rec(level: int, pid: int, task: str, cand: str) -> dict:
        return {"task_id": task, "level": level, "problem_id": pid, "candidate_name": cand, "backend": "torch",
                "device": "cpu", "verdict": {"reason": "OK", "message": ""}, "timing": None}

    shuffled = [rec(2, 1, "L2/1_b", "x"), rec(1, 10, "L1/10_c", "a"), rec(1, 2, "L1/2_a", "z"), rec(1, 2, "L1/2_a", "b")]
    rows = [line.split()[:2] for line in summary_lines(shuffled)[1:-1]]
    assert rows == [["L1/2_a", "b"], ["L1/2_a", "z"], ["L1/10_c", "a"], ["L2/1_b", "x"]]


def test_the_bundled_fused_chain_is_correct_and_faster(tmp_path: Path) -> None:
    """The bundled honest rewrite of L2/3 (sin·cos as sin(2y)/2, the rest in place) passes the judge: an
    algebraic rewrite's rounding is within the float64 tolerance, and fewer passes over 1M floats pay."""
    result = run_pytest(tmp_path, *STEADY, "--cudal1", "L2/3_Scale_SinCos_Tanh_Residual::torch_fused")
    (record,) = read_ledger(tmp_path / "cudal1-ledger.jsonl")
    assert result.ret == pytest.ExitCode.OK and record["verdict"]["reason"] == "OK", result.stdout.str()[-3000:]
    assert record["speedup"] > 1.0, record["speedup"]
