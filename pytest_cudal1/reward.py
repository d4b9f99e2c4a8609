"""Speedup -> reward, the number the policy trainer learns from.

A correct candidate earns its paired speedup rounded toward 1.00 at two
decimals (as CUDA-L1 does, so noise in the third decimal never pays); anything
rejected earns 0.0, below every correct candidate. Which speedup pays is the run's choice
(``--cudal1-speedup``): ``kernel`` (short calls replayed as CUDA graphs on both sides) or ``call``
(eager calls as a user makes them, launch included); both are recorded for every pair. Smoothing and clipping
across a training run belong to the trainer, which reads raw rewards from the ledger.
"""

from __future__ import annotations

import math

from pytest_cudal1.records import JudgedRecord, PairedTiming, Verdict

MEASURES = ("kernel", "call")


def timing_field(measure: str) -> str:
    """The record field (attribute, and key of its JSON) holding ``measure``'s timing: the one rule, for
    ``JudgedRecord`` objects here and for ledger dicts in the policy."""
    return "call_timing" if measure == "call" else "timing"


def measured(record: JudgedRecord, measure: str) -> PairedTiming | None:
    """The record's timing under ``measure`` (one of ``MEASURES``)."""
    return getattr(record, timing_field(measure))


def reward_for(verdict: Verdict, timing: PairedTiming | None) -> float:
    if not verdict.passed or timing is None or not math.isfinite(timing.speedup):
        return 0.0
    s = timing.speedup
    return math.floor(s * 100) / 100 if s >= 1 else math.ceil(s * 100) / 100
