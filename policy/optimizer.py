"""The optimizer loop for one task: exemplars -> prompt -> k answers -> the judge -> the best so far.

Each round samples earlier successes of this task on this GPU from the exemplar
database (bucket sampling), renders the contrastive prompt, asks the backend for
``per_round`` answers and judges them through ``JudgingSession`` (the same judge,
ledger and database as hand-written candidates). Turns after the first send each
answer of the previous turn back with its verdict (the refinement prompt). The
best correct candidate, by the reward measure, is kept in the output directory
(``OutputDir``) after every improvement, and the round count after every round,
so an interrupted run leaves a consistent folder that ``resume`` continues.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from kernelbench.loaders import Task
from policy import builtin
from policy.backends import Completion, GenerationBackend, GenerationRequest, SamplingSettings
from policy.exemplars import ExemplarDB, Exemplar, measure_of
from policy.judging import Attempt, JudgingSession, candidate_folder
from policy.parser import NoCode, extract_code
from policy.prompts import Prompt, PromptBuilder
from policy.sampler import DEFAULT_N, DEFAULT_TAU, BucketSampler
from pytest_cudal1.files import atomic_write
from pytest_cudal1.records import JudgedRecord

STATE_FILE = "optimizer-state.json"


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """How many rounds, answers and turns a task gets, and what the exemplars and the best are chosen by."""

    policy: str = "builtin"  # the backend spec, recorded in every origin
    rounds: int = 2
    per_round: int = 4  # k: answers to the contrastive prompt per round
    turns: int = 1  # 1: no refinement; t > 1: each answer goes back t - 1 times with its verdict
    task_budget_s: float | None = None  # no further judgments once a task has run this long
    exemplars: int = DEFAULT_N
    tau: float = DEFAULT_TAU
    measure: str = "kernel"  # the reward measure: the best candidate and the exemplars' scores
    sampling: SamplingSettings = SamplingSettings()
    seed: int = 0  # exemplar draws and the backend's sampling seed derive from it, per task, round and turn
    resume: bool = False


@dataclasses.dataclass
class TaskProgress:
    """What the optimizer did for one task, for progress lines and the final table (plain JSON)."""

    task_id: str
    policy: str
    rounds_done: int = 0
    tried: int = 0  # ledger lines written (judged candidates and NO_CODE answers)
    ok: int = 0
    rejected: dict[str, int] = dataclasses.field(default_factory=dict)  # reason code -> count
    skipped: int = 0  # pairs this machine could not judge (no ledger line)
    duplicates: int = 0  # answers whose code was already judged for this task on this GPU
    generation_failures: int = 0  # completions the backend could not produce
    exhausted: int = 0  # completions the policy left empty: it had nothing new to propose (the built-in one)
    last_failure: str | None = None
    tokens: dict[str, int] = dataclasses.field(default_factory=lambda: {"prompt": 0, "completion": 0})
    best: dict[str, Any] | None = None  # the best correct record (JudgedRecord.to_json())
    stopped: str = ""  # why the loop ended: "rounds", "budget"

    def count(self, record: JudgedRecord) -> None:
        if not record.verdict.reason.judged:
            self.skipped += 1
            return
        self.tried += 1
        if record.verdict.passed:
            self.ok += 1
        else:
            code = record.verdict.reason.value
            self.rejected[code] = self.rejected.get(code, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def speed(record: dict[str, Any], measure: str) -> float | None:
    """A record's speedup under ``measure`` ("kernel" or "call"), None if it was not timed."""
    found = measure_of(record, measure)
    return found.speedup if found else None


def better(record: dict[str, Any], than: dict[str, Any] | None, measure: str) -> bool:
    """Is ``record`` a correct candidate that beats ``than`` (by reward, then the raw speedup)?"""
    if not record["passed"] or speed(record, measure) is None:
        return False
    return than is None or (record["reward"], speed(record, measure)) > (than["reward"], speed(than, measure))


class OutputDir:
    """``OUT/levelN/<id>_<name>/``: the best candidate (``<name>.py`` + ``<name>.json``) and the loop's state.

    ``--cudal1-candidates=OUT`` reads the ``.py`` files back. Every file is
    replaced atomically; the new best pair is complete before the old one is
    removed, so every ``.py`` always has its record beside it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, task: Task) -> Path:
        return candidate_folder(self.root, task)

    def clear(self, task: Task) -> None:
        """A fresh (not resumed) run replaces the task's folder."""
        folder = self.folder(task)
        if folder.is_dir():
            for f in folder.iterdir():
                if f.is_file():
                    f.unlink()

    def state(self, task: Task) -> dict[str, Any]:
        path = self.folder(task) / STATE_FILE
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return state if state.get("task_sha256") == task.sha256 else {}

    def save_state(self, task: Task, progress: TaskProgress) -> None:
        atomic_write(self.folder(task) / STATE_FILE, json.dumps(
            {"task_sha256": task.sha256, **progress.to_json()}, indent=1, sort_keys=True))

    def write_best(self, task: Task, code: str, record: dict[str, Any]) -> None:
        folder, name = self.folder(task), record["candidate_name"]
        atomic_write(folder / f"{name}.json", json.dumps(record, indent=1, sort_keys=True))
        atomic_write(folder / f"{name}.py", code)
        for old in folder.iterdir():  # the older best: its .py first, so no .py is ever without its record
            if old.suffix == ".py" and old.stem != name:
                old.unlink()
        for old in folder.iterdir():
            if old.suffix == ".json" and old.name != STATE_FILE and old.stem != name:
                old.unlink()

    def write_prompt(self, prompt: Prompt) -> Path:
        path = self.root / "prompts" / f"{prompt.sha256}.md"
        if not path.exists():
            atomic_write(path, prompt.text)
        return path


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "big")


@dataclasses.dataclass
class _Request:
    """One prompt of a turn and what it came from (for each answer's origin)."""

    prompt: Prompt
    path: Path
    parents: list[int]
    shown: tuple[str, ...]  # the codes the prompt shows, best first


class TaskOptimizer:
    """Runs the rounds for one task; ``run`` returns its ``TaskProgress``."""

    def __init__(self, task: Task, backend: GenerationBackend, session: JudgingSession, db: ExemplarDB,
                 prompts: PromptBuilder, out: OutputDir, settings: OptimizerSettings, gpu: str, gpu_label: str,
                 on_round: Callable[[TaskProgress, int], None] | None = None) -> None:
        self.task, self.backend, self.session, self.db = task, backend, session, db
        self.prompts, self.out, self.settings = prompts, out, settings
        self.gpu, self.gpu_label = gpu, gpu_label  # the database's GPU key; the prompt's words for it
        self.on_round = on_round
        self.sampler = BucketSampler(self._score, n=settings.exemplars, tau=settings.tau)
        self.progress = TaskProgress(task.id, settings.policy)
        self.judged: set[str] = set()  # candidate hashes judged for this task (this run; with resume, earlier too)
        self.started = time.monotonic()
        self.rounds_run = 0  # rounds this run made (a resumed task may have none left)

    def _score(self, e: Exemplar) -> float:
        chosen = e.call if self.settings.measure == "call" else e.kernel
        return (chosen or e.kernel).speedup  # successes always carry the kernel measure

    def _out_of_time(self) -> bool:
        budget = self.settings.task_budget_s
        return budget is not None and time.monotonic() - self.started >= budget

    def _restore(self) -> None:
        """Resume: rounds done, counts and best from the output folder; judged code from the database."""
        state = self.out.state(self.task)
        fields = {f.name for f in dataclasses.fields(TaskProgress)}
        self.progress = TaskProgress(**{k: v for k, v in state.items() if k in fields} or
                                     {"task_id": self.task.id, "policy": self.settings.policy})
        self.progress.policy, self.progress.stopped = self.settings.policy, ""
        self.judged = {e.candidate_sha256 for e in self.db.all() if e.task_sha256 == self.task.sha256
                       and e.gpu == self.gpu}

    def run(self) -> TaskProgress:
        if self.settings.resume:
            self._restore()
        else:
            self.out.clear(self.task)
        self.progress.stopped = "rounds"
        for rnd in range(self.progress.rounds_done + 1, self.settings.rounds + 1):
            if self._out_of_time():
                self.progress.stopped = "budget"
                break
            self._round(rnd)
            self.rounds_run += 1
            self.progress.rounds_done = rnd
            self.out.save_state(self.task, self.progress)
            if self.on_round is not None:
                self.on_round(self.progress, rnd)
        self.out.save_state(self.task, self.progress)
        return self.progress

    def _round(self, rnd: int) -> None:
        requests = [self._contrastive(rnd)]
        counts = [self.settings.per_round]
        for turn in range(self.settings.turns):
            judged = self._turn(rnd, turn, requests, counts)
            if turn + 1 == self.settings.turns or self._out_of_time():
                return
            # Each answer of this turn that had code goes back with its verdict.
            requests = [self._refinement(code, record) for code, record in judged]
            counts = [1] * len(requests)
            if not requests:
                return

    def _contrastive(self, rnd: int) -> _Request:
        rng = random.Random(_seed(self.settings.seed, self.task.sha256, rnd))
        chosen = self.sampler.sample(self.db.successes(self.task.sha256, self.gpu), rng)
        prompt = self.prompts.contrastive(self.task, chosen, self.gpu_label)
        best_first = sorted(chosen, key=self._score, reverse=True)
        return _Request(prompt, self.out.write_prompt(prompt), [e.id for e in best_first],
                        tuple(e.code for e in best_first))

    def _refinement(self, code: str, record: JudgedRecord) -> _Request:
        prompt = self.prompts.refinement(self.task, code, record.to_json(), self.gpu_label)
        parent = self.session.exemplar_ids.get(record.candidate_sha256)
        return _Request(prompt, self.out.write_prompt(prompt), [parent] if parent is not None else [], (code,))

    def _generate(self, requests: Sequence[_Request], counts: Sequence[int], rnd: int,
                  turn: int) -> list[list[Completion]]:
        settings = dataclasses.replace(self.settings.sampling, seed=self.settings.sampling.seed if
                                       self.settings.sampling.seed is not None else
                                       _seed(self.settings.seed, self.task.sha256, rnd, turn))
        batch = [GenerationRequest(self.task, r.prompt.text, r.prompt.sha256, n, r.shown)
                 for r, n in zip(requests, counts)]
        try:
            return self.backend.generate(batch, settings)
        except Exception as exc:  # an unreachable server: this turn failed, the run goes on
            failed = Completion("", finish_reason="error", error=f"{type(exc).__name__}: {exc}")
            return [[failed] * n for n in counts]

    def _turn(self, rnd: int, turn: int, requests: Sequence[_Request],
              counts: Sequence[int]) -> list[tuple[str, JudgedRecord]]:
        """Generate, parse and judge one turn's answers; returns (code, record) of those judged with code."""
        attempts: list[Attempt] = []
        for request, completions in zip(requests, self._generate(requests, counts, rnd, turn)):
            for completion in completions:
                if completion.finish_reason == "exhausted":
                    self.progress.exhausted += 1
                    continue
                if completion.error is not None:
                    self.progress.generation_failures += 1
                    self.progress.last_failure = f"{self.backend.name}: {completion.error}"
                    continue
                self._count_tokens(completion)
                code = extract_code(completion.text)
                if isinstance(code, str):
                    sha = hashlib.sha256(code.encode()).hexdigest()
                    if sha in self.judged:  # same code, same judge, same GPU: its verdict is known
                        self.progress.duplicates += 1
                        continue
                    self.judged.add(sha)
                prefix = f"r{rnd}" if turn == 0 else f"r{rnd}_t{turn}"
                attempts.append(Attempt(f"{prefix}_c{len(attempts)}", code, self._origin(
                    request, rnd, turn, completion, code)))
        last = rnd == self.settings.rounds and turn + 1 == self.settings.turns
        records = self.session.judge_attempts(self.task, attempts, stop=self._out_of_time,
                                              more=not last or self.session.next_task is not None)
        judged = []
        for attempt, record in zip(attempts, records):
            self.progress.count(record)
            if isinstance(attempt.code, NoCode) or not record.verdict.reason.judged:
                continue
            judged.append((attempt.code, record))
            data = record.to_json()
            if better(data, self.progress.best, self.settings.measure):
                self.out.write_best(self.task, attempt.code, data)
                self.progress.best = data
        return judged

    def _count_tokens(self, completion: Completion) -> None:
        self.progress.tokens["prompt"] += completion.prompt_tokens or 0
        self.progress.tokens["completion"] += completion.completion_tokens or 0

    def _origin(self, request: _Request, rnd: int, turn: int, completion: Completion,
                code: str | NoCode) -> dict[str, Any]:
        origin = {"policy": self.settings.policy, "backend": self.backend.name, "round": rnd, "turn": turn,
                  "parents": list(request.parents), "prompt_sha256": request.prompt.sha256,
                  "prompt_path": str(request.path), "finish_reason": completion.finish_reason,
                  "tokens": {"prompt": completion.prompt_tokens, "completion": completion.completion_tokens}}
        # The built-in rewrite's name (``builtin_cuda_graph``): the report's baselines are found by it, the
        # candidate being named by round (``r1_c1``). Only the built-in policy's: a model may copy its marker line.
        steps = builtin.steps_of(code) if self.backend.name == "builtin" and isinstance(code, str) else None
        if steps is not None:
            origin["rewrite"] = builtin.Rewrite(steps).name
        return origin


def rejected_text(rejected: dict[str, int]) -> str:
    return ", ".join(f"{code} {n}" for code, n in sorted(rejected.items())) or "-"


def speedups_text(best: dict[str, Any] | None) -> str:
    """The best record's two measures, ``kernel 1.23x, call 1.30x``, or ``-``."""
    if best is None:
        return "-"
    return ", ".join(f"{m} {s:.2f}x" for m in ("kernel", "call") if (s := speed(best, m)) is not None)
