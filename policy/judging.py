"""Judge sources a policy wrote: the one path from a model's answer to a ledger line and an exemplar.

The optimizer loop and the trainer's reward function both hand their answers
here. Each answer's code is written as an ordinary candidate file
(``levelN/<task>/<name>.py``), built in parallel on all cores, then judged one
at a time by the same ``Judge`` that judges hand-written candidates. Every
verdict is appended to the ledger and, in the same step, to the exemplar
database, so a crash or Ctrl-C loses nothing already judged. An answer with no
code is a ``NO_CODE`` ledger line: it is recorded, never run.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Callable, Sequence

from kernelbench.loaders import Task, parse_problem_id
from policy.exemplars import ExemplarDB, Origin
from policy.parser import NoCode
from pytest_cudal1 import environment, ledger
from pytest_cudal1.candidates import Candidate
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord, Verdict


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One answer to judge: its candidate name (unique within the task), its code or why there is none,
    and how it came to be (``JudgedRecord.origin``: policy, backend, round, turn, parents, prompt_sha256…)."""

    name: str
    code: str | NoCode
    origin: dict[str, Any]


def candidate_folder(root: Path, task: Task) -> Path:
    """``root/level<L>/<id>_<name>``: the candidates layout ``--cudal1-candidates`` reads back."""
    if task.level is None or task.problem_id is None:
        raise ValueError(f"{task.id}: a candidate folder needs the task's level and problem id")
    name = task.name if parse_problem_id(task.name) == task.problem_id else f"{task.problem_id}_{task.name}"
    return root / f"level{task.level}" / name


class JudgingSession:
    """A ``Judge`` plus where its verdicts go: the ledger, the exemplar database, the candidate files."""

    def __init__(self, judge: Any, ledger_path: Path, db: ExemplarDB | None, candidates_root: Path,
                 on_record: Callable[[JudgedRecord], None] | None = None,
                 on_judging: Callable[[str, Candidate], None] | None = None, next_task: Task | None = None) -> None:
        self.judge = judge
        self.ledger_path = ledger_path
        self.db = db
        self.candidates_root = candidates_root
        self.on_record = on_record  # e.g. the pytest session: summary, report and benchmark rows
        self.on_judging = on_judging  # (item id, candidate) before each judgment: progress lines name it
        self.exemplar_ids: dict[str, int] = {}  # candidate_sha256 -> its database row, for a child's parents
        # The task judged after this one (the optimizer's next item): its reference worker starts and loads while
        # the last attempt of a round is judged, instead of at its first judgment (7-11 s a task on an H100).
        self.next_task = next_task

    @classmethod
    def standalone(cls, workdir: Path, ledger_path: Path, db: ExemplarDB | None, seed: int = 0,
                   next_task: Task | None = None, **judge_settings: Any) -> "JudgingSession":
        """A session outside pytest (the trainer): a ``Judge`` with ``JudgeConfig``'s defaults unless given."""
        from pytest_cudal1.builds import BuildPool
        from pytest_cudal1.judge import Judge, JudgeConfig

        cfg = JudgeConfig(seed=seed, workdir=workdir, **judge_settings)
        builds = BuildPool(workdir, cfg.compile_timeout, environment.gpu_facts().get("compute_capability"))
        return cls(Judge(cfg, builds, environment.has_gpu()), ledger_path, db, workdir / "candidates",
                   next_task=next_task)

    def close(self) -> None:
        self.judge.close()

    def judge_attempts(self, task: Task, attempts: Sequence[Attempt], stop: Callable[[], bool] | None = None,
                       more: bool = False) -> list[JudgedRecord]:
        """Build every attempt's code at once (and start the first ones' workers), then judge each in order;
        one record per attempt judged.

        ``stop`` is asked before each judgment (a time budget): once it says so, the
        remaining attempts are left unjudged and have no record. ``more``: other attempts will follow (a next
        round or group, not generated yet): a candidate worker for whichever comes first starts during the last
        judgment, as the next attempt's does during each other one (a fresh start cost 2-3 s an H100 round).
        """
        candidates = [self._write(task, a) if isinstance(a.code, str) else None for a in attempts]
        for cand in candidates:
            if cand is not None and self.judge.unavailable(cand) is None:
                self.judge.builds.submit(cand, self.judge.gpu, task)
        written = [(task, c) for c in candidates if c is not None]
        if written:
            self.judge.prefetch(written)  # the first ones' workers start while the builds run
        records = []
        for i, (attempt, cand) in enumerate(zip(attempts, candidates)):
            if stop is not None and stop():
                break
            if cand is not None and self.on_judging is not None:
                self.on_judging(f"{task.id}::{attempt.name}", cand)
            upcoming = [(task, c) for c in candidates[i + 1:] if c is not None]
            record = self._no_code(task, attempt) if cand is None else \
                self.judge.judge(task, cand, upcoming, self.next_task, more)
            record.origin = dict(attempt.origin)
            self._keep(task, record, cand)
            records.append(record)
        return records

    def _write(self, task: Task, attempt: Attempt) -> Candidate:
        path = candidate_folder(self.candidates_root, task) / f"{attempt.name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(attempt.code, encoding="utf-8")
        return Candidate(attempt.name, attempt.code, str(path), task.level, task.problem_id, path=str(path))

    def _no_code(self, task: Task, attempt: Attempt) -> JudgedRecord:
        assert isinstance(attempt.code, NoCode)
        return JudgedRecord(
            task_id=task.id, level=task.level, problem_id=task.problem_id, task_name=task.name,
            candidate_name=attempt.name, candidate_sha256=hashlib.sha256(b"").hexdigest(),
            candidate_origin=str(attempt.origin.get("backend", "")), backend="none",
            device="cuda" if self.judge.gpu else "cpu",
            verdict=Verdict(Reason.NO_CODE, attempt.code.reason), environment=environment.describe(),
            task_sha256=task.sha256)

    def _keep(self, task: Task, record: JudgedRecord, cand: Candidate | None) -> None:
        """Ledger first (the source of truth), then the database; skipped pairs earn nothing and go nowhere."""
        if record.verdict.reason.judged:
            ledger.append(self.ledger_path, record)
            if self.db is not None and cand is not None:
                o = record.origin or {}
                self.exemplar_ids[record.candidate_sha256] = self.db.add(record.to_json(), cand.source, task,
                            Origin(policy=str(o.get("policy", "unknown")), round=o.get("round"),
                                   parents=tuple(o.get("parents", ())), prompt_sha256=o.get("prompt_sha256")))
        if self.on_record is not None:
            self.on_record(record)
