"""Timing in several worker-process pairs (``--cudal1-timing-processes``): pooled pairs, an interval over processes."""

from __future__ import annotations

import json
import random
import statistics
from typing import Any

import pytest

from cudal1_helpers import candidate_source, task_source, write_candidate, write_task
from pytest_cudal1.records import PairedTiming, TimingSummary
from pytest_cudal1.timing_stats import bootstrap_median_ci, pool_runs


def run_of(ref_ms: list[float], cand_ms: list[float]) -> PairedTiming:
    def side(samples: list[float]) -> TimingSummary:
        return TimingSummary(statistics.median(samples), 0.0, min(samples), statistics.fmean(samples), len(samples),
                             "cuda_event", samples_ms=samples)
    ratios = [r / c for r, c in zip(ref_ms, cand_ms)]
    return PairedTiming(side(ref_ms), side(cand_ms), statistics.median(ratios), (min(ratios), max(ratios)),
                        len(ratios), "cuda events", "converged", candidate_first=[i % 2 == 0 for i in range(len(ratios))])


def test_the_interval_covers_the_spread_between_processes() -> None:
    # The H200's L1/6 reference against itself, two processes: tight within each, 4% apart.
    first = [0.955 + 0.002 * (i % 5) for i in range(10)]
    second = [0.995 + 0.002 * (i % 5) for i in range(10)]
    rng = random.Random(1)
    lo, hi = bootstrap_median_ci([first, second], rng)
    assert lo <= statistics.median(first) and hi >= statistics.median(second)
    lo, hi = bootstrap_median_ci([first], rng)  # one process: only its own spread
    assert min(first) <= lo <= hi <= max(first)


def test_pooled_runs_keep_every_pair() -> None:
    a = run_of([1.0] * 10, [0.96] * 10)
    b = run_of([1.0] * 10, [1.00] * 10)
    pooled = pool_runs([a, b], random.Random(1))
    assert pooled.pairs == 20 and len(pooled.candidate.samples_ms) == 20
    assert pooled.candidate_first == a.candidate_first + b.candidate_first  # each pair's order, beside its samples
    assert 1.0 <= pooled.speedup <= 1 / 0.96
    assert pooled.speedup_ci[0] <= 1.0 and pooled.speedup_ci[1] >= 1 / 0.96 - 1e-9
    assert "in 2 worker-process pairs" in pooled.method


PID_PROBE = '''
import os
with open({probe!r}, "a") as f:
    f.write(str(os.getpid()) + "\\n")
'''


def judged_in_two_pairs(judge_run: Any, pytester: pytest.Pytester, header: str) -> tuple[Any, dict[str, Any]]:
    """Judge one ReLU candidate (``header`` after its imports) in two pairs of processes; (result, record)."""
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_relu", task_source())
    write_candidate(cands, 1, "1_relu", "relu", candidate_source(header=header))
    result, records = judge_run(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                                "--cudal1-timing-processes=2")
    (record,) = records
    return result, record


def test_each_pair_is_a_fresh_pair_of_processes(judge_run, pytester: pytest.Pytester) -> None:
    imports = pytester.path / "imports.txt"
    _, record = judged_in_two_pairs(judge_run, pytester, PID_PROBE.format(probe=str(imports)))
    assert record["verdict"]["reason"] == "OK", record["verdict"]
    assert len(set(imports.read_text().split())) == 2  # imported by the judged worker and by its timing twin
    timing = record["timing"]
    assert "in 2 worker-process pairs" in timing["method"]
    assert timing["pairs"] == len(timing["candidate"]["samples_ms"]) >= 2 * 3  # --cudal1-min-pairs=3 in each
    assert len(timing["candidate_first"]) == timing["pairs"]  # each pair's order, recorded beside its samples
    assert all(isinstance(first, bool) for first in timing["candidate_first"])


FAILS_SECOND_TIME = '''
import os
if os.path.exists({marker!r}):
    raise RuntimeError("imported once already")
open({marker!r}, "w").close()
'''


def test_a_candidate_failing_in_its_second_process_is_named_with_the_pair(judge_run,
                                                                          pytester: pytest.Pytester) -> None:
    marker = pytester.path / "imported"
    result, record = judged_in_two_pairs(judge_run, pytester, FAILS_SECOND_TIME.format(marker=str(marker)))
    assert record["verdict"]["reason"] == "IMPORT_ERROR"
    assert "in timing process pair 2" in record["verdict"]["message"]
    assert "imported once already" in json.dumps(record["verdict"])
    result.assert_outcomes(failed=1)
