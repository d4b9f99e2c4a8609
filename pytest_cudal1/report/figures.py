"""The figures: de-duplication, best candidates, fast_p, means, and per-GPU facts, one small function each."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from pytest_cudal1.candidates import simulated
from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report.loading import gpu_key, is_cheat, status

FAST_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def judged_time(record: JudgedRecord) -> float:
    """``judged_at`` as a POSIX time (naive times taken as UTC); 0 when unparsable."""
    try:
        t = _dt.datetime.fromisoformat(str(record.judged_at).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)).timestamp()


def latest(records: Iterable[JudgedRecord]) -> list[JudgedRecord]:
    """One record per (GPU, task, candidate name, source hash): the latest judged (a tie: the later given).

    A record without a source hash (rebuilt from a saved benchmark run) is dropped when a record with
    one exists for the same GPU, task and candidate. The survivors keep the order their key first appeared.
    """
    keep: dict[tuple[str, str, str, str], tuple[float, int, JudgedRecord]] = {}
    for i, r in enumerate(records):
        key = (gpu_key(r), r.task_id, r.candidate_name, r.candidate_sha256)
        when = judged_time(r)
        if key not in keep or when >= keep[key][0]:
            keep[key] = (when, keep[key][1] if key in keep else i, r)
    hashed = {k[:3] for k in keep if k[3]}
    return [r for k, (_, _, r) in sorted(keep.items(), key=lambda kv: kv[1][1])
            if k[3] or k[:3] not in hashed]  # a saved benchmark run (no hash) yields to a ledger's record


def judged(records: Iterable[JudgedRecord]) -> list[JudgedRecord]:
    """Records that were judged (not skipped for an unavailable backend)."""
    return [r for r in records if status(r) != "skipped"]


def is_simulated(record: JudgedRecord) -> bool:
    """Run under a CPU simulator (Triton's interpreter, Numba's simulator): a correctness check, not a speed."""
    return simulated(record.backend, record.device)


def usable_speedup(record: JudgedRecord, measure: str = "kernel") -> float | None:
    """The record's speedup (``"kernel"`` or ``"call"`` measure) when it is correct, not simulated, and the
    speedup a finite positive number."""
    s = record.call_speedup if measure == "call" else record.speedup
    if record.verdict.passed and not is_simulated(record) and s is not None and math.isfinite(s) and s > 0:
        return float(s)
    return None


def best_correct(records: Iterable[JudgedRecord]) -> JudgedRecord | None:
    """The correct record with the highest speedup (a correct one without timing if none has one)."""
    correct = [r for r in records if r.verdict.passed]
    timed = [r for r in correct if usable_speedup(r) is not None]
    if timed:
        return max(timed, key=lambda r: usable_speedup(r))  # type: ignore[arg-type, return-value]
    return correct[0] if correct else None


def by_task(records: Iterable[JudgedRecord]) -> dict[str, list[JudgedRecord]]:
    out: dict[str, list[JudgedRecord]] = {}
    for r in judged(records):
        out.setdefault(r.task_id, []).append(r)
    return out


def best_per_task(records: Iterable[JudgedRecord]) -> dict[str, JudgedRecord | None]:
    """Each judged task's best correct candidate, or None when none is correct."""
    return {task: best_correct(rs) for task, rs in by_task(records).items()}


def fast_p(records: Iterable[JudgedRecord], p: float) -> float | None:
    """Share of judged tasks whose best correct candidate is more than ``p`` times faster (fast_0: correct)."""
    best = best_per_task(records)
    if not best:
        return None

    def fast(r: JudgedRecord | None) -> bool:
        if r is None:
            return False
        if p == 0:
            return True
        s = usable_speedup(r)
        return s is not None and s > p

    return sum(fast(r) for r in best.values()) / len(best)


def correct_speedups(records: Iterable[JudgedRecord]) -> list[float]:
    """Speedups of the correct candidates (judged ones, finite and positive)."""
    return [s for s in (usable_speedup(r) for r in judged(records)) if s is not None]


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None when there are none."""
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals)) if vals else None


def rejections_by_reason(records: Iterable[JudgedRecord]) -> dict[str, int]:
    """Rejected candidates per reason code, most frequent first."""
    counts = Counter(r.verdict.reason.value for r in records if status(r) == "rejected")
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclasses.dataclass
class GroupStats:
    """The figures of one GPU, overall or for one level."""

    gpu: str
    scope: str  # "all" or "level N" or "no level"
    tasks_judged: int
    tasks_correct: int
    candidates_judged: int
    candidates_correct: int
    fast: dict[float, float | None]
    mean: float | None
    median: float | None
    geomean: float | None
    rejected: dict[str, int]
    skipped: int

    @property
    def cheats(self) -> int:
        return sum(n for code, n in self.rejected.items() if is_cheat(code))


def group_stats(gpu: str, scope: str, records: Sequence[JudgedRecord]) -> GroupStats:
    """All figures for one group of (already de-duplicated) records."""
    done = judged(records)
    best = best_per_task(done)
    speeds = correct_speedups(done)
    return GroupStats(
        gpu=gpu, scope=scope,
        tasks_judged=len(best), tasks_correct=sum(r is not None for r in best.values()),
        candidates_judged=len(done), candidates_correct=sum(r.verdict.passed for r in done),
        fast={p: fast_p(done, p) for p in FAST_P},
        mean=mean(speeds), median=median(speeds), geomean=geomean(speeds),
        rejected=rejections_by_reason(done), skipped=len(records) - len(done),
    )


def level_label(level: int | None) -> str:
    return f"level {level}" if level is not None else "no level"


def stats_by_gpu(records: Sequence[JudgedRecord]) -> list[GroupStats]:
    """Per GPU: overall, then per level (ascending)."""
    out = []
    for gpu in gpus_of(records):
        mine = [r for r in records if gpu_key(r) == gpu]
        out.append(group_stats(gpu, "all", mine))
        levels = sorted({r.level for r in mine}, key=lambda lv: (lv is None, lv or 0))
        for level in levels:
            out.append(group_stats(gpu, level_label(level), [r for r in mine if r.level == level]))
    return out


def gpus_of(records: Iterable[JudgedRecord]) -> list[str]:
    """GPU names in a stable order (by name, "cpu" last)."""
    return sorted({gpu_key(r) for r in records}, key=lambda g: (g == "cpu", g))


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def clocks_seen(records: Iterable[JudgedRecord]) -> dict[str, tuple[float, float]]:
    """Range (min, max) of every clock reading in the records' GPU state and environment."""
    seen: dict[str, list[float]] = {}
    for r in records:
        sources = [r.environment, r.timing.gpu_state if r.timing else {}]
        for source in sources:
            for path, v in flatten(source or {}):
                name = path.rsplit(".", 1)[-1]
                low = name.lower()
                if is_number(v) and ("clock" in low or "mhz" in low) and "reason" not in low and "event" not in low:
                    seen.setdefault(name, []).append(float(v))
    return {k: (min(v), max(v)) for k, v in sorted(seen.items())}


@dataclasses.dataclass
class GpuInfo:
    name: str
    color: str
    records: int
    facts: dict[str, list[str]]  # driver, cuda, torch, compute capability, host: distinct values
    clocks: dict[str, tuple[float, float]]
    first: str
    last: str


def gpu_infos(records: Sequence[JudgedRecord]) -> list[GpuInfo]:
    out = []
    for i, gpu in enumerate(gpus_of(records)):
        mine = [r for r in records if gpu_key(r) == gpu]
        facts = {}
        for key, label in (("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
                           ("compute_capability", "compute capability"), ("host", "host")):
            vals = sorted({str(r.environment[key]) for r in mine if r.environment.get(key) not in (None, "")})
            facts[label] = vals
        mem = sorted({r.environment["memory_bytes"] for r in mine if is_number(r.environment.get("memory_bytes"))})
        facts["memory"] = [f"{m / 2**30:.0f} GiB" for m in mem]
        dates = [r.judged_at for r in sorted(mine, key=judged_time)]
        out.append(GpuInfo(gpu, PALETTE[i % len(PALETTE)], len(mine), facts, clocks_seen(mine), dates[0], dates[-1]))
    return out


def commits_of(records: Iterable[JudgedRecord]) -> list[str]:
    keys = ("commit", "git_commit", "harness_commit")
    return sorted({str(r.environment[k]) for r in records for k in keys if r.environment.get(k)})


def harness_commit() -> str | None:
    """The git commit of the harness itself, when it runs from its own checkout; best effort."""
    root = Path(__file__).resolve().parents[2]  # report/ -> pytest_cudal1/ -> the checkout
    if not (root / ".git").exists():  # installed, or inside someone else's repository
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None

