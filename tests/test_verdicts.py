"""Every verdict the harness can reach on a CPU-only machine, from one real judging run.

The fixture set (tests/fixtures/) has a tiny ReLU task with one candidate per
failure mode, plus two broken tasks. One pytest subprocess judges all of them
(real reference and candidate workers); each test below reads its pair's record
from that run's ledger (``verdict.reason``) and its failure text from the output.
"""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

import pytest

from cudal1_helpers import FAST, FIXTURE_CANDIDATES, FIXTURE_TASKS, by_candidate, read_ledger, reason, run_pytest

TASK = "L1/1_tiny_relu"
CALL_TIMEOUT = 3
COMPILE_TIMEOUT = 15

# candidate -> reason codes accepted. Where two are listed the second is the
# more specific code of the anti-cheat checks, when the harness has them.
EXPECTED: dict[str, tuple[str, ...]] = {
    f"{TASK}::ok": ("OK",),
    f"{TASK}::noisy": ("OK",),
    f"{TASK}::wrong": ("WRONG_OUTPUT",),
    f"{TASK}::shape": ("SHAPE_MISMATCH",),
    f"{TASK}::dtype": ("DTYPE_MISMATCH",),
    f"{TASK}::structure_tuple": ("STRUCTURE_MISMATCH",),
    f"{TASK}::structure_subclass": ("STRUCTURE_MISMATCH", "LAZY_OUTPUT"),
    f"{TASK}::nonfinite": ("NONFINITE_MISMATCH",),
    f"{TASK}::syntax_error": ("SYNTAX_ERROR",),
    f"{TASK}::import_error": ("IMPORT_ERROR",),
    f"{TASK}::no_modelnew": ("NO_MODELNEW",),
    f"{TASK}::init_error": ("INIT_ERROR",),
    f"{TASK}::runtime_error": ("RUNTIME_ERROR",),
    f"{TASK}::timeout": ("TIMEOUT",),
    f"{TASK}::crash_segv": ("CRASH",),
    f"{TASK}::crash_abort": ("CRASH",),
    f"{TASK}::exit_os": ("EARLY_EXIT",),
    f"{TASK}::exit_sys": ("EARLY_EXIT",),
    f"{TASK}::oom_memoryerror": ("OUT_OF_MEMORY",),
    f"{TASK}::protocol_garbage": ("PROTOCOL_VIOLATION",),
    f"{TASK}::compile_timeout": ("COMPILE_TIMEOUT",),
    "L1/2_bad_init::ok": ("BAD_TASK",),
    "L1/3_bad_inputs::ok": ("BAD_TASK",),  # its get_inputs raises: found when the task is loaded
    f"{TASK}::oom_alloc": ("OUT_OF_MEMORY",),
    f"{TASK}::protocol_bad_buffer": ("PROTOCOL_VIOLATION",),
}
# Correct candidates judged right after one that killed or hung its worker.
AFTER = {"crash_segv_z_ok": "crash_segv", "exit_os_z_ok": "exit_os", "timeout_z_ok": "timeout"}
PASSING = [f"{TASK}::ok", f"{TASK}::noisy"] + [f"{TASK}::{n}" for n in AFTER]


class Run:
    def __init__(self, result: pytest.RunResult, where: Path) -> None:
        self.where = where
        self.ledger_text = (where / "cudal1-ledger.jsonl").read_text()
        records = read_ledger(where / "cudal1-ledger.jsonl")
        self.result = result
        self.records = records
        self.by_id = by_candidate(records)
        self.text = "\n".join(result.outlines)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    where = tmp_path_factory.mktemp("verdicts")
    result = run_pytest(
        where, *FAST, f"--cudal1-call-timeout={CALL_TIMEOUT}", f"--cudal1-compile-timeout={COMPILE_TIMEOUT}",
        f"--cudal1-tasks={FIXTURE_TASKS}", f"--cudal1-candidates={FIXTURE_CANDIDATES}",
        f"--cudal1-cache-dir={where / 'cache'}", "-rs", "-p", "no:randomly", "--durations=0",
        timeout=500,
    )
    return Run(result, where)


@pytest.mark.parametrize("item_id, codes", [pytest.param(i, c, id=i.split("/", 1)[1]) for i, c in EXPECTED.items()])
def test_verdict(run: Run, item_id: str, codes: tuple[str, ...]) -> None:
    assert item_id in run.by_id, f"no ledger record for {item_id}\n{run.text[-3000:]}"
    rec = run.by_id[item_id]
    assert reason(rec) in codes, rec["verdict"]
    task_id, cand = item_id.split("::")
    assert rec["task_id"] == task_id and rec["candidate_name"] == cand
    assert rec["passed"] is (reason(rec) == "OK")
    if reason(rec) == "OK":
        assert rec["reward"] > 0 and rec["timing"]["pairs"] >= 3
        assert f"{item_id} [" not in run.text
    else:
        assert rec["reward"] == 0.0
        # the failure names task, candidate and reason code
        assert f"{item_id} [{reason(rec)}]" in run.text


def test_run_outcomes(run: Run) -> None:
    outcomes = run.result.parseoutcomes()
    assert outcomes.get("passed") == len(PASSING), run.text[-3000:]
    assert outcomes.get("skipped") == 1
    assert run.result.ret == pytest.ExitCode.TESTS_FAILED
    # one line per judged pair; the skipped GPU candidate writes none
    assert sorted(r["candidate_name"] for r in run.records if r["task_id"] == TASK).count("gpu_cupy") == 0
    assert len({(r["task_id"], r["candidate_name"]) for r in run.records}) == len(run.records)
    summary = [ln for ln in run.result.outlines if ln.startswith("verdicts: ")]
    assert summary and f"OK {len(PASSING)}" in summary[-1]


def test_records_describe_the_pair(run: Run) -> None:
    rec = run.by_id[f"{TASK}::ok"]
    path = FIXTURE_CANDIDATES / "level1" / "1_tiny_relu" / "ok.py"
    assert rec["candidate_sha256"] == hashlib.sha256(path.read_text().encode()).hexdigest()
    assert Path(rec["candidate_origin"]) == path
    assert (rec["level"], rec["problem_id"], rec["task_name"]) == (1, 1, "1_tiny_relu")
    assert (rec["backend"], rec["device"], rec["seed"]) == ("torch", "cpu", 1)
    assert rec["environment"]["torch"]
    assert rec["first_call_ms"] is not None and rec["first_call_ms"] >= 0
    t = rec["timing"]
    assert t["reference"]["median_ms"] > 0 and t["candidate"]["median_ms"] > 0
    lo, hi = t["speedup_ci"]
    assert 0 < lo <= hi and t["speedup"] > 0
    assert rec["speedup"] == t["speedup"]


def test_backend_unavailable_is_skipped_with_a_reason(run: Run) -> None:
    skipped = [ln for ln in run.result.outlines if ln.startswith("SKIPPED")]
    assert len(skipped) == 1
    assert f"{TASK}::gpu_cupy" in skipped[0]
    assert "backend 'cupy' needs a CUDA GPU" in skipped[0]


def test_evidence_of_failures(run: Run) -> None:
    wrong = run.by_id[f"{TASK}::wrong"]["verdict"]
    ev = wrong["evidence"]
    assert len(ev["index"]) == 2 and ev["expected"] == 0.0 and ev["got"] < 0  # a negative input passed through
    assert ev["max_abs_err"] > 0 and ev["n_bad"] > 0 and ev["numel"] == 32
    assert "family='task'" in ev["recipe"] and ev["float64_reference"] is True

    shape = run.by_id[f"{TASK}::shape"]["verdict"]["evidence"]
    assert (shape["shape"], shape["expected_shape"]) == ([4, 7], [4, 8])
    dtype = run.by_id[f"{TASK}::dtype"]["verdict"]["evidence"]
    assert (dtype["dtype"], dtype["expected_dtype"]) == ("torch.float64", "torch.float32")
    nonfinite = run.by_id[f"{TASK}::nonfinite"]["verdict"]
    assert nonfinite["evidence"]["index"] == [0, 0] and "NaN" in nonfinite["message"]

    segv = run.by_id[f"{TASK}::crash_segv"]["verdict"]
    assert segv["evidence"]["exit_code"] == -signal.SIGSEGV and "SIGSEGV" in segv["message"]
    abort = run.by_id[f"{TASK}::crash_abort"]["verdict"]
    assert abort["evidence"]["exit_code"] == -signal.SIGABRT and "SIGABRT" in abort["message"]
    assert "status 0" in run.by_id[f"{TASK}::exit_os"]["verdict"]["message"]
    assert "SystemExit" in run.by_id[f"{TASK}::exit_sys"]["verdict"]["message"]
    assert f"within {CALL_TIMEOUT} s" in run.by_id[f"{TASK}::timeout"]["verdict"]["message"]
    assert f"within {COMPILE_TIMEOUT} s" in run.by_id[f"{TASK}::compile_timeout"]["verdict"]["message"]
    syntax = run.by_id[f"{TASK}::syntax_error"]["verdict"]["message"]
    assert "line 5" in syntax
    assert "candidate refuses to import" in run.by_id[f"{TASK}::import_error"]["verdict"]["message"]
    assert "cannot build ModelNew" in run.by_id[f"{TASK}::init_error"]["verdict"]["message"]
    runtime = run.by_id[f"{TASK}::runtime_error"]["verdict"]
    assert "forward exploded" in runtime["message"] and "ValueError" in runtime["evidence"]["traceback"]
    bad_task = run.by_id["L1/2_bad_init::ok"]["verdict"]["message"]
    assert "L1/2_bad_init" in bad_task and "this task's Model is broken" in bad_task
    assert "cannot draw inputs" in run.by_id["L1/3_bad_inputs::ok"]["verdict"]["message"]


def test_next_item_passes_after_a_crash_exit_or_hang(run: Run) -> None:
    order = [r["candidate_name"] for r in run.records if r["task_id"] == TASK]
    for survivor, culprit in AFTER.items():
        assert order.index(survivor) == order.index(culprit) + 1, order
        assert reason(run.by_id[f"{TASK}::{culprit}"]) != "OK"
        assert reason(run.by_id[f"{TASK}::{survivor}"]) == "OK", run.by_id[f"{TASK}::{survivor}"]["verdict"]


def item_seconds(run: Run, item_id: str) -> float:
    """The item's call duration from ``--durations=0``."""
    for line in run.result.outlines:
        parts = line.split()
        if len(parts) == 3 and parts[1] == "call" and parts[2] == item_id and parts[0].endswith("s"):
            return float(parts[0][:-1])
    raise AssertionError(f"no duration for {item_id}")


@pytest.mark.parametrize("item_id", [f"{TASK}::timeout", f"{TASK}::compile_timeout"])
def test_hung_worker_was_killed_promptly(run: Run, item_id: str) -> None:
    # both candidates sleep 120 s; their items end near the timeout, not after the sleep
    assert item_seconds(run, item_id) < 90


def test_candidate_output_goes_to_its_log_not_the_channel(run: Run) -> None:
    logs = list((run.where / "cache" / "logs").glob("candidate-*noisy*.log"))
    assert len(logs) == 1
    text = logs[0].read_text(errors="replace")
    assert "NOISY-IMPORT-STDOUT" in text and "NOISY-IMPORT-STDERR" in text and "NOISY-FORWARD" in text
    assert "NOISY" not in run.text  # nothing reaches pytest's own output either


def test_reference_logs_are_kept_per_task(run: Run) -> None:
    names = {p.name for p in (run.where / "cache" / "logs").glob("reference-*.log")}
    assert {"reference-L1_1_tiny_relu.log", "reference-L1_2_bad_init.log", "reference-L1_3_bad_inputs.log"} <= names
    # the reference's own traceback is evidence of a bad task
    assert "this task's Model is broken" in run.by_id["L1/2_bad_init::ok"]["verdict"]["evidence"]["traceback"]


def test_ledger_is_strict_json(run: Run) -> None:
    def refuse(token: str) -> None:
        raise ValueError(f"non-JSON token {token}")

    for line in run.ledger_text.splitlines():
        json.loads(line, parse_constant=refuse)
