"""Issue 18's levers: trusted start-up overlaps judging, never a timed region.

Real pytest runs with real workers. One run judges, in this order: a broken task (its reference loaded
when its item starts), three candidates of a plain task, two of a task that sleeps while it loads (so its
reference, loaded ahead during the plain task's last item, is still loading when that item reaches
timing), and a broken task last (loaded ahead, and failing there). The plain task's last candidate writes
the wall-clock time of each of its calls and the sleeping task writes when its load ended, so the test
sees which calls came before the barrier and which after. Worker-level tests use ``WorkerProcess``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from cudal1_helpers import (FAST, by_candidate, candidate_source, read_ledger, reason, run_pytest, task_source,
                            write, write_candidate, write_task)
from pytest_cudal1.reasons import Reason
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

SLEEP_S = 6  # the slow task's load: longer than a worker's polite exit, and than the warm-up and trials before it
REPO = Path(__file__).resolve().parents[1]

BROKEN = task_source() + '''
import os
print("loading the broken task in", os.getpid(), flush=True)
raise RuntimeError("this task is broken ({which})")
'''


def _stamped(stamps: Path) -> str:
    """A correct ReLU that appends the time of each of its calls to ``stamps``."""
    return candidate_source(forward=f'''
        with open({str(stamps)!r}, "a") as f:
            f.write(f"{{time.time()}}\\n")
        return torch.relu(x)''', header="import time")


def _stamps(path: Path) -> list[float]:
    return [float(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("warm-start")
    tasks, cands, cache = where / "tasks", where / "cands", where / "cache"
    loaded, calls = where / "slow-loaded.txt", where / "calls.txt"
    write_task(tasks, 1, "1_broken_first", BROKEN.format(which="first"))
    write_task(tasks, 1, "2_plain")
    write_task(tasks, 1, "3_slow", task_source() + f'''

import time as _time
_time.sleep({SLEEP_S})
with open({str(loaded)!r}, "a") as _f:
    _f.write(f"{{_time.time()}}\\n")
''')
    write_task(tasks, 1, "4_broken_ahead", BROKEN.format(which="ahead"))
    triton_relu = REPO / "kernelbench" / "candidates" / "level1" / "1_ReLU" / "triton_kernel.py"
    for problem, name, source in (
        ("1_broken_first", "c1", candidate_source()),
        ("2_plain", "c0_triton", triton_relu.read_text()),
        ("2_plain", "c1", candidate_source()),
        ("2_plain", "c2_stamped", _stamped(calls)),  # the item before the slow task's
        ("3_slow", "c1", candidate_source()),
        ("3_slow", "c2", candidate_source()),
        ("4_broken_ahead", "c1", candidate_source()),
        ("4_broken_ahead", "zz_cupy", "import cupy\n" + candidate_source()),
    ):
        write_candidate(cands, 1, problem, name, source)
    result = run_pytest(where, *FAST, f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                        f"--cudal1-cache-dir={cache}", f"--cudal1-ledger={where / 'ledger.jsonl'}", "-rs",
                        timeout=900)
    return {"result": result, "records": by_candidate(read_ledger(where / "ledger.jsonl")), "cache": cache,
            "loaded": loaded, "calls": calls}


def _record(run: dict[str, Any], item: str) -> dict[str, Any]:
    rec = run["records"].get(item)
    assert rec is not None, "\n".join(run["result"].outlines[-40:])
    return rec


def test_the_next_tasks_reference_is_loaded_ahead(warm_run: dict[str, Any]) -> None:
    ahead, kept = _record(warm_run, "L1/3_slow::c1"), _record(warm_run, "L1/3_slow::c2")
    for rec in (ahead, kept):
        assert reason(rec) == "OK", rec["verdict"]
    assert ahead["warm_start"]["reference"] == "loaded_ahead", ahead["warm_start"]
    assert kept["warm_start"]["reference"] == "kept"
    assert ahead["warm_start"]["candidate"] == "spare" and kept["warm_start"]["candidate"] == "spare"
    # Only the probe is left for the item itself: the slow load (SLEEP_S) happened during the previous item.
    assert ahead["phase_s"]["reference_start"] < SLEEP_S, ahead["phase_s"]
    # Where that start went, by step: the wait for the spare, no load of its own, the probe's steps inside the worker.
    steps = ahead["warm_start"]["reference_s"]
    assert steps["load"] < 0.1 and {"spare_wait", "probe_trial", "probe_history", "probe_request"} <= set(steps)
    assert 0 < sum(steps.values()) <= ahead["phase_s"]["reference_start"] + 1e-2, steps
    assert "reference_s" not in kept["warm_start"]  # nothing was started for it
    fresh = _record(warm_run, "L1/1_broken_first::c1")["warm_start"]
    assert fresh["reference"] == "fresh" and "probe_trial" not in fresh["reference_s"]  # its load failed


def test_timing_waits_for_the_spares_start_on_the_cpu_only(warm_run: dict[str, Any]) -> None:
    """The item before the slow task. On the CPU its warm-up and trials overlap the slow load and its timed
    calls follow it (start-up work would share the cores with the measurement). On a GPU the load, which
    touches no GPU, overlaps the timed calls too, and the item waits for nothing."""
    rec = _record(warm_run, "L1/2_plain::c2_stamped")
    assert reason(rec) == "OK", rec["verdict"]
    (loaded_at,) = _stamps(warm_run["loaded"])  # loaded once: ahead
    stamps = _stamps(warm_run["calls"])
    before = [t for t in stamps if t < loaded_at]
    after = [t for t in stamps if t >= loaded_at]
    if torch.cuda.is_available():
        assert len(before) > 1 + 2 and "spare_wait" not in rec["phase_s"], (before, after, rec["phase_s"])
        return
    assert len(before) >= 1 + 2, (before, after)  # the warm-up and both trials overlapped the slow load
    assert len(after) >= 3, (before, after)  # and every timed pair (3 at least) came after it
    assert rec["phase_s"]["spare_wait"] > 0.5, rec["phase_s"]


def test_a_task_that_fails_to_load_is_named_alike_loaded_ahead_or_not(warm_run: dict[str, Any]) -> None:
    first, ahead = _record(warm_run, "L1/1_broken_first::c1"), _record(warm_run, "L1/4_broken_ahead::c1")
    for rec in (first, ahead):
        assert reason(rec) == Reason.BAD_TASK.value, rec["verdict"]
        assert rec["warm_start"]["reference"] == "fresh"
    assert first["verdict"]["message"] == "reference for L1/1_broken_first: RuntimeError: this task is broken (first)"
    assert ahead["verdict"]["message"] == "reference for L1/4_broken_ahead: RuntimeError: this task is broken (ahead)"
    # The task loaded twice: ahead (failed, the spare closed), then in the item's own fresh worker (each log named
    # for the task, the second numbered).
    log = "".join(p.read_text() for p in sorted((warm_run["cache"] / "logs").glob("reference-L1_4_broken_ahead*.log")))
    pids = re.findall(r"loading the broken task in (\d+)", log)
    assert len(set(pids)) == 2, log


def test_workers_import_their_backends_library_at_start(warm_run: dict[str, Any]) -> None:
    triton, plain = _record(warm_run, "L1/2_plain::c0_triton"), _record(warm_run, "L1/2_plain::c1")
    assert reason(triton) == "OK", triton["verdict"]
    assert triton["warm_start"]["preloaded"] == ["torch.profiler", "triton"]
    assert plain["warm_start"]["preloaded"] == ["torch.profiler"]


def test_a_missing_backend_library_is_still_backend_unavailable(warm_run: dict[str, Any]) -> None:
    out = "\n".join(warm_run["result"].outlines)
    assert ("L1/4_broken_ahead::zz_cupy: [BACKEND_UNAVAILABLE] backend 'cupy' needs a CUDA GPU and none is visible"
            in out), out[-3000:]


def test_a_library_that_fails_to_import_at_start_is_named_by_the_candidates_import(tmp_path: Path) -> None:
    """A broken ``triton`` on the path: the warm start skips it, the candidate's own import names it as today."""
    shadow = write(tmp_path / "shadow" / "triton" / "__init__.py", 'raise ImportError("this triton is broken")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parents[1]), os.environ.get("PYTHONPATH", "")])}
    worker = WorkerProcess("candidate", tmp_path / "w.log", env=env, preload=("torch.profiler", "triton"))
    try:
        ready = worker.request("ready", None, 120)
        assert ready["preloaded"] == ["torch.profiler"] and ready["cuda_context"] is False
        write(tmp_path / "cand.py", "import triton\n")
        with pytest.raises(WorkerFailure) as failed:
            worker.request("load", {"path": str(tmp_path / "cand.py"), "module_name": "cand"}, 60)
        assert failed.value.reason is Reason.RUNTIME_ERROR
        assert failed.value.message == "ImportError: this triton is broken"
    finally:
        worker.close()


def test_a_request_sent_now_is_answered_later(tmp_path: Path) -> None:
    """``start_request``/``finish_request``: the worker works meanwhile; a failure is named at the finish."""
    worker = WorkerProcess("reference", tmp_path / "r.log")
    try:
        worker.start_request("load", {"source": "raise ValueError('no task here')", "origin": "t.py", "seed": 1})
        assert worker.pending == "load"
        with pytest.raises(WorkerFailure, match="ValueError: no task here") as failed:
            worker.finish_request(120)
        assert failed.value.reason is Reason.RUNTIME_ERROR and worker.pending is None
        assert worker.request("ready", None, 30)["preloaded"] == []  # the worker goes on answering
    finally:
        worker.close()


def test_requests_sent_together_are_answered_in_order(tmp_path: Path) -> None:
    """A load made ahead does only its CPU part; ``to_device``, sent before its answer is read, does the rest;
    ``probe`` then finds the task placed. ``request`` refuses to run while answers are owed."""
    worker = WorkerProcess("reference", tmp_path / "r.log")
    try:
        worker.start_request("load", {"source": task_source(), "origin": "t.py", "seed": 1, "ahead": True})
        worker.start_request("to_device")
        assert worker.outstanding == ["load", "to_device"]
        with pytest.raises(AssertionError, match="owes the answers"):
            worker.request("ready", None, 30)
        loaded = worker.finish_request(120)
        assert loaded["placed"] is False and loaded["device"] == "cpu", loaded
        assert worker.finish_request(60)["device"] == "cpu" and worker.pending is None
        assert worker.request("probe", {"recipe": {"seed": 1, "family": "task", "scale": 1.0}}, 120)["fits"]
    finally:
        worker.close()


def test_a_load_not_made_ahead_is_placed_at_once(tmp_path: Path) -> None:
    worker = WorkerProcess("reference", tmp_path / "r.log")
    try:
        assert worker.request("load", {"source": task_source(), "origin": "t.py", "seed": 1}, 120)["placed"] is True
    finally:
        worker.close()


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU")
def test_a_spare_candidate_worker_creates_its_cuda_context_only_when_asked(tmp_path: Path) -> None:
    """Its start (``import torch``, the backend's libraries) may overlap another item's timing; the context may not."""
    worker = WorkerProcess("candidate", tmp_path / "w.log", preload=("torch.utils.cpp_extension",))
    try:
        ready = worker.request("ready", {"device": False}, 300)
        assert ready["cuda_initialized"] is False and ready["cuda_context"] is False, ready
        assert ready["preloaded"] == ["torch.utils.cpp_extension"]
        ready = worker.request("ready", {"device": True}, 300)
        assert ready["cuda_context"] is True and ready["device"] == "cuda", ready
    finally:
        worker.close()


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU")
def test_a_reference_loaded_ahead_touches_the_gpu_only_when_asked(tmp_path: Path) -> None:
    worker = WorkerProcess("reference", tmp_path / "w.log")
    try:
        loaded = worker.request("load", {"source": task_source(), "origin": "t.py", "seed": 1, "ahead": True}, 300)
        assert loaded["cuda_initialized"] is False and loaded["placed"] is False, loaded
        assert worker.request("to_device", None, 300)["cuda_context"] is True
        assert worker.request("probe", {"recipe": {"seed": 1, "family": "task", "scale": 1.0}}, 120)["fits"]
    finally:
        worker.close()
