"""What a candidate may not hide: the controller's wall clock around its timed samples against the time it reported.

A timer forged past the tamper watch reports less than the call took; the controller's clock around the sample
still sees the whole of it. What that clock sees beyond the reported time is the harness's own (the round trip,
the reply's encoding, waking up) plus whatever the candidate hid, so it is weighed against a yardstick of the
harness's own: first the reference's samples of the same pairs (``per_pair``); where that fails, samples of
nothing as long as the candidate's, run by the reference worker (``against_idle``). The harness's time after a
sample grows with the sample's length: on this project's 2-core virtual machine its code ran cold after a long
call, and a candidate that slept or spun 3.5 s per sample showed 2.4-9.6 ms around it against its reference's
0.2-1.0 ms, where idle samples as long showed 4.7-9.4 ms (benchmarks/results/2026-12-07-CPU-session36). Idle
samples as long as the *reported* time grant a forger nothing: its hidden work makes its samples longer than theirs.
"""

from __future__ import annotations

import math
import statistics
import time

from pytest_cudal1.workers.process import WorkerProcess

# A candidate's controller-seen overhead per sample may exceed the yardstick's by at most this much, by this many
# standard errors of that difference or by this share of the yardstick's overhead, whichever is most: the
# harness's own time around the samples is noisy where it refills large inputs, and slower in a process another
# one starves of a core. The standard error comes from the yardstick's spread alone: the candidate's own could be
# widened by it. Honest medians against the reference's samples: -0.19 to 0.29 ms on the loaded 2-core CPU
# (38 candidates, samples of 0.1-600 ms; session 29), -0.40 to 0.20 ms on the H100 (12, session 29). 5 ms, or half
# a sample, let a candidate that disarmed the tamper watch report a hundredth of its time.
UNREPORTED_MS = 0.5
UNREPORTED_SIGMAS = 4.0
UNREPORTED_SHARE = 0.25
# Idle samples in the second yardstick: half spinning on the host clock, half asleep (a process woken from a long
# sleep runs its first code colder still).
IDLE_SAMPLES = 6


def per_pair(overheads: dict[str, list[float]]) -> tuple[float, float]:
    """The median of the candidate's controller-seen overhead less the reference's, per pair (both seen under the
    same load), and how much of it is allowed.

    The standard error is that of a difference of two samples of the reference's overhead (from its interquartile
    range), never the candidate's: a forger that hid a random share of each sample widened the spread of the
    differences, and so its own allowance, past what it hid
    (``tests/test_timing_rules.py::test_a_timer_forged_by_a_random_share_is_a_timer_mismatch``)."""
    diffs = [c - r for c, r in zip(overheads["candidate"], overheads["reference"])]
    if len(diffs) < 2:
        return (diffs or [0.0])[0], math.inf
    error = _spread(overheads["reference"]) * math.sqrt(2 / len(diffs))
    return statistics.median(diffs), _allowed(error, overheads["reference"])


def against_idle(candidate: list[float], idle: list[float]) -> tuple[float, float]:
    """The median of the candidate's overheads less the idle samples', and how much of it is allowed (the standard
    error of a difference of two medians, from the idle samples' spread)."""
    error = _spread(idle) * math.sqrt(1 / len(candidate) + 1 / len(idle))
    return statistics.median(candidate) - statistics.median(idle), _allowed(error, idle)


def idle_overheads(reference: WorkerProcess, sample_ms: float, timeout: float, regions: int = 1) -> list[float]:
    """The controller-seen overhead around ``IDLE_SAMPLES`` samples of nothing ``sample_ms`` long in the reference
    worker (``timed_loop.idle_sample``; in ``regions`` parts as a ``call`` measure sample's calls), waited for as a
    timed sample is."""
    overheads = []
    for i in range(IDLE_SAMPLES):
        t0 = time.perf_counter()
        sample = reference.request("time_idle", {"ms": sample_ms, "asleep": i % 2 == 1, "regions": regions}, timeout)
        overheads.append((time.perf_counter() - t0) * 1e3 - float(sample["host_ms"]))
    return overheads


def _spread(overheads: list[float]) -> float:
    """1.253 sigma, sigma from the interquartile range: a normal median's standard error is this over sqrt n."""
    q1, _, q3 = statistics.quantiles(overheads, n=4)
    return 1.253 * (q3 - q1) / 1.349


def _allowed(error: float, yardstick: list[float]) -> float:
    return max(UNREPORTED_MS, UNREPORTED_SIGMAS * error, UNREPORTED_SHARE * statistics.median(yardstick))
