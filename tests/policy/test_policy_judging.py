"""A policy's answers through the real judge: candidate files, ledger lines and exemplars in one step."""

from __future__ import annotations

from pathlib import Path

from kernelbench.loaders import BUNDLED_TASKS, load_tasks
from policy.exemplars import ExemplarDB
from policy.judging import Attempt, JudgingSession, candidate_folder
from policy.parser import NoCode, extract_code
from pytest_cudal1 import ledger

RELU = next(t for t in load_tasks(BUNDLED_TASKS)[0] if t.id == "L1/1_ReLU")
HONEST = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
'''
WRONG = HONEST.replace("clamp_min(0)", "clamp_min(0.5)")


def test_answers_become_candidate_files_ledger_lines_and_exemplars(tmp_path: Path) -> None:
    origin = {"policy": "test", "backend": "test", "round": 1, "turn": 0, "parents": [], "prompt_sha256": "ab" * 32}
    answers = [f"```python\n{HONEST}```", "I would use a fused kernel.", f"```python\n{WRONG}```"]
    attempts = [Attempt(f"a{i}", extract_code(text), origin) for i, text in enumerate(answers)]
    assert isinstance(attempts[1].code, NoCode)
    with ExemplarDB(tmp_path / "db.sqlite") as db:
        session = JudgingSession.standalone(tmp_path / "work", tmp_path / "ledger.jsonl", db, trials=2,
                                            timing=_short_timing())
        try:
            records = session.judge_attempts(RELU, attempts)
        finally:
            session.close()
        rows = db.all()
    assert [r.verdict.reason.value for r in records] == ["OK", "NO_CODE", "WRONG_OUTPUT"]
    assert records[1].verdict.message == attempts[1].code.reason and records[1].backend == "none"
    written = sorted(p.name for p in candidate_folder(tmp_path / "work" / "candidates", RELU).iterdir())
    assert written == ["a0.py", "a2.py"]  # no file for an answer without code
    lines = list(ledger.read(tmp_path / "ledger.jsonl"))
    assert [(r.candidate_name, r.verdict.reason.value, r.origin["round"]) for r in lines] == \
        [("a0", "OK", 1), ("a1", "NO_CODE", 1), ("a2", "WRONG_OUTPUT", 1)]
    assert all(r.task_sha256 == RELU.sha256 for r in lines)
    # Judged candidates become rows (the wrong one too, never a success); the answer without code does not.
    assert sorted((r.code == HONEST, r.reason) for r in rows) == [(False, "WRONG_OUTPUT"), (True, "OK")]
    assert [r.code for r in ExemplarDB(tmp_path / "db.sqlite").successes(RELU.sha256, rows[0].gpu)] == [HONEST]


def test_the_next_tasks_reference_loads_while_the_last_attempt_is_judged(tmp_path: Path) -> None:
    """The optimizer's next task (``next_task``): its reference worker is started and loads the task during the
    current task's last attempt, not when that task's attempts are handed in (then it loaded only while their
    builds ran, and an H100 waited 7-11 s a task for it); that task's first judgment takes it."""
    tanh = next(t for t in load_tasks(BUNDLED_TASKS)[0] if t.id != RELU.id and t.level == 1)
    same = tanh.source.replace("class Model(", "class ModelNew(")
    origin = {"policy": "test", "round": 1}
    spares = {}
    for following in (None, tanh):
        session = JudgingSession.standalone(tmp_path / "work", tmp_path / "ledger.jsonl", None, trials=2,
                                            timing=_short_timing(), next_task=following)
        try:
            session.judge_attempts(RELU, [Attempt("a0", HONEST, origin)])
            spare = session.judge.references.spare
            spares[following is not None] = spare[0] if spare else None
            (record,) = session.judge_attempts(tanh, [Attempt("b0", same, origin)])
        finally:
            session.close()
        assert record.verdict.reason.value == "OK", record.verdict.message
        assert record.warm_start["reference"] == "loaded_ahead"
    assert spares == {False: None, True: tanh.sha256}


def _short_timing():
    from pytest_cudal1.timing import TimingConfig

    return TimingConfig(budget_s=1.0, min_pairs=5, max_pairs=20)
