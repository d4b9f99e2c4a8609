"""The trainer's reward function: completions -> the real judge -> a smoothed speedup.

TRL calls a reward function with a batch of completions (G per prompt) and the
dataset's other columns (``task_id``, ``prompt_sha256``, ``parents``), plus
``trainer_state`` and ``log_metric``. Here every completion is parsed into an
``Attempt`` and handed to ``JudgingSession.judge_attempts``: built in parallel,
judged one at a time on this machine's GPU by the same judge as a hand-written
candidate, and appended to the ledger and the exemplar database in that step.
No reward is computed anywhere else: the judge's verdict and its own reward
(the rounded speedup, ``pytest_cudal1.reward``) are the only inputs to shaping.

Shaping (CUDA-L1): a success's reward is log(judge's speedup) normalised by the
mean and std of a rolling window of recent successes, clipped at ±clip; a
failure, a cheat or an answer with no code sits at the floor, -clip. Log-speedup
makes 2x faster and 2x slower symmetric around the reference.

Verdict reuse: the same code for the same task, already judged in this run, gets
that judgment's record again (counted as ``reused`` in the metrics, no new ledger
line). The verdict is still the judge's; only a repeated timing of identical
code is skipped. It keeps a tiny model that repeats itself (the CPU tests) fast;
``RewardSettings.reuse_verdicts = false`` judges every completion afresh.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from collections import Counter, deque
from typing import Any, Callable, Sequence

from kernelbench.loaders import Task
from policy.judging import Attempt, JudgingSession
from policy.parser import NoCode
from policy.train_config import RewardSettings
from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report import is_cheat


class RollingNormalizer:
    """Log-speedups of recent successes -> (x - mean) / std, clipped; failures (None) at -clip."""

    def __init__(self, settings: RewardSettings) -> None:
        self.settings = settings
        self.window: deque[float] = deque(maxlen=settings.window)

    def shape(self, raw: Sequence[float | None]) -> list[float]:
        """One reward per value; the group's successes join the window before it is normalised."""
        clip = self.settings.clip
        self.window.extend(x for x in raw if x is not None)
        if not self.window:
            return [-clip for _ in raw]
        mean = statistics.fmean(self.window)
        std = max(statistics.pstdev(self.window), self.settings.min_std)
        return [-clip if x is None else max(-clip, min(clip, (x - mean) / std)) for x in raw]


def log_speedup(record: JudgedRecord) -> float | None:
    """log of the judge's reward for a success; None for anything the judge did not pass."""
    if not record.verdict.passed or record.reward <= 0:
        return None
    return math.log(record.reward)


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes a string, or a list of chat messages for conversational prompts."""
    if isinstance(completion, str):
        return completion
    return str(completion[-1]["content"]) if completion else ""


class JudgeReward:
    """A TRL reward function whose rewards are the judge's verdicts, shaped; also the metrics' source."""

    __name__ = "judge"  # TRL names a reward function's logged columns after it

    def __init__(self, session: JudgingSession, tasks: Sequence[Task], to_code: Callable[[str], str | NoCode],
                 settings: RewardSettings, on_step: Callable[[dict[str, Any]], None] | None = None,
                 stage: str = "rl") -> None:
        self.session = session
        self.tasks = {t.id: t for t in tasks}
        self.to_code = to_code
        self.settings = settings
        self.normalizer = RollingNormalizer(settings)
        self.on_step = on_step
        self.stage = stage
        self.calls = 0
        self.seen: dict[tuple[str, str], JudgedRecord] = {}  # (task sha, code sha) -> this run's judgment
        self.best: dict[str, float] = {}  # task id -> best speedup a success earned in this run

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str],
                 trainer_state: Any = None, log_metric: Callable[[str, float], None] | None = None,
                 prompt_sha256: Sequence[str | None] | None = None, parents: Sequence[list[int]] | None = None,
                 **_columns: Any) -> list[float]:
        step = int(trainer_state.global_step) if trainer_state is not None else self.calls
        _, rewards = self.score(task_id, [completion_text(c) for c in completions], step, prompt_sha256, parents,
                                log_metric)
        return rewards

    def score(self, task_ids: Sequence[str], texts: Sequence[str], step: int,
              prompt_sha256: Sequence[str | None] | None = None, parents: Sequence[list[int]] | None = None,
              log_metric: Callable[[str, float], None] | None = None) -> tuple[list[JudgedRecord], list[float]]:
        """Judge ``texts`` (answers for ``task_ids``), shape their rewards, report the step's metrics."""
        origins = [{"policy": "train", "backend": "trainer", "stage": self.stage, "round": step,
                    "parents": list(parents[i]) if parents else [],
                    "prompt_sha256": prompt_sha256[i] if prompt_sha256 else None} for i in range(len(texts))]
        records, reused, judge_s = self.judge([self.tasks[t] for t in task_ids], texts, origins, step)
        rewards = self.normalizer.shape([log_speedup(r) for r in records])
        metrics = self.metrics(step, records, rewards, reused, judge_s)
        if log_metric is not None:
            for name, value in flat_metrics(metrics).items():
                log_metric(name, value)
        if self.on_step is not None:
            self.on_step(metrics)
        self.calls += 1
        return records, rewards

    def judge(self, tasks: Sequence[Task], texts: Sequence[str], origins: Sequence[dict[str, Any]],
              step: int) -> tuple[list[JudgedRecord], list[bool], float]:
        """One record per text (in order), which were reused, and the seconds spent judging."""
        records: list[JudgedRecord | None] = [None] * len(texts)
        reused = [False] * len(texts)
        todo: dict[str, list[tuple[int, Attempt, tuple[str, str] | None]]] = {}
        pending: set[tuple[str, str]] = set()
        later: list[tuple[int, tuple[str, str]]] = []  # repeats of code judged earlier in this same batch
        for i, (task, text, origin) in enumerate(zip(tasks, texts, origins)):
            code = self.to_code(text)
            key = (task.sha256, hashlib.sha256(code.encode()).hexdigest()) if isinstance(code, str) else None
            if key is not None and self.settings.reuse_verdicts and (key in self.seen or key in pending):
                later.append((i, key))
                continue
            if key is not None:
                pending.add(key)
            name = f"{self.stage}-{step:05d}-{self.calls:04d}-{i:03d}"
            todo.setdefault(task.id, []).append((i, Attempt(name, code, origin), key))
        start = time.monotonic()
        for task_id, items in todo.items():
            judged = self.session.judge_attempts(self.tasks[task_id], [a for _, a, _ in items], more=True)
            for (i, _, key), record in zip(items, judged):
                records[i] = record
                if key is not None:
                    self.seen[key] = record
        judge_s = time.monotonic() - start
        for i, key in later:
            records[i], reused[i] = self.seen[key], True
        assert all(r is not None for r in records)
        return records, reused, judge_s  # type: ignore[return-value]

    def metrics(self, step: int, records: Sequence[JudgedRecord], rewards: Sequence[float],
                reused: Sequence[bool], judge_s: float) -> dict[str, Any]:
        """The step's numbers: reward mean/std, success rate, cheats by reason, best speedup per task, judge time."""
        for r in records:
            if r.verdict.passed and r.speedup is not None:
                self.best[r.task_id] = max(self.best.get(r.task_id, 0.0), r.speedup)
        reasons = Counter(r.verdict.reason.value for r in records)
        fresh = len(records) - sum(reused)
        return {
            "stage": self.stage, "step": step, "completions": len(records), "judged": fresh,
            "reused": sum(reused),
            "reward_mean": statistics.fmean(rewards), "reward_std": statistics.pstdev(rewards),
            "success_rate": reasons.get("OK", 0) / len(records),
            "reasons": dict(sorted(reasons.items())),
            "cheats": {k: n for k, n in sorted(reasons.items()) if is_cheat(k)},
            "best_speedup": dict(sorted(self.best.items())),
            "judge_s_per_completion": judge_s / fresh if fresh else 0.0,
            "items": [{"task_id": r.task_id, "candidate": r.candidate_name, "candidate_sha256": r.candidate_sha256,
                       "reason": r.verdict.reason.value, "judge_reward": r.reward, "reward": shaped,
                       "reused": again} for r, shaped, again in zip(records, rewards, reused)],
        }


def flat_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The scalar metrics under ``judge/…`` names, for TRL's ``log_metric`` (averaged over a logging step)."""
    flat = {f"judge/{k}": float(metrics[k]) for k in ("success_rate", "judge_s_per_completion")}
    flat["judge/cheat_rate"] = sum(metrics["cheats"].values()) / metrics["completions"]
    flat.update({f"judge/cheats/{k}": float(n) for k, n in metrics["cheats"].items()})
    flat.update({f"judge/best_speedup/{k}": v for k, v in metrics["best_speedup"].items()})
    return flat
