"""Bucket sampling: the CUDA-L1 bucket probabilities, distinct buckets, determinism, the τ extremes."""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from policy.sampler import BucketSampler

SCORES = [1.0, 1.1, 1.2, 1.3, 2.0, 2.2, 4.0, 4.4, 9.0, 11.0]


def sampler(**kw) -> BucketSampler[float]:
    return BucketSampler(score=lambda x: x, **kw)


def test_buckets_are_equal_count_score_ranges() -> None:
    assert sampler(buckets=5).bucketize(list(reversed(SCORES))) == [
        [1.0, 1.1], [1.2, 1.3], [2.0, 2.2], [4.0, 4.4], [9.0, 11.0]]
    assert len(sampler(buckets=50).bucketize(SCORES)) == len(SCORES)  # never an empty bucket


def test_bucket_probability_follows_exp_of_mean_minus_mu_over_tau() -> None:
    s = sampler(buckets=5, tau=1.5)
    buckets = s.bucketize(SCORES)
    mu = sum(SCORES) / len(SCORES)
    raw = [math.exp((sum(b) / len(b) - mu) / 1.5) for b in buckets]
    assert s.probabilities(buckets) == pytest.approx([r / sum(raw) for r in raw])


def test_draws_come_from_distinct_buckets_and_repeat_with_the_seed() -> None:
    s = sampler(buckets=5, tau=2.0)
    bucket = {x: i for i, b in enumerate(s.bucketize(SCORES)) for x in b}
    draws = [s.sample(SCORES, random.Random(seed)) for seed in range(300)]
    assert all(len(d) == 2 and bucket[d[0]] != bucket[d[1]] for d in draws)
    assert draws == [s.sample(SCORES, random.Random(seed)) for seed in range(300)]
    assert len({tuple(d) for d in draws}) > 10  # not one fixed pair


def test_fewer_buckets_than_n_returns_what_exists() -> None:
    assert sampler(n=3).sample([2.0], random.Random(0)) == [2.0]
    assert sorted(sampler(n=3).sample([2.0, 1.0], random.Random(0))) == [1.0, 2.0]
    assert sampler().sample([], random.Random(0)) == []


def test_low_tau_favours_the_fastest_bucket_and_high_tau_is_near_uniform() -> None:
    def top_share(tau: float) -> float:
        s = sampler(n=1, buckets=5, tau=tau)
        rng = random.Random(1)
        return Counter(s.sample(SCORES, rng)[0] >= 9.0 for _ in range(2000))[True] / 2000

    assert top_share(0.2) > 0.99
    assert 0.15 < top_share(1e6) < 0.25  # one bucket of five
    # a bucket far behind never gets weight 0.0 once the better ones are drawn (no underflow error)
    assert len(sampler(n=5, buckets=5, tau=1e-3).sample(SCORES, random.Random(0))) == 5


@pytest.mark.parametrize("bad", [{"n": 0}, {"buckets": 0}, {"tau": 0.0}, {"tau": -1.0}])
def test_invalid_settings_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="BucketSampler"):
        sampler(**bad)


def test_tau_sweep_labels_published_scores(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import tau_sweep
    finally:
        sys.path.pop(0)
    corpus = tmp_path / "release.jsonl"
    corpus.write_text("".join(json.dumps({"score_default": s}) + "\n" for s in (1.5, None, 3.0)))
    speedups, kind = tau_sweep.load_corpus(corpus)
    assert speedups == [1.5, 3.0] and "PUBLISHED" in kind
