"""Reward shaping on judged records: log-speedup, rolling normalisation, the clip, the floor for failures and cheats."""

from __future__ import annotations

import math
import statistics

import pytest

from policy.judge_reward import RollingNormalizer, flat_metrics, log_speedup
from policy.train_config import RewardSettings
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.reward import reward_for

from policy_records import code, record  # noqa: I001  (tests/policy is on sys.path via rootdir conftest)


def judged(speedup: float | None, reason: Reason = Reason.OK) -> JudgedRecord:
    """A ledger record with the reward the judge's own ``reward_for`` gives it."""
    r = JudgedRecord.from_json(record(code(f"{speedup}-{reason.value}"), reason=reason, speedup=speedup))
    r.reward = reward_for(r.verdict, r.timing)
    return r


def test_log_speedup_reads_the_judges_reward_and_nothing_for_a_failure() -> None:
    assert log_speedup(judged(2.0)) == pytest.approx(math.log(2.0))
    assert log_speedup(judged(1.006)) == 0.0  # the judge rounds toward 1.00: noise in the third decimal never pays
    assert log_speedup(judged(3.0, Reason.OUTPUT_REPLAY)) is None  # a fast cheat earns nothing
    assert log_speedup(judged(None, Reason.WRONG_OUTPUT)) is None


def test_rewards_are_normalised_over_the_window_clipped_and_failures_sit_at_the_floor() -> None:
    norm = RollingNormalizer(RewardSettings(clip=1.5, window=3, min_std=0.05))
    records = [judged(1.0), judged(2.0), judged(4.0, Reason.INPUT_MUTATED), judged(0.5), judged(None, Reason.NO_CODE)]
    shaped = norm.shape([log_speedup(r) for r in records])
    xs = [0.0, math.log(2.0), math.log(0.5)]
    mean, std = statistics.fmean(xs), statistics.pstdev(xs)
    assert shaped == pytest.approx([(0 - mean) / std, (xs[1] - mean) / std, -1.5, (xs[2] - mean) / std, -1.5])
    # The window keeps only the last 3 successes.
    norm.shape([math.log(100.0)])
    assert list(norm.window) == pytest.approx([math.log(2.0), math.log(0.5), math.log(100.0)])
    # A far faster success among reference-speed ones is clipped at +clip.
    assert RollingNormalizer(RewardSettings(clip=1.5)).shape([0.0] * 9 + [math.log(100.0)])[-1] == 1.5


def test_a_window_of_equal_speedups_gives_zero_not_a_division_by_zero() -> None:
    norm = RollingNormalizer(RewardSettings(min_std=0.05))
    assert norm.shape([0.0, 0.0, None]) == [0.0, 0.0, -1.5]
    assert norm.shape([None, None]) == [-1.5, -1.5]
    assert RollingNormalizer(RewardSettings()).shape([None]) == [-1.5]  # nothing succeeded yet


def test_judge_metrics_flatten_for_trl_log_metric() -> None:
    metrics = {"success_rate": 0.5, "judge_s_per_completion": 2.0, "completions": 4,
               "cheats": {"OUTPUT_ALIASES_INPUT": 1}, "best_speedup": {"L1/1_ReLU": 1.2}}
    assert flat_metrics(metrics) == {"judge/success_rate": 0.5, "judge/judge_s_per_completion": 2.0,
                                     "judge/cheat_rate": 0.25, "judge/cheats/OUTPUT_ALIASES_INPUT": 1.0,
                                     "judge/best_speedup/L1/1_ReLU": 1.2}


def test_the_metrics_log_reader_skips_a_torn_last_line_and_foreign_lines(tmp_path) -> None:
    """A run killed mid-write leaves a torn line; resume refills its reward window from the rest."""
    from policy.train_log import read

    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 0}\nnot json\n[1, 2]\n{"step": 1}\n{"step": 2, "rew', encoding="utf-8")
    assert [e["step"] for e in read(log)] == [0, 1]
