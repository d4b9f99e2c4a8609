"""Loading tasks (kernelbench.loaders) and candidates (pytest_cudal1.candidates) from every supported layout.

Loading only parses sources; these tests also check that it never runs them,
and that each bad input becomes a LoadError naming its file (and line, for
JSONL records and syntax errors) without hiding the good inputs beside it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from cudal1_helpers import FIXTURE_CANDIDATES, FIXTURE_TASKS, candidate_source, shared_dir, task_source, write, \
    write_candidate, write_jsonl, write_task
from kernelbench.loaders import BUNDLED_TASKS, LoadError, load_tasks
from pytest_cudal1.candidates import detect_backend, load_candidates, pair, reference_candidate


# ------------------------------------------------------------- task layouts ---

def test_kernelbench_checkout_layout(tmp_path: Path) -> None:
    kb = tmp_path / "KernelBench"
    for level, name in [(1, "10_Tenth"), (1, "2_Second"), (1, "1_First"), (2, "1_Fused"), (3, "7_Net")]:
        write_task(kb, level, name)
    write(kb / "level1" / "README.md", "not a task")
    write(kb / "notes" / "5_not_a_level.py", "this folder is not levelN and is never read")

    tasks, errors = load_tasks(tmp_path)  # the checkout's root: KernelBench/ is found inside it

    assert errors == []
    # natural order inside a level (2 before 10), levels in order
    assert [t.id for t in tasks] == ["L1/1_First", "L1/2_Second", "L1/10_Tenth", "L2/1_Fused", "L3/7_Net"]
    assert [(t.level, t.problem_id) for t in tasks] == [(1, 1), (1, 2), (1, 10), (2, 1), (3, 7)]
    first = tasks[0]
    assert first.origin == str(kb / "level1" / "1_First.py")
    assert first.source == (kb / "level1" / "1_First.py").read_text()
    assert first.sha256 == hashlib.sha256(first.source.encode()).hexdigest()
    # KernelBench/ itself works the same as the checkout root
    assert [t.id for t in load_tasks(kb)[0]] == [t.id for t in tasks]


def test_single_level_folder_takes_its_level_from_the_folder_name(tmp_path: Path) -> None:
    write_task(tmp_path, 2, "3_Three")
    write_task(tmp_path, 2, "1_One")
    tasks, errors = load_tasks(tmp_path / "level2")
    assert errors == []
    assert [t.id for t in tasks] == ["L2/1_One", "L2/3_Three"]

    (tmp_path / "level_4").mkdir()
    write(tmp_path / "level_4" / "9_Nine.py", task_source())
    tasks, errors = load_tasks(tmp_path / "level_4")
    assert errors == [] and [t.id for t in tasks] == ["L4/9_Nine"]


def test_single_py_file(tmp_path: Path) -> None:
    plain = write(tmp_path / "12_Alone.py", task_source())
    tasks, errors = load_tasks(plain)
    assert errors == []
    assert len(tasks) == 1
    assert (tasks[0].level, tasks[0].problem_id, tasks[0].id) == (None, 12, "12_Alone")

    nested = write_task(tmp_path, 3, "4_InLevel")
    (task,), errors = load_tasks(nested)
    assert errors == [] and task.id == "L3/4_InLevel"


def test_jsonl_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "problems.jsonl", [
        {"level": 1, "problem_id": 3, "name": "3_Three", "source": task_source()},
        {"level": 2, "name": "17_NoIdField", "source": task_source("return x * 2")},
        {"level": None, "problem_id": None, "name": "Unlevelled", "source": task_source()},
    ])
    tasks, errors = load_tasks(path)
    assert errors == []
    assert [(t.id, t.level, t.problem_id) for t in tasks] == [
        ("L1/3_Three", 1, 3), ("L2/17_NoIdField", 2, 17), ("Unlevelled", None, None)]
    assert [t.origin for t in tasks] == [f"{path}:1", f"{path}:2", f"{path}:3"]
    assert "x * 2" in tasks[1].source


def test_bundled_and_fixture_sets_load_cleanly() -> None:
    tasks, errors = load_tasks(None)
    assert errors == []
    assert {t.level for t in tasks} == {1, 2, 3}
    assert all(Path(t.origin).is_relative_to(BUNDLED_TASKS) for t in tasks)

    tasks, errors = load_tasks(FIXTURE_TASKS)
    assert errors == []
    assert [t.id for t in tasks] == ["L1/1_tiny_relu", "L1/2_bad_init", "L1/3_bad_inputs"]


def test_shared_kernelbench_problems_jsonl() -> None:
    shared = shared_dir()
    problems = shared / "kernelbench" / "problems.jsonl" if shared else None
    if problems is None or not problems.exists():
        pytest.skip("no ../shared/kernelbench/problems.jsonl beside this checkout")
    tasks, errors = load_tasks(problems)
    assert errors == []
    assert len(tasks) == 250
    assert Counter(t.level for t in tasks) == {1: 100, 2: 100, 3: 50}
    assert len({t.id for t in tasks}) == 250
    for level in (1, 2, 3):
        ids = sorted(t.problem_id for t in tasks if t.level == level)
        assert ids == list(range(1, len(ids) + 1))
    first = tasks[0]
    assert (first.id, first.origin) == ("L1/1_Square_matrix_multiplication_", f"{problems}:1")
    assert all(t.name.startswith(f"{t.problem_id}_") for t in tasks)


def test_loading_never_runs_task_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write_task(tmp_path, 1, "1_Sneaky", f"open({str(marker)!r}, 'w').close()\n" + task_source())
    tasks, errors = load_tasks(tmp_path)
    assert errors == [] and len(tasks) == 1
    assert not marker.exists()


# ---------------------------------------------------------- bad task inputs ---

def test_bad_task_files_each_give_a_load_error_and_do_not_hide_the_good_ones(tmp_path: Path) -> None:
    good = write_task(tmp_path, 1, "1_Good")
    no_model = write_task(tmp_path, 1, "2_NoModel", task_source().replace("class Model(", "class Other("))
    no_inputs = write_task(tmp_path, 1, "3_NoInputs", task_source().replace("def get_inputs(", "def inputs("))
    broken = write_task(tmp_path, 1, "4_Broken", "import torch\n\n\nclass Model(:\n    pass\n")
    write(tmp_path / "level1" / "5_Latin1.py", "")
    (tmp_path / "level1" / "5_Latin1.py").write_bytes(b"# caf\xe9\n")

    tasks, errors = load_tasks(tmp_path)

    assert [t.origin for t in tasks] == [str(good)]
    by_origin = {e.origin: e for e in errors}
    assert set(by_origin) == {str(no_model), str(no_inputs), str(broken), str(tmp_path / "level1" / "5_Latin1.py")}
    assert all(isinstance(e, LoadError) and e.kind == "task" for e in errors)
    assert "missing top-level Model" in by_origin[str(no_model)].message
    assert "L1/2_NoModel" in by_origin[str(no_model)].message
    assert "missing top-level get_inputs" in by_origin[str(no_inputs)].message
    assert "syntax error at line 4" in by_origin[str(broken)].message
    assert "cannot read" in by_origin[str(tmp_path / "level1" / "5_Latin1.py")].message


def test_bad_jsonl_lines_name_file_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", [
        {"level": 1, "problem_id": 1, "name": "1_Good", "source": task_source()},
        "",                                                   # 2: empty line
        '{"level": 1, "problem_id": 3, "name": "3_Torn", "sou',  # 3: not JSON
        {"level": 1, "problem_id": 4, "name": "4_NoSource"},    # 4: no source
        {"level": "one", "name": "5_BadLevel", "source": task_source()},  # 5: level not a number
        {"level": 1, "name": "6_SourceNotText", "source": ["import torch"]},  # 6
        "[1, 2, 3]",                                          # 7: not an object
        {"level": 1, "problem_id": 8, "name": "8_NoModel", "source": "def get_inputs(): pass\n"},  # 8
        {"level": 1, "problem_id": 9, "name": "9_AlsoGood", "source": task_source()},
    ])
    tasks, errors = load_tasks(path)
    assert [t.name for t in tasks] == ["1_Good", "9_AlsoGood"]
    by_origin = {e.origin: e.message for e in errors}
    assert set(by_origin) == {f"{path}:{n}" for n in (2, 3, 4, 5, 6, 7, 8)}
    assert "empty line" in by_origin[f"{path}:2"]
    for n in (3, 4, 5, 6, 7):
        assert "malformed task record" in by_origin[f"{path}:{n}"], n
    assert "missing top-level Model, get_init_inputs" in by_origin[f"{path}:8"]


@pytest.mark.parametrize("name", ["does-not-exist", "does-not-exist.jsonl", "nope.py"])
def test_missing_task_path(tmp_path: Path, name: str) -> None:
    tasks, errors = load_tasks(tmp_path / name)
    assert tasks == []
    assert [(e.origin, e.message) for e in errors] == [(str(tmp_path / name), "task path does not exist")]


def test_unknown_task_format_and_empty_folder(tmp_path: Path) -> None:
    txt = write(tmp_path / "tasks.txt", "hello")
    assert load_tasks(txt)[1][0].message.startswith("unknown task format")
    empty = tmp_path / "empty"
    empty.mkdir()
    tasks, errors = load_tasks(empty)
    assert tasks == [] and len(errors) == 1 and errors[0].origin == str(empty)
    assert "no task files found" in errors[0].message


# ---------------------------------------------------------- candidate loading ---

def test_candidate_folder_layout(tmp_path: Path) -> None:
    a = write_candidate(tmp_path, 1, "19_ReLU", "a")
    z = write_candidate(tmp_path, 1, "19_ReLU", "z_second")
    b = write(tmp_path / "level1" / "19_b.py", candidate_source())
    c = write(tmp_path / "level2" / "7_c.py", candidate_source())
    write(tmp_path / "level1" / "notes.py", "no problem number, ignored")
    write(tmp_path / "level1" / "19_ReLU" / "README.md", "not python")
    write(tmp_path / "misc" / "1_x.py", "not under levelN, ignored")

    cands, errors = load_candidates(tmp_path)

    assert errors == []
    got = sorted((x.level, x.problem_id, x.name, x.path) for x in cands)
    assert got == sorted([
        (1, 19, "a", str(a.resolve())), (1, 19, "z_second", str(z.resolve())),
        (1, 19, "19_b", str(b.resolve())), (2, 7, "7_c", str(c.resolve())),
    ])
    assert all(x.task is None and x.origin == x.path for x in cands)


def test_candidate_folder_without_levels_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "a.py", candidate_source())
    cands, errors = load_candidates(tmp_path)
    assert cands == []
    assert [(e.origin, e.kind) for e in errors] == [(str(tmp_path), "candidate")]
    missing = load_candidates(tmp_path / "nope")[1]
    assert missing[0].message == "candidate path does not exist" and missing[0].kind == "candidate"


def test_candidate_jsonl_release_records_carry_their_own_task(tmp_path: Path) -> None:
    ref = task_source("return torch.tanh(x)")
    path = write_jsonl(tmp_path / "release.jsonl", [
        {"level_id": 1, "task_id": 23, "op_name": "Tanh", "ref_code": ref,
         "custom_code": candidate_source("return torch.tanh(x)")},
        {"level": 2, "problem_id": 5, "name": "plain", "code": candidate_source()},
        {"level": 2, "problem_id": 5, "source": candidate_source("return x.clamp_min(0)")},
        "",
        {"level": 1, "problem_id": 6},                                      # no code at all
        {"level_id": 1, "task_id": 7, "custom_code": candidate_source(), "ref_code": "x = 1\n"},  # bad ref
        "{oops",
        {"level_id": 1, "task_id": 80, "custom_code": "None", "ref_code": ref},  # CUDA-L1's placeholder
        {"level_id": 1, "task_id": 81, "custom_code": "  \n", "ref_code": ref},
    ])
    cands, errors = load_candidates(path)

    assert [(c.name, c.level, c.problem_id) for c in cands] == [("line1", 1, 23), ("plain", 2, 5), ("line3", 2, 5)]
    release = cands[0]
    assert release.origin == f"{path}:1" and release.path is None
    assert release.task is not None
    assert (release.task.level, release.task.problem_id, release.task.name) == (1, 23, "23_Tanh")
    assert release.task.source == ref
    assert cands[1].task is None
    assert {e.origin: e.kind for e in errors} == {f"{path}:{n}": "candidate" for n in (4, 5, 6, 7, 8, 9)}
    messages = {e.origin: e.message for e in errors}
    assert "empty line" in messages[f"{path}:4"]
    assert "malformed candidate record" in messages[f"{path}:5"] and "no code" in messages[f"{path}:5"]
    assert "ref_code" in messages[f"{path}:6"] and "missing top-level" in messages[f"{path}:6"]
    assert "malformed candidate record" in messages[f"{path}:7"]
    assert all("no code" in messages[f"{path}:{n}"] for n in (8, 9))

    # a release record is judged against its own reference even with no task set at all
    pairs, unmatched = pair([], cands)
    assert [(t.id, c.name) for t, c in pairs] == [("L1/23_Tanh", "line1")]
    assert [c.name for c in unmatched] == ["plain", "line3"]


def test_pairing_by_level_and_problem(tmp_path: Path) -> None:
    tasks, _ = load_tasks(FIXTURE_TASKS)
    cands, errors = load_candidates(FIXTURE_CANDIDATES)
    assert errors == []
    extra = load_candidates(write_jsonl(tmp_path / "c.jsonl", [
        {"level": 1, "problem_id": 99, "name": "orphan", "code": candidate_source()},
        {"level": 2, "problem_id": 1, "name": "wrong_level", "code": candidate_source()},
    ]))[0]
    pairs, unmatched = pair(tasks, cands + extra)
    assert sorted(c.name for c in unmatched) == ["orphan", "wrong_level"]
    assert all((t.level, t.problem_id) == (c.level, c.problem_id) for t, c in pairs)
    assert len(pairs) == len(cands)
    # sorted by task, then candidate name
    keys = [(t.problem_id, c.name) for t, c in pairs]
    assert keys == sorted(keys)

    refs, none_left = pair(tasks, None)
    assert none_left == []
    assert [(t.id, c.name) for t, c in refs] == [(t.id, "reference") for t in tasks]
    assert refs[0][1].source.endswith("ModelNew = Model\n")
    assert reference_candidate(tasks[0]).backend == "torch"


# ------------------------------------------------------------ backend detection ---

@pytest.mark.parametrize("source, backend", [
    ("import torch\nclass ModelNew: pass\n", "torch"),
    ("from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline(name='x', cpp_sources='...', functions=['f'])\n", "cpp"),
    ("import torch.utils.cpp_extension as ce\n"
     "m = ce.load_inline(name='x', cpp_sources='', cuda_sources='__global__ void k(){}', functions=['f'])\n", "cuda"),
    # CUDA-L1's L1/95 (release line 95): its CUDA kernel passed as cpp_sources, built with with_cuda=True
    ("from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline(name='x', cpp_sources='__global__ void k(){}', functions=['f'], with_cuda=True)\n", "cuda"),
    ("from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline(name='x', cpp_sources='...', functions=['f'], with_cuda=False)\n", "cpp"),
    ("from torch.utils.cpp_extension import load\nm = load(name='x', sources=['k.cu'])\n", "cuda"),
    ("import triton\nimport triton.language as tl\n", "triton"),
    ("import triton.language as tl\n", "triton"),
    ("import cupy as cp\n", "cupy"),
    ("from cupy import RawKernel\n", "cupy"),
    ("from numba import cuda\n", "numba"),
    ("import numba\n", "numba"),
    ("this is not python (\n", "torch"),
    ("import json\nd = json.load(open('x'))\n", "torch"),  # a call named load outside cpp_extension
])
def test_backend_detection(source: str, backend: str) -> None:
    assert detect_backend(source) == backend


def test_fixture_candidates_backends() -> None:
    cands, _ = load_candidates(FIXTURE_CANDIDATES)
    backends = {c.name: c.backend for c in cands if c.problem_id == 1}
    assert backends["gpu_cupy"] == "cupy"
    assert {b for n, b in backends.items() if n != "gpu_cupy"} == {"torch"}
