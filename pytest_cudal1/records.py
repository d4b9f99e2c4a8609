"""The one record type that flows right: candidate -> verdict -> timing -> reward.

A ``JudgedRecord`` is what the judge returns, what the ledger stores (one JSON
line each), and what the summary, report and policy read. Nothing downstream
recomputes a verdict or a speedup; it reads these fields.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from typing import Any

from pytest_cudal1 import __version__
from pytest_cudal1.reasons import Reason


@dataclasses.dataclass
class Verdict:
    """Pass/fail with a stable reason code and the evidence behind it."""

    reason: Reason
    message: str = ""
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.reason.passed


@dataclasses.dataclass
class TimingSummary:
    """Robust statistics over one side's timed calls, in milliseconds."""

    median_ms: float
    iqr_ms: float
    min_ms: float
    mean_ms: float
    n: int
    clock: str  # "cuda_event" or "perf_counter"
    calls_per_sample: int = 1
    samples_ms: list[float] = dataclasses.field(default_factory=list)  # per call, one per sample
    tail_ms: float = 0.0  # work past the call's end on other streams, per call, counted in every sample


@dataclasses.dataclass
class PairedTiming:
    """Reference and candidate timed in interleaved pairs within one run."""

    reference: TimingSummary
    candidate: TimingSummary
    speedup: float  # median of per-pair ratios t_ref / t_cand
    speedup_ci: tuple[float, float]  # bootstrap 95% interval of that median
    pairs: int
    method: str  # how each sample was taken, in words
    stopped_because: str  # "converged", "budget", "max_pairs"
    warnings: list[str] = dataclasses.field(default_factory=list)
    gpu_state: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Where the run's wall time went (``timing.WallClock``), seconds: set-up (placements, warm-up, captures),
    # then per pair the timed samples, the digest requests, element checks, audits, GPU-state queries and
    # the statistics, and idle samples where the unreported time needed them ("discarded_run": a first run measured
    # again, ``timing.confirmed``). The timed regions are a part of "samples"; the rest is the harness's overhead.
    wall_s: dict[str, float] = dataclasses.field(default_factory=dict)
    # The controller's clock around the candidate's samples beyond their reported time and the harness's own overhead
    # (the reference's samples', or idle samples' as long as the candidate's), ms per sample: what ``unreported``
    # bounds.
    unreported_ms: float = 0.0
    # How much of it that rule allowed: the most a timer forged in the candidate's process could take off a sample
    # unseen (docs/anticheat.md, JUDGE_TAMPERING), beside the candidate's sample (``candidate.median_ms`` times
    # ``candidate.calls_per_sample``).
    unreported_allowed_ms: float = 0.0
    # Per pair, whether the candidate's sample came first (the order is drawn per pair). Where a sample lands in its
    # pair moves it: on this project's 2-core CPU the second sample of a pair was ~10% slower on either side.
    candidate_first: list[bool] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class JudgedRecord:
    """Everything known about one judged (task, candidate) pair."""

    task_id: str
    level: int | None
    problem_id: int | None
    task_name: str
    candidate_name: str
    candidate_sha256: str
    candidate_origin: str
    backend: str
    device: str
    verdict: Verdict
    timing: PairedTiming | None = None  # the ``kernel`` measure: short calls replayed as CUDA graphs
    reward: float = 0.0
    compile_s: float | None = None
    first_call_ms: float | None = None
    peak_memory_bytes: int | None = None
    seed: int | None = None
    judge_seed: int | None = None  # seed of timing inputs, order and audits (``seeds``); of recipes with fresh trials
    kernels: list[str] = dataclasses.field(default_factory=list)  # GPU kernels one call launched (profiler)
    static_findings: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # warnings, never verdicts
    # Torch extensions whose build raised inside the candidate, which caught it (``workers.extension_failures``):
    # {"extension", "error" (the first), "attempts"}; what ran instead was judged.
    extension_failures: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    global_flags_set: list[str] = dataclasses.field(default_factory=list)  # allowed settings the candidate changed
    phase_s: dict[str, float] = dataclasses.field(default_factory=dict)  # wall clock per judging phase
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)  # gpu, driver, cuda, torch, host
    # The ``call`` measure: eager calls as a user makes them, each in a region of its own, launch included (``timing``'s docs).
    call_timing: PairedTiming | None = None
    reward_measure: str = "kernel"  # the measure the reward was taken from (``--cudal1-speedup``)
    task_sha256: str | None = None  # the task source's hash: the exemplar database's key
    # How the item's workers came up (``Judge.judge``): the reference worker "kept", "loaded_ahead" (a spare that
    # loaded the task while the previous item was judged) or "fresh"; the candidate's worker a "spare" (started for
    # it), "spare_any" (started before its code was written, for whichever candidate came), "spare_other"
    # (started for a candidate that was not judged next) or "fresh";
    # the libraries that worker imported at start-up ("preloaded").
    warm_start: dict[str, Any] = dataclasses.field(default_factory=dict)
    # How an optimizer-made candidate came to be (policy, backend, round, turn, parent exemplar ids,
    # prompt_sha256, prompt_path, tokens); None for a hand-written candidate.
    origin: dict[str, Any] | None = None
    # What the judge saw once and not again, so did not count (a check repeated on the same inputs).
    warnings: list[str] = dataclasses.field(default_factory=list)
    trials_cached: int = 0  # trials whose reference outputs the reference worker had computed for an earlier candidate
    harness_version: str = __version__
    judged_at: str = dataclasses.field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    @property
    def item_id(self) -> str:
        return f"{self.task_id}::{self.candidate_name}"

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if self.timing else None

    @property
    def call_speedup(self) -> float | None:
        return self.call_timing.speedup if self.call_timing else None

    def to_json(self) -> dict[str, Any]:
        """A plain-JSON dict; ``Reason`` values become their code strings."""
        data = dataclasses.asdict(self)
        data["verdict"]["reason"] = self.verdict.reason.value
        data["passed"] = self.verdict.passed
        data["speedup"] = self.speedup
        data["call_speedup"] = self.call_speedup
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JudgedRecord":
        """Inverse of ``to_json``; leaves ``data`` untouched."""
        data = dict(data)
        data.pop("passed", None)
        data.pop("speedup", None)
        data.pop("call_speedup", None)
        verdict = dict(data.pop("verdict"))
        verdict["reason"] = Reason(verdict["reason"])
        timing, call_timing = _timing_from(data.pop("timing", None)), _timing_from(data.pop("call_timing", None))
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(verdict=Verdict(**verdict), timing=timing, call_timing=call_timing,
                   **{k: v for k, v in data.items() if k in known})


def _timing_from(data: dict[str, Any] | None) -> PairedTiming | None:
    """A ``PairedTiming`` from its JSON form (``None`` stays ``None``)."""
    if data is None:
        return None
    data = dict(data)
    known = {f.name for f in dataclasses.fields(PairedTiming)}  # a newer harness's fields are left out, as above
    return PairedTiming(reference=TimingSummary(**data.pop("reference")), candidate=TimingSummary(**data.pop("candidate")),
                        speedup_ci=tuple(data.pop("speedup_ci")), **{k: v for k, v in data.items() if k in known})
