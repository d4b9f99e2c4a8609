"""Paired timing, driven from the controller.

Each pair times the reference worker and the candidate worker once each, in
random order, on the same freshly derived inputs (``timing_inputs.TimingInputs``), so
clock and thermal drift hit both sides alike. Inside each worker a sample is:
L2 flush, device-wide synchronize, a spin kernel while the host queues the
first launch, start event, the calls, end event, and work still running on
other streams after the end event timed by a device-wide synchronize
(``timed_loop.timed_sample``) and added as the run's median (``timing_stats.counted_ms``); a
sample counts at least the host's time to queue its calls. The
speedup is the median of per-pair ratios with a bootstrap 95% interval; measuring stops when that
interval is within ``target_rel_ci`` of the median (after ``min_pairs``), when
``max_pairs`` is reached, or when the time budget runs out (after at least
``MIN_PAIRS``, so a slow candidate cannot stretch a run without bound).

Short kernels: when the reference's warm-up time is under ``short_ms``, every
sample runs several calls (each on its own fresh inputs) so that one sample
lasts about ``short_ms``; the number is chosen from the reference alone. On
CUDA both workers capture those calls as one CUDA graph and every sample
replays it (``timed_loop.TimedLoop``), so Python's launch rate does not set the
time; when either side cannot be captured, both run the calls eagerly and the
result says why.

Two measures per pair (``TimingConfig.measure``): ``kernel``, the above, and ``call``: eager calls,
each in a region of its own after the L2 flush with no hold before it, so the region spans the host's
launch of the call as well as the device's work on it (what a user's eager call costs; KernelBench,
CUDA-L1 and Triton's ``do_bench`` time calls this way). On a GPU a sample holds as many such regions as
fit ``call_sample_ms`` (chosen from the reference alone), so its requests and checks are paid once for
them. On the CPU the two are one measurement (``call_measure_on_cpu``). A candidate that wins only by
launching less (a CUDA-graph wrapper, fewer kernels) ties under ``kernel`` and wins under ``call``.

Samples rotate among buffer placements (graph captures, or eager memory pools;
``TimingConfig.placements``). A run measures one pair of worker processes; the
judge may time a candidate in several pairs and pool them (``timing_stats.pool_runs``), so the
interval covers the spread between processes too.

Outputs of timed calls are checked: every call's digest (numel, sums, and
order-sensitive random projections; ``fingerprints_match``) against the
reference's for the same inputs, within the comparison's own rounding model,
and against earlier calls' (a replay); a random subset of every call's
elements, at positions drawn after the calls returned, compared in full in
the reference worker; and whole outputs after the first pair, the last pair
and a random share of the others (drawn after the pair ran), so a candidate
cannot be honest only when checked; and, as in trials, their storage (apart from the inputs' and
from the outputs of the last calls) and the guard bytes around their inputs
(``timed_loop.TimedLoop.inspect``). The controller's wall clock around each sample
bounds what a worker may report, on both sides.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from typing import Any, Callable

from pytest_cudal1 import environment, unreported
from pytest_cudal1.call_checks import CallChecks
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import PairedTiming, Verdict
from pytest_cudal1.timing_stats import (bootstrap_median_ci, counted_pairs, device_ms, sample_ms, state_summary,
                                        state_warnings, summarize, tail_ms)
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

MIN_PAIRS = 3
# The most calls, each a region of its own, of one ``call`` measure sample (``TimingConfig.call_sample_ms``).
CALL_REGIONS = 16
# Work still running elsewhere after the call returned is always counted; it is worth a warning from here on.
ESCAPED_WARN_MS = 0.02
ESCAPED_WARN_SHARE = 0.05


@dataclasses.dataclass
class TimingConfig:
    warmup: int = 3
    min_pairs: int = 10
    max_pairs: int = 200
    budget_s: float = 10.0
    target_rel_ci: float = 0.02
    short_ms: float = 1.0
    # The ``call`` measure's calls shorter than this are timed several to a sample on a GPU (at most
    # ``CALL_REGIONS``), each in a region of its own, so that a sample's regions last about this long: a sample's
    # requests and checks cost ~7 ms on an H100 (session 34), around calls of 0.1-0.3 ms. A placement's calls
    # move at most this long's worth of memory traffic (~7 GB an H100 at 2 ms). 0 (until measured on a GPU):
    # one call a sample.
    call_sample_ms: float = 0.0
    audit_rate: float = 0.2
    call_timeout: float = 60.0
    graphs: bool = True  # replay short kernels' calls as a CUDA graph (eager batches when False)
    # Samples rotate among up to this many buffer placements, each with input sets and memory of its own
    # (graph captures, or eager memory pools): a kernel's time depends on where its buffers land (on the
    # H200 a streaming kernel's median moved by up to 3% from one placement to the next, and stayed put
    # within one), so one placement would be a single draw.
    placements: int = 8
    measure: str = "kernel"  # "kernel" (graph replays for short calls, a hold before the region) or "call"
    reserve_bytes: int = 0  # device (or host) memory the placements must leave free for the candidate


class AuditFailure(Exception):
    """A check on timed calls failed; carries the verdict.

    ``statistical``: the check compares medians over the run between the controller's clock and the
    worker's, which another process loading the machine can move for a while (``confirmed``)."""

    def __init__(self, verdict: Verdict, pair: int, statistical: bool = False) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict
        self.pair = pair
        self.statistical = statistical


def confirmed(measure: Callable[[], PairedTiming]) -> PairedTiming:
    """``measure()``, run once more when its statistical audit failed: only a failure that repeats stands.

    On a loaded 2-core machine an honest candidate's run once saw 10 ms per sample more around it than
    around the reference; a candidate that hides work outside its reported time does so in every run.
    The run that counts is the second, and its record says why it was taken; its ``wall_s`` books the first
    run's whole wall time as "discarded_run"."""
    started = time.perf_counter()
    try:
        return measure()
    except AuditFailure as exc:
        if not exc.statistical:
            raise
        first = exc.verdict.message
    discarded = time.perf_counter() - started
    try:
        again = measure()
    except AuditFailure as exc:
        if exc.statistical:
            exc.verdict.message += f"; the run before it too: {first}"
        raise
    again.warnings.append(f"measured twice: the first run's audit failed ({first})")
    again.wall_s["discarded_run"] = round(discarded, 4)
    return again


class WallClock:
    """Books the wall time of a timing run by step (``PairedTiming.wall_s``): each ``lap`` charges the time
    since the last one to its step, or everything to "setup" until ``setup_done``. Judging throughput is
    limited by what happens between timed regions (on the H200 a 10-pair run took 2-5 s around 0.05 s of
    timed calls); the record says where."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.in_setup = True
        self._last = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        step = "setup" if self.in_setup else step
        self.spent[step] = self.spent.get(step, 0.0) + now - self._last
        self._last = now

    def setup_done(self) -> None:
        self.lap("setup")
        self.in_setup = False

    def seconds(self) -> dict[str, float]:
        return {step: round(s, 4) for step, s in self.spent.items()}


def call_measure_on_cpu(kernel: PairedTiming) -> PairedTiming:
    """The ``call`` measure on the CPU: the ``kernel`` measure's own pairs, said so in the method.

    On the CPU both measures are the host clock around eager calls, launch (Python's dispatch) included,
    so they are one measurement. Timing one call per sample instead measured something else: the first
    call after the worker woke from its pipe (``benchmarks/results/2026-12-01-cpu-call-overhead/``: a
    3 us relu took 34 us so, 6.5 us batched).
    """
    return dataclasses.replace(kernel, method="call measure: the kernel measure's pairs (on the CPU both are the host "
                                              "clock around eager calls, launch included); " + kernel.method)


# A replayed capture whose outputs fail these is timed eagerly instead (work left outside the capture).
CAPTURE_VALUE_FAILURES = (Reason.WRONG_OUTPUT, Reason.OUTPUT_REPLAY, Reason.PRECISION_LOSS, Reason.NONFINITE_MISMATCH)


def measure_pairs(
    reference: WorkerProcess,
    candidate: WorkerProcess,
    cfg: TimingConfig,
    rng: random.Random,
    audit: Callable[[], Verdict | None],
    seen_digests: dict[tuple[Any, ...], list[list[Any]]] | None = None,
) -> PairedTiming:
    """Time reference and candidate in interleaved pairs; ``audit()`` checks the last pair's whole outputs.

    ``seen_digests`` (candidate digest -> reference digest from the correctness trials) lets a timed call
    that replays a trial's output be named OUTPUT_REPLAY.
    """
    as_called = cfg.measure == "call"

    def timed(worker: WorkerProcess, seed: int, turn: int, calls: int,
              graph: bool = False) -> tuple[dict[str, Any], float]:
        """One sample and the controller's wall clock around it, in three requests. The reference worker refills
        the worker's inputs (its own, or the candidate's shared ones: ``TimingInputs.mirror``), so the candidate
        never holds a seed; then the worker sets the sample up (its placement, the output poison, on the CPU a
        settling write: ``TimedLoop.settle``), which runs no candidate code; then the sample, on the controller's
        clock. The outputs' checks come after, untimed (on a loaded CPU, digests of large outputs varied by tens of
        ms and swamped the yardstick)."""
        wall.lap("statistics")  # the controller's own work since the last step
        body = {"turn": turn, "calls": calls, "graph": graph}
        reference.request("fill", {**body, "seed": seed, "side": worker.role, "theirs": shared[1]},
                          cfg.call_timeout * calls)
        worker.request("set_up", body, cfg.call_timeout * calls)
        wall.lap("refills")
        t0 = time.perf_counter()
        sample = worker.request("time", {**body, "hold": not as_called}, cfg.call_timeout * calls)
        wall_ms = (time.perf_counter() - t0) * 1e3
        wall.lap("samples")
        sample.update(worker.request("digests", None, cfg.call_timeout * calls))
        wall.lap("digests")
        return sample, wall_ms

    def place(calls: int) -> int:  # one untimed pass per placement
        shared[:] = _place(reference, candidate, calls, cfg.placements,
                           cfg.call_timeout * calls * cfg.placements + 60, cfg.reserve_bytes)
        return shared[0]

    wall = WallClock()
    checks = CallChecks(seen_digests if seen_digests is not None else {}, reference, candidate, rng,
                         cfg.call_timeout, wall)
    # ``rng`` draws what the candidate must not predict (``seeds.KeyedRandom``); the bootstrap only needs speed.
    boot = random.Random(rng.getrandbits(64))
    warm_ref = []
    shared = [0, 0]  # the reference's placements or captures, and the candidate's
    placements = place(1)
    for turn in range(cfg.warmup):  # warm-up calls are checked like timed ones, only not timed
        seed = rng.getrandbits(31)
        ref_sample = timed(reference, seed, turn, 1)[0]
        warm_ref.append(device_ms(ref_sample))
        bad = checks(-1, timed(candidate, seed, turn, 1)[0], ref_sample, seed)
        if bad is not None:
            raise AuditFailure(bad, -1)
    ref_warm = statistics.median(warm_ref)
    if as_called:  # each call a region of its own (on a GPU): as many as fit the sample's length, none beyond it
        events = ref_sample.get("event_ms") is not None
        calls = min(CALL_REGIONS, max(1, math.floor(cfg.call_sample_ms / max(ref_warm, 1e-4)))) if events else 1
    else:
        calls = 1 if ref_warm >= cfg.short_ms else min(1000, max(1, math.ceil(cfg.short_ms / max(ref_warm, 1e-4))))
    graph, eager_because, on_trial = False, "", 0
    if calls > 1 and cfg.graphs and not as_called and ref_sample.get("event_ms") is not None:
        eager_because, shared[:] = _capture(reference, candidate, calls, cfg.placements,
                                            cfg.call_timeout * calls + 60, cfg.reserve_bytes)
        placements = shared[0]
        graph = not eager_because
        # Each capture's first timed replay is its check as well: one that lost work (a value check fails) means
        # eager calls from the start, those pairs discarded; past them, a failure is the candidate's verdict.
        on_trial = shared[1]
    if not graph and calls > 1:
        placements = place(calls)
    wall.setup_done()

    raw: dict[str, list[tuple[float, float]]] = {"reference": [], "candidate": []}  # (ms per call, escaped ms)
    candidate_first: list[bool] = []  # per pair
    overheads: dict[str, list[float]] = {"reference": [], "candidate": []}
    gaps: dict[str, list[tuple[float, float]]] = {"reference": [], "candidate": []}  # (host - event, event) per call
    host_bound = {"reference": 0, "candidate": 0}  # samples whose host queued slower than the GPU ran
    states = [environment.gpu_state()]
    clock = "perf_counter"
    started = time.monotonic()
    stopped = "max_pairs"
    ci = (float("nan"), float("nan"))
    pair = 0
    while True:
        seed = rng.getrandbits(31)
        samples: dict[str, dict[str, Any]] = {}
        order = [reference, candidate]
        rng.shuffle(order)
        candidate_first.append(order[0] is candidate)
        for worker in order:
            sample, wall_ms = timed(worker, seed, pair, calls, graph)
            ms, clock = sample_ms(sample)
            escaped = float(sample.get("escaped_ms") or 0.0)
            if float(sample["host_ms"]) * calls > wall_ms * 1.05 + 0.05:
                raise AuditFailure(Verdict(Reason.TIMER_MISMATCH, f"{worker.role} reported {sample['host_ms']:.4g} ms "
                                           f"per call, longer than the controller's {wall_ms / calls:.4g} ms"), pair)
            samples[worker.role] = sample
            if sample.get("event_ms") is not None:
                host_bound[worker.role] += ms > float(sample["event_ms"])
                event = ms + escaped / calls
                gaps[worker.role].append((float(sample["host_ms"]) - event, event))
            overheads[worker.role].append(wall_ms - float(sample["host_ms"]) * calls)
            raw[worker.role].append((ms, escaped))
        wall.lap("statistics")
        states.append(environment.gpu_state())
        wall.lap("gpu_state")
        bad = checks(pair, samples["candidate"], samples["reference"], seed)
        if bad is not None and pair < on_trial and bad.reason in CAPTURE_VALUE_FAILURES:
            eager_because = f"the candidate's replayed graph failed the output check ({bad.reason.value})"
            graph, on_trial, pair, ci = False, 0, 0, (float("nan"), float("nan"))
            placements = place(calls)
            wall.lap("setup")
            for side in (*raw.values(), *overheads.values(), *gaps.values(), candidate_first):
                side.clear()
            host_bound = dict.fromkeys(host_bound, 0)
            states = [environment.gpu_state()]
            started = time.monotonic()
            continue
        if bad is not None:
            raise AuditFailure(bad, pair)
        pairs = pair + 1
        last = pairs == cfg.max_pairs
        out_of_time = time.monotonic() - started > cfg.budget_s
        if (pairs >= cfg.min_pairs and pairs % 5 == 0) or (out_of_time and pairs >= MIN_PAIRS):
            ratios = counted_pairs(raw, calls)[2]
            ci = bootstrap_median_ci([ratios], boot)
            med = statistics.median(ratios)
            if pairs >= cfg.min_pairs and (ci[1] - ci[0]) / 2 <= cfg.target_rel_ci * med:
                stopped, last = "converged", True
            elif out_of_time:
                stopped, last = "budget", True
        if pair == 0 or last or rng.random() < cfg.audit_rate:
            wall.lap("statistics")
            bad = audit()
            wall.lap("audits")
            if bad is not None:
                raise AuditFailure(bad, pair)
        if last:
            break
        pair += 1
    _check_clocks(gaps)
    ref_ms, cand_ms, ratios = counted_pairs(raw, calls)
    hidden, bound = unreported.per_pair(overheads)
    yardstick, idle = "reference's harness overhead", []
    if hidden > bound:  # a sample longer than the reference's has a slower harness around it: measure that
        wall.lap("statistics")
        idle = unreported.idle_overheads(reference, statistics.median(cand_ms) * calls, cfg.call_timeout * calls,
                                         regions=calls if as_called else 1)
        wall.lap("idle_samples")
        hidden, bound = unreported.against_idle(overheads["candidate"], idle)
        yardstick = "the harness's overhead around idle samples as long as the candidate's"
    if hidden > bound:
        raise AuditFailure(Verdict(
            Reason.TIMER_MISMATCH,
            f"the controller's clock saw {hidden:.3g} ms more per sample around the candidate than its reported "
            f"time explains ({yardstick} as the yardstick; {bound:.3g} ms allowed)",
            {"unreported_ms": hidden, "allowed_ms": bound, "candidate_reported_ms": statistics.median(cand_ms),
             "idle_overheads_ms": idle}),
            pairs - 1, statistical=True)
    if math.isnan(ci[0]) or stopped == "max_pairs":  # the last interval may predate the last pairs
        ci = bootstrap_median_ci([ratios], boot)
    warnings = state_warnings(states)
    ref_tail, cand_tail = tail_ms(raw["reference"], calls), tail_ms(raw["candidate"], calls)
    escaped_ms = cand_tail * calls
    if escaped_ms > max(ESCAPED_WARN_MS, ESCAPED_WARN_SHARE * statistics.median(cand_ms) * calls):
        warnings.append(f"work on other streams ran {escaped_ms:.4g} ms per sample past the call's "
                        "return on its stream; counted in the candidate's time")
    for role, n in host_bound.items():
        if 2 * n > pairs:
            warnings.append(f"the host took longer to queue the {role}'s calls than the GPU took to run them in "
                            f"{n} of {pairs} samples (host-bound); the queueing time was counted")
    method = ("cuda events, L2 flushed, other streams' tail counted" if clock == "cuda_event" else "host perf_counter")
    if as_called:
        method = ("call measure: " + ("one eager call per sample as a user makes it" if calls == 1 else
                                      f"eager calls as a user makes them, {calls} a sample, each in a region of its "
                                      "own after the L2 flush")
                  + ", launch included"
                  + (" (no hold before the start event), " if clock == "cuda_event" else " (the host clock around it), ")
                  + method)
    method += ", rotated input sets with fresh values per call"
    if calls > 1 and not as_called:
        method += f", {calls} calls per sample (short kernel)"
    wall.lap("statistics")
    if graph:
        method += f", replayed as one CUDA graph ({placements} captures with buffers of their own, rotated)"
    else:
        method += f", buffers rotated among {placements} placements"
    if eager_because:
        method += f", eager (no CUDA graph: {eager_because})"
    if idle:
        method += f", the harness's time around its samples weighed against {len(idle)} idle samples as long"
    return PairedTiming(
        reference=summarize(ref_ms, clock, calls, ref_tail),
        candidate=summarize(cand_ms, clock, calls, cand_tail),
        speedup=statistics.median(ratios),
        speedup_ci=ci,
        pairs=len(ratios),
        method=method,
        stopped_because=stopped,
        warnings=warnings,
        gpu_state=state_summary(states),
        wall_s=wall.seconds(),
        unreported_ms=hidden,
        unreported_allowed_ms=bound if math.isfinite(bound) else 0.0,
        candidate_first=candidate_first,
    )


def _check_clocks(gaps: dict[str, list[tuple[float, float]]]) -> None:
    """The candidate's host clock may not run past its events by more than its event time and the reference's gap.

    Medians over the run, not single samples: another process's kernels on the same GPU can hold
    one sample's first event back by a fraction of a millisecond, on either side.
    """
    if not gaps["candidate"] or not gaps["reference"]:
        return
    gap = statistics.median(g for g, _ in gaps["candidate"])
    event = statistics.median(e for _, e in gaps["candidate"])
    # A reference whose events outlast its host clock (eager calls timed without the hold: the GPU still
    # runs after the host queued) grants nothing below zero; as a yardstick it would make the rule stricter.
    ref_gap = max(0.0, statistics.median(g for g, _ in gaps["reference"]))
    if gap - ref_gap > max(0.05, event):
        evidence = {"host_minus_event_ms": gap, "event_ms": event, "reference_host_minus_event_ms": ref_gap}
        message = (f"the candidate's host clock ran {gap:.4g} ms per call past its events' {event:.4g} ms "
                   f"(the reference's: {ref_gap:.4g} ms)")
        raise AuditFailure(Verdict(Reason.TIMER_MISMATCH, message, evidence), len(gaps["candidate"]) - 1,
                           statistical=True)


def _sizing(worker: WorkerProcess, calls: int, most: int, reserve: int) -> dict[str, Any]:
    """What a worker needs to size its placements (``memory.placements_fitting``): the reference places
    first and leaves room for the candidate's placements (as many again) and the candidate's ``reserve``."""
    return {"calls": calls, "most": most, "reserve": reserve, "copies": 2 if worker.role == "reference" else 1}


def _place(reference: WorkerProcess, candidate: WorkerProcess, calls: int, most: int, timeout: float,
           reserve: int = 0) -> tuple[int, int]:
    """Have both workers set up their eager placements (``timed_loop.TimedLoop.place``); how many each has.
    The reference places first and shares the candidate's input sets with it (``TimingInputs.mirror``)."""
    reply = reference.request("place", _sizing(reference, calls, most, reserve), timeout)
    theirs = candidate.request("place", {**_sizing(candidate, calls, most, reserve), "shared": reply["shared"]},
                               timeout)
    for f in theirs.get("flags", []):
        raise AuditFailure(Verdict(Reason(f["code"]), f"while setting up timing: {f['detail']}"), -1)
    return int(reply["placements"]), _their_count(theirs)


def _their_count(reply: Any) -> int:
    """How many placements or captures the candidate's worker says it has: which of its shared input sets the
    reference refills (a wrong number leaves its calls stale inputs, which the output checks catch)."""
    count = reply.get("placements") if isinstance(reply, dict) else None
    if type(count) is not int:
        raise AuditFailure(Verdict(Reason.PROTOCOL_VIOLATION, f"setting up timing, the candidate's worker named "
                                   f"{str(count)[:40]!r} placements"), -1)
    return count


def _capture(reference: WorkerProcess, candidate: WorkerProcess, calls: int, most: int,
             timeout: float, reserve: int = 0) -> tuple[str, tuple[int, int]]:
    """Have both workers capture their timed loop as CUDA graphs: ('', how many captures each has) if both did,
    else (why not, (0, 0)).

    A side that cannot be captured (a host sync, a CPU fallback) is timed eagerly, and so is the
    other, so both are measured the same way. So is a candidate whose replayed graph gives wrong
    outputs (work launched outside the capture, or a capture-time shortcut): its eager calls,
    checked as always, are what it is judged on. A candidate that dies or hangs while captured
    fails as it would in any call; flags its capture raised (tampering, changed settings) fail it too.
    """
    body: dict[str, Any] = {}
    counts = []
    for worker in (reference, candidate):
        try:
            reply = worker.request("capture", {**_sizing(worker, calls, most, reserve), **body}, timeout)
        except WorkerFailure as exc:
            if worker.proc.poll() is not None:
                raise
            return f"{worker.role} could not be captured: {exc.message[:200]}", (0, 0)
        reply = reply if isinstance(reply, dict) else {}
        for f in reply.get("flags", []):
            raise AuditFailure(Verdict(Reason(f["code"]), f"while capturing a CUDA graph: {f['detail']}"), -1)
        body = {"shared": reply.get("shared", [])}
        counts.append(int(reply["placements"]) if worker is reference else _their_count(reply))
    return "", (counts[0], counts[1])
