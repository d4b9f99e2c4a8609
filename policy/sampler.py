"""Bucket sampling of exemplars for the contrastive prompt (CUDA-L1, "bucket sampling").

Codes are sorted by score and cut into buckets of (nearly) equal size; a bucket
is drawn with probability P(B_i) ∝ exp((s̄_i − μ)/τ), s̄_i its mean score and μ
the mean over all codes; N distinct buckets are drawn without replacement and
one code uniformly from each. A low τ favours the fastest codes, a high τ
approaches uniform; distinct buckets keep the exemplars' speeds apart, so the
prompt has a contrast to explain. The paper does not publish τ; the default
comes from ``benchmarks/tau_sweep.py`` (see its results folder).
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Callable, Generic, Sequence, TypeVar

T = TypeVar("T")

DEFAULT_N = 2
DEFAULT_BUCKETS = 8
DEFAULT_TAU = 2.0  # in speedup units; the τ sweep's widest contrast, see benchmarks/results/2026-12-01-cpu-tau-sweep/


@dataclasses.dataclass(frozen=True)
class BucketSampler(Generic[T]):
    """Draws ``n`` exemplars from ``n`` distinct score buckets; ``score`` reads an item's score (speedup)."""

    score: Callable[[T], float]
    n: int = DEFAULT_N
    tau: float = DEFAULT_TAU
    buckets: int = DEFAULT_BUCKETS

    def __post_init__(self) -> None:
        if self.n < 1 or self.buckets < 1 or not self.tau > 0:
            raise ValueError(f"BucketSampler needs n >= 1, buckets >= 1 and tau > 0 (got n={self.n}, "
                             f"buckets={self.buckets}, tau={self.tau})")

    def bucketize(self, items: Sequence[T]) -> list[list[T]]:
        """Items sorted by score and cut into at most ``buckets`` groups of nearly equal size, slowest first."""
        ranked = sorted(items, key=self.score)
        k = min(self.buckets, len(ranked))
        return [ranked[i * len(ranked) // k:(i + 1) * len(ranked) // k] for i in range(k)]

    def probabilities(self, buckets: Sequence[Sequence[T]]) -> list[float]:
        """P(B_i) ∝ exp((s̄_i − μ)/τ), computed stably (shifted by the largest exponent)."""
        scores = [self.score(x) for b in buckets for x in b]
        mu = sum(scores) / len(scores)
        exps = [(sum(map(self.score, b)) / len(b) - mu) / self.tau for b in buckets]
        top = max(exps)
        weights = [math.exp(e - top) for e in exps]
        total = sum(weights)
        return [w / total for w in weights]

    def sample(self, items: Sequence[T], rng: random.Random) -> list[T]:
        """``n`` items from distinct buckets (fewer when fewer buckets exist), in the order drawn."""
        if not items:
            return []
        buckets = self.bucketize(items)
        chosen: list[T] = []
        for _ in range(min(self.n, len(buckets))):
            # Renormalised over the buckets left (μ cancels), so a far-behind bucket never has weight 0.0.
            i = rng.choices(range(len(buckets)), weights=self.probabilities(buckets))[0]
            chosen.append(rng.choice(buckets.pop(i)))
        return chosen
