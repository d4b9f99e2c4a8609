"""How judged items appear to pytest: ids, markers, -k/-m, --lf, -x, --collect-only, levels, load errors.

Collection-only runs are cheap (no worker starts) and run in-process
(``pytester.runpytest``); runs that judge are real subprocesses and use the tiny
fixture task, so each judged item costs about one worker start-up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudal1_helpers import (FIXTURE_CANDIDATES, FIXTURE_TASKS, candidate_source, task_source, write_candidate,
                            write_jsonl, write_task)

FIXTURE_ARGS = (f"--cudal1-tasks={FIXTURE_TASKS}", f"--cudal1-candidates={FIXTURE_CANDIDATES}")
FIXTURE_IDS = sorted(f"L1/1_tiny_relu::{p.stem}" for p in (FIXTURE_CANDIDATES / "level1" / "1_tiny_relu").glob("*.py")) \
    + ["L1/2_bad_init::ok", "L1/3_bad_inputs::ok"]


def collected(result: pytest.RunResult) -> list[str]:
    """Item ids from ``--collect-only -q`` output: the lines before the first blank one (warnings come after)."""
    ids = []
    for line in result.outlines:
        if not line.strip():
            break
        if " collected" in line or line.startswith(("=", "cudal1:", "no tests")):
            continue
        ids.append(line.strip())
    return ids


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Path, Path]:
    """Tasks in levels 1 and 2; candidates of several backends. Never judged, only collected."""
    tasks, cands = tmp_path / "tasks", tmp_path / "cands"
    write_task(tasks, 1, "1_relu")
    write_task(tasks, 1, "2_double", task_source("return x * 2"))
    write_task(tasks, 2, "1_fused", task_source("return torch.relu(x) * 2"))
    write_candidate(cands, 1, "1_relu", "fast")
    write_candidate(cands, 1, "1_relu", "ext", "from torch.utils.cpp_extension import load_inline\n"
                    "m = load_inline(name='x', cpp_sources='', functions=['f'])\n" + candidate_source())
    write_candidate(cands, 1, "2_double", "tri", "import triton\n" + candidate_source("return x * 2"))
    write_candidate(cands, 2, "1_fused", "fast", candidate_source("return torch.relu(x) * 2"))
    write_candidate(cands, 2, "1_fused", "cu", "import cupy\n" + candidate_source())
    return tasks, cands


def mixed_args(mixed: tuple[Path, Path]) -> tuple[str, str]:
    return f"--cudal1-tasks={mixed[0]}", f"--cudal1-candidates={mixed[1]}"


# ----------------------------------------------------------------- ids ---

def test_collect_only_lists_stable_readable_ids(pytester: pytest.Pytester) -> None:
    first = pytester.runpytest_subprocess(*FIXTURE_ARGS, "--collect-only", "-q")
    assert first.ret == pytest.ExitCode.OK
    ids = collected(first)
    assert ids == FIXTURE_IDS
    first.stdout.fnmatch_lines([f"{len(FIXTURE_IDS)} tests collected*"])
    # nothing was judged: no ledger, no cache
    assert not (pytester.path / "cudal1-ledger.jsonl").exists()
    assert not (pytester.path / ".cudal1_cache").exists()
    again = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "--cudal1-seed=7")
    assert collected(again) == ids  # the seed or a rerun never changes ids


def test_node_ids_are_task_id_and_candidate(pytester: pytest.Pytester) -> None:
    # exactly '<task id>::<candidate>', with no leading '::' from the session-level collector
    result = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "-k", "tiny_relu and wrong")
    assert collected(result) == ["L1/1_tiny_relu::wrong"]


def test_verbose_collection_shows_the_tree(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-k", "bad_init")
    result.stdout.fnmatch_lines(["*<TaskCollector L1/2_bad_init>", "*<JudgedItem ok>", "*1/* tests collected*"])
    result.stdout.fnmatch_lines(["cudal1: seed *, ledger *cudal1-ledger.jsonl"])


# ------------------------------------------------------------- markers and -k ---

def test_markers_select_levels_and_backends(pytester: pytest.Pytester, mixed) -> None:
    args = (*mixed_args(mixed), "--collect-only", "-q")
    every = collected(pytester.runpytest(*args))
    assert every == ["L1/1_relu::ext", "L1/1_relu::fast", "L1/2_double::tri", "L2/1_fused::cu", "L2/1_fused::fast"]
    cases = {
        "level1": ["L1/1_relu::ext", "L1/1_relu::fast", "L1/2_double::tri"],
        "level2": ["L2/1_fused::cu", "L2/1_fused::fast"],
        "backend_torch": ["L1/1_relu::fast", "L2/1_fused::fast"],
        "backend_cpp": ["L1/1_relu::ext"],
        "backend_triton": ["L1/2_double::tri"],
        "backend_cupy": ["L2/1_fused::cu"],
        "gpu": ["L2/1_fused::cu"],
        "level2 and not gpu": ["L2/1_fused::fast"],
        "judged and not backend_torch": ["L1/1_relu::ext", "L1/2_double::tri", "L2/1_fused::cu"],
        "level3": [],
    }
    for expr, want in cases.items():
        result = pytester.runpytest(*args, "-m", expr)
        assert collected(result) == want, expr


def test_on_a_gpu_machine_tasks_with_a_build_are_judged_last(pytester: pytest.Pytester, mixed,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Their builds run while the others are judged; a task's candidates stay together. A CPU machine keeps
    the listed order (its timing waits for every build anyway). The GPU is a stand-in: NVML's answer."""
    from pytest_cudal1 import environment

    listed = collected(pytester.runpytest(*mixed_args(mixed), "--collect-only", "-q"))
    assert [i.split("::")[0] for i in listed] == ["L1/1_relu", "L1/1_relu", "L1/2_double", "L2/1_fused", "L2/1_fused"]
    monkeypatch.setattr(environment, "gpu_facts", lambda index=None: {"gpu": "NVIDIA H200"})
    on_gpu = collected(pytester.runpytest(*mixed_args(mixed), "--collect-only", "-q"))
    assert on_gpu == [i for i in listed if not i.startswith("L1/1_relu")] + [i for i in listed if i.startswith("L1/1_relu")]


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.judged:*", "@pytest.mark.level1:*", "@pytest.mark.backend_torch:*",
                                 "@pytest.mark.backend_cupy:*", "@pytest.mark.gpu:*"])
    # --strict-markers accepts them on judged items
    pytester.makeini("[pytest]\naddopts = --strict-markers\n")
    assert pytester.runpytest(*FIXTURE_ARGS, "--collect-only", "-q", "-m", "level1").ret == 0


def test_keyword_selection(pytester: pytest.Pytester, mixed) -> None:
    args = (*mixed_args(mixed), "--collect-only", "-q")
    assert collected(pytester.runpytest(*args, "-k", "fast")) == ["L1/1_relu::fast", "L2/1_fused::fast"]
    assert collected(pytester.runpytest(*args, "-k", "1_relu and not ext")) == ["L1/1_relu::fast"]
    assert collected(pytester.runpytest(*args, "-k", "2_double")) == ["L1/2_double::tri"]


def test_level_option_filters_tasks_and_candidates(pytester: pytest.Pytester, mixed) -> None:
    args = (*mixed_args(mixed), "--collect-only", "-q")
    assert collected(pytester.runpytest(*args, "--cudal1-level=2")) == ["L2/1_fused::cu", "L2/1_fused::fast"]
    assert len(collected(pytester.runpytest(*args, "--cudal1-level=1, 2"))) == 5
    assert collected(pytester.runpytest(*args, "--cudal1-level=3")) == []
    # tasks alone: each task's own reference is the candidate
    only_tasks = pytester.runpytest(f"--cudal1-tasks={mixed[0]}", "--collect-only", "-q",
                                               "--cudal1-level=1")
    assert collected(only_tasks) == ["L1/1_relu::reference", "L1/2_double::reference"]
    bad = pytester.runpytest(*args, "--cudal1-level=one")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--cudal1-level: expected comma-separated numbers*"])


def test_ini_settings(pytester: pytest.Pytester, mixed) -> None:
    pytester.makeini(f"[pytest]\ncudal1_tasks = {mixed[0]}\ncudal1_candidates = {mixed[1]}\ncudal1_level = 2\n")
    assert collected(pytester.runpytest("--collect-only", "-q")) == ["L2/1_fused::cu", "L2/1_fused::fast"]
    # the command line wins over the ini
    assert len(collected(pytester.runpytest("--collect-only", "-q", "--cudal1-level=1"))) == 3
    # numbers are checked when judging starts (collect-only never reads them)
    bad = pytester.runpytest("-q", "--cudal1-trials=many", "-k", "fast")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--cudal1-trials: expected int, got 'many'" in "\n".join(bad.outlines + bad.errlines)
    assert not (pytester.path / "cudal1-ledger.jsonl").exists()


def test_unmatched_candidates_are_reported_not_judged(pytester: pytest.Pytester, mixed) -> None:
    tasks, cands = mixed
    write_candidate(cands, 1, "9_elsewhere", "lost")
    result = pytester.runpytest(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                                           "--collect-only", "-q")
    assert "L1/9_elsewhere::lost" not in collected(result)
    assert len(collected(result)) == 5


# ----------------------------------------------------- plain pytest and mixing ---

def test_plain_pytest_collects_only_normal_tests(pytester: pytest.Pytester, judge_run) -> None:
    pytester.makepyfile(test_normal="def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    write_task(pytester.path / "kb", 1, "1_relu")  # a task set in the project is not judged by default
    plain = pytester.runpytest("--collect-only", "-q")
    assert collected(plain) == ["test_normal.py::test_one", "test_normal.py::test_two"]
    assert "cudal1:" not in plain.stdout.str()  # no header, no session: judging is off

    # judging on, no paths: only judged items; with a test path: both
    judged = pytester.runpytest(f"--cudal1-tasks={pytester.path / 'kb'}", "--collect-only", "-q")
    assert collected(judged) == ["L1/1_relu::reference"]
    both = pytester.runpytest(f"--cudal1-tasks={pytester.path / 'kb'}", "test_normal.py",
                                         "--collect-only", "-q")
    assert sorted(collected(both)) == ["L1/1_relu::reference", "test_normal.py::test_one", "test_normal.py::test_two"]
    # a plain run really runs only the normal tests
    run = pytester.runpytest()
    run.assert_outcomes(passed=2)
    assert not (pytester.path / "cudal1-ledger.jsonl").exists()
    # tasks without candidates: each reference judged against itself passes, at a speedup near 1
    judged, records = judge_run(f"--cudal1-tasks={pytester.path / 'kb'}")
    judged.assert_outcomes(passed=1)
    assert [(r["task_id"], r["candidate_name"], r["verdict"]["reason"]) for r in records] == [
        ("L1/1_relu", "reference", "OK")]
    assert 0.1 < records[0]["speedup"] < 10


def test_bundled_set_with_cudal1_flag(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--cudal1", "--collect-only", "-q", "-k", "1_ReLU and torch_fast")
    assert collected(result) == ["L1/1_ReLU::torch_fast"]
    every = collected(pytester.runpytest("--cudal1", "--collect-only", "-q"))
    assert {i.split("/")[0] for i in every} == {"L1", "L2", "L3"}
    assert all("::" in i for i in every) and not any(i.startswith("cudal1-load-errors") for i in every)


# ------------------------------------------------------------ load errors ---

def test_load_errors_fail_by_file_and_line_while_other_items_run(judge_run, pytester: pytest.Pytester) -> None:
    tasks = pytester.path / "tasks"
    write_task(tasks, 1, "1_relu")
    broken = write_task(tasks, 1, "2_broken", "import torch\n\nclass Model(:\n    pass\n")
    no_model = write_task(tasks, 1, "3_nomodel", "import torch\n\ndef get_inputs():\n    return []\n")
    cands = write_jsonl(pytester.path / "cands.jsonl", [
        {"level": 1, "problem_id": 1, "name": "fine", "code": candidate_source()},
        "{not json",
        {"level": 1, "problem_id": 1, "name": "also_fine", "code": candidate_source("return x.clamp_min(0)")},
    ])

    result, records = judge_run(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", "-p", "no:randomly")

    result.assert_outcomes(passed=2, failed=3)
    assert sorted(r["candidate_name"] for r in records) == ["also_fine", "fine"]
    assert all(r["verdict"]["reason"] == "OK" for r in records)
    text = result.stdout.str()
    assert f"{broken}: [BAD_TASK] task L1/2_broken: syntax error at line 3" in text
    assert f"{no_model}: [BAD_TASK] task L1/3_nomodel: missing top-level Model, get_init_inputs" in text
    assert f"{cands}:2: [BAD_CANDIDATE_FILE] malformed candidate record" in text
    result.stdout.fnmatch_lines([f"FAILED *cudal1-load-errors::{cands}:2*"])


def test_missing_paths_are_usage_errors(pytester: pytest.Pytester) -> None:
    # a mistyped option value, like any bad option in pytest: exit 4 and one line, not a failing item
    for option, path in (("tasks", pytester.path / "nope"), ("candidates", pytester.path / "nada.jsonl")):
        result = pytester.runpytest(f"--cudal1-{option}={path}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*--cudal1-{option}: {path} does not exist*"])
        assert "FAILED" not in result.stdout.str()


# ------------------------------------------------------------- --lf and -x ---

def test_last_failed_and_exitfirst(judge_run, pytester: pytest.Pytester) -> None:
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_relu")
    write_candidate(cands, 1, "1_relu", "a_wrong", candidate_source("return x.clone()"))
    write_candidate(cands, 1, "1_relu", "b_ok")
    args = (f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", "-p", "no:randomly")

    first, records = judge_run(*args)
    first.assert_outcomes(passed=1, failed=1)
    assert [(r["candidate_name"], r["verdict"]["reason"]) for r in records] == [
        ("a_wrong", "WRONG_OUTPUT"), ("b_ok", "OK")]

    rerun, records = judge_run(*args, "--lf")
    rerun.assert_outcomes(failed=1, deselected=1)
    assert [r["candidate_name"] for r in records] == ["a_wrong"]
    rerun.stdout.fnmatch_lines(["*run-last-failure: rerun previous 1 failure*"])

    stop, records = judge_run(*args, "-x", "--cache-clear")
    stop.assert_outcomes(failed=1)
    assert [r["candidate_name"] for r in records] == ["a_wrong"]
    stop.stdout.fnmatch_lines(["*stopping after 1 failures*"])
