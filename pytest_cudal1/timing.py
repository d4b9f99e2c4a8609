"""Paired timing, driven from the controller.

Each pair times the reference worker and the candidate worker once each, in
random order, on the same freshly derived inputs (``runtime.fresh_inputs``), so
clock and thermal drift hit both sides alike. Inside each worker a sample is:
L2 flush, device-wide synchronize, start event, the calls, device-wide
synchronize, end event (``runtime.timed_sample``). The speedup is the median of
per-pair ratios with a bootstrap 95% interval; measuring stops when that
interval is within ``target_rel_ci`` of the median, when ``max_pairs`` is
reached or when the time budget runs out, never before ``min_pairs``.

Short kernels: when the reference's warm-up time is under ``short_ms``, every
sample runs several calls (each on its own fresh inputs) so that one sample
lasts about ``short_ms``; the number is chosen from the reference alone.

Outputs of timed calls are audited: after the first pair, the last pair and a
random share of the others (drawn after the pair ran), both workers' last
outputs are compared, so a candidate cannot be honest only when checked.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from typing import Any, Callable

from pytest_cudal1.records import PairedTiming, TimingSummary
from pytest_cudal1.workers.process import WorkerProcess


@dataclasses.dataclass
class TimingConfig:
    warmup: int = 3
    min_pairs: int = 10
    max_pairs: int = 200
    budget_s: float = 10.0
    target_rel_ci: float = 0.02
    short_ms: float = 1.0
    audit_rate: float = 0.2
    call_timeout: float = 60.0


class AuditFailure(Exception):
    """A timed call's output did not match the reference's output for the same inputs."""

    def __init__(self, verdict: Any, pair: int) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict
        self.pair = pair


def summarize(samples: list[float], clock: str, calls: int) -> TimingSummary:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return TimingSummary(
        median_ms=statistics.median(samples), iqr_ms=q[2] - q[0], min_ms=min(samples),
        mean_ms=statistics.fmean(samples), n=len(samples), clock=clock, calls_per_sample=calls,
    )


def bootstrap_median_ci(ratios: list[float], rng: random.Random, resamples: int = 300) -> tuple[float, float]:
    if len(ratios) < 2:
        return (ratios[0], ratios[0])
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return (meds[int(0.025 * resamples)], meds[int(math.ceil(0.975 * resamples)) - 1])


def _sample_ms(sample: dict[str, Any]) -> tuple[float, str]:
    if sample.get("event_ms") is not None:
        return float(sample["event_ms"]), "cuda_event"
    return float(sample["host_ms"]), "perf_counter"


def measure_pairs(
    reference: WorkerProcess,
    candidate: WorkerProcess,
    cfg: TimingConfig,
    rng: random.Random,
    audit: Callable[[Any, Any], Any],
) -> PairedTiming:
    """Time reference and candidate in interleaved pairs; ``audit(cand_out, ref_out)`` returns a Verdict or None."""
    def timed(worker: WorkerProcess, seed: int, calls: int) -> tuple[float, str, float]:
        t0 = time.perf_counter()
        sample = worker.request("time", {"seed": seed, "calls": calls}, cfg.call_timeout * calls)
        wall_ms = (time.perf_counter() - t0) * 1e3
        ms, clock = _sample_ms(sample)
        return ms, clock, wall_ms

    warm_ref = []
    for _ in range(cfg.warmup):
        seed = rng.getrandbits(31)
        warm_ref.append(timed(reference, seed, 1)[0])
        timed(candidate, seed, 1)
    ref_warm = statistics.median(warm_ref)
    calls = 1 if ref_warm >= cfg.short_ms else min(1000, max(1, math.ceil(cfg.short_ms / max(ref_warm, 1e-4))))

    ref_ms: list[float] = []
    cand_ms: list[float] = []
    ratios: list[float] = []
    warnings: list[str] = []
    clock = "perf_counter"
    started = time.monotonic()
    stopped = "max_pairs"
    ci = (float("nan"), float("nan"))
    for pair in range(cfg.max_pairs):
        seed = rng.getrandbits(31)
        order = [(reference, ref_ms), (candidate, cand_ms)]
        rng.shuffle(order)
        for worker, sink in order:
            ms, clock, wall_ms = timed(worker, seed, calls)
            if ms > wall_ms * 1.05 / calls + 0.05:
                warnings.append(f"{worker.role} reported {ms:.4g} ms per call but the controller saw {wall_ms / calls:.4g} ms")
            sink.append(ms)
        ratios.append(ref_ms[-1] / max(cand_ms[-1], 1e-9))
        last = pair == cfg.max_pairs - 1
        out_of_time = time.monotonic() - started > cfg.budget_s
        if len(ratios) >= cfg.min_pairs and (len(ratios) % 5 == 0 or out_of_time):
            ci = bootstrap_median_ci(ratios, rng)
            med = statistics.median(ratios)
            if (ci[1] - ci[0]) / 2 <= cfg.target_rel_ci * med:
                stopped, last = "converged", True
            elif out_of_time:
                stopped, last = "budget", True
        if pair == 0 or last or rng.random() < cfg.audit_rate:
            bad = audit(candidate.request("output", None, cfg.call_timeout), reference.request("output", None, cfg.call_timeout))
            if bad is not None:
                raise AuditFailure(bad, pair)
        if last:
            break
    if math.isnan(ci[0]):
        ci = bootstrap_median_ci(ratios, rng)
    method = ("cuda events, L2 flushed, device-wide sync" if clock == "cuda_event" else "host perf_counter")
    method += ", fresh inputs per call" + (f", {calls} calls per sample (short kernel)" if calls > 1 else "")
    return PairedTiming(
        reference=summarize(ref_ms, clock, calls),
        candidate=summarize(cand_ms, clock, calls),
        speedup=statistics.median(ratios),
        speedup_ci=ci,
        pairs=len(ratios),
        method=method,
        stopped_because=stopped,
        warnings=warnings[:5],
    )
