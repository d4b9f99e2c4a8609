"""One self-contained HTML report of speedups per GPU, from ledgers or saved benchmark runs.

``build_report(records, out)`` writes the page; ``pytest --cudal1-html=FILE`` calls
it at the end of a run and ``cudal1-report OUT.html LEDGER_OR_DIR ...`` (also
``python -m pytest_cudal1.report``) merges existing files into one page.

Every figure is computed here, one small function each, and the templates in
``templates/`` only lay them out (jinja2, autoescaped). The page fetches
nothing: styles, the sorting/filtering script and the SVG charts are inline.

Conventions, also stated in the page:

* A record's GPU is ``environment["gpu"]``, or ``"cpu"`` without one.
* The same candidate (task, name, source hash) judged more than once on one GPU
  counts once: its latest judgement (``judged_at``, then input order) is used.
* ``BACKEND_UNAVAILABLE`` records are skipped, not judged: they count nowhere.
* fast_p (KernelBench): the share of judged tasks with a correct candidate
  whose speedup is greater than p; fast_0 is the share of tasks solved at all.
  A per-task figure uses the task's best correct candidate (highest speedup).
* Mean, median and geometric-mean speedups are over correct candidates.
* Triton and Numba results without a GPU ran under a simulator: they count as
  correct, but their speedups count nowhere (they are marked ``simulated``).
* A rejection is a *cheat* when its code is not one of the honest failures
  below (loading, building, running, wrong values): the anti-cheat codes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from pytest_cudal1.candidates import simulated
from pytest_cudal1.reasons import Reason, describe
from pytest_cudal1.records import JudgedRecord, PairedTiming, TimingSummary, Verdict

FAST_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
TEMPLATES = Path(__file__).parent / "templates"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

# Rejections that are plain failures; any other rejection code is a cheat caught.
HONEST_FAILURES = frozenset({
    "BAD_TASK", "BAD_CANDIDATE_FILE", "REFERENCE_ERROR",
    "SYNTAX_ERROR", "IMPORT_ERROR", "COMPILE_ERROR", "COMPILE_TIMEOUT", "NO_MODELNEW", "INIT_ERROR",
    "RUNTIME_ERROR", "CUDA_ERROR", "OUT_OF_MEMORY", "TIMEOUT", "CRASH", "EARLY_EXIT", "PROTOCOL_VIOLATION",
    "STRUCTURE_MISMATCH", "SHAPE_MISMATCH", "DTYPE_MISMATCH", "DEVICE_MISMATCH", "NONFINITE_MISMATCH",
    "WRONG_OUTPUT", "NONDETERMINISTIC", "NO_CODE",
})
_LONG_TEXT_KEYS = ("log_tail", "traceback", "stderr", "stdout", "log")


# ------------------------------------------------------------ records in ---

def gpu_key(record: JudgedRecord) -> str:
    """The GPU a record was measured on, by name; ``"cpu"`` without one."""
    return str(record.environment.get("gpu") or "cpu")


def status(record: JudgedRecord) -> str:
    """``"correct"``, ``"rejected"`` or ``"skipped"`` (backend not available)."""
    if record.verdict.passed:
        return "correct"
    if not record.verdict.reason.judged:
        return "skipped"
    return "rejected"


def is_cheat(code: str) -> bool:
    """A rejection code that is not an honest failure (so an anti-cheat check fired)."""
    return code not in HONEST_FAILURES and code not in ("OK", "BACKEND_UNAVAILABLE", "REFERENCE_TOO_LARGE")


def kernels_of(record: JudgedRecord) -> list[str]:
    """Kernel names seen while the candidate ran (LIBRARY_ONLY verdicts also carry them as evidence)."""
    return [str(k) for k in record.kernels or record.verdict.evidence.get("kernels") or []]


def record_from(obj: JudgedRecord | Mapping[str, Any]) -> JudgedRecord:
    """A record from a record or its ``to_json()`` dict (which ``from_json`` leaves untouched)."""
    return obj if isinstance(obj, JudgedRecord) else JudgedRecord.from_json(obj)


_SIDE = re.compile(r"^(?P<item>.*)\[(?P<side>(?:reference|candidate)(?::call)?)\]$")
_TASK = re.compile(r"^L(?P<level>\d+)/(?P<name>(?P<problem>\d+)?.*)$")


def _benchmark_environment(data: Mapping[str, Any]) -> dict[str, Any]:
    """A record's ``environment`` from a saved pytest-benchmark run's machine and commit info."""
    machine = data.get("machine_info") or {}
    gpu = machine.get("gpu")
    env = {"gpu": None if gpu in (None, "", "none") else gpu, "driver": machine.get("gpu_driver"),
           "cuda": machine.get("cuda"), "torch": machine.get("torch"),
           "compute_capability": machine.get("compute_capability"), "host": machine.get("node")}
    env["device"] = "cuda" if env["gpu"] else "cpu"
    commit = (data.get("commit_info") or {}).get("id")
    if commit and commit != "unversioned":
        env["commit"] = commit
    return {k: v for k, v in env.items() if v is not None}


def _benchmark_summary(bench: Mapping[str, Any]) -> TimingSummary:
    st = bench.get("stats") or {}
    return TimingSummary(median_ms=st["median"] * 1e3, iqr_ms=st.get("iqr", 0.0) * 1e3, min_ms=st["min"] * 1e3,
                         mean_ms=st["mean"] * 1e3, n=int(st.get("rounds", 0)),
                         clock=str((bench.get("options") or {}).get("timer", "perf_counter")),
                         calls_per_sample=int(st.get("iterations", 1) or 1))


def _benchmark_timing(sides: Mapping[str, Mapping[str, Any]], info: Mapping[str, Any], measure: str) -> PairedTiming:
    """One measure's timing (``""``: kernel, ``"call"``) from its two saved benchmarks and the item's extra_info."""
    suffix, prefix = (f":{measure}", f"{measure}_") if measure else ("", "")
    ref, cand = _benchmark_summary(sides["reference" + suffix]), _benchmark_summary(sides["candidate" + suffix])
    return PairedTiming(reference=ref, candidate=cand, speedup=float(info[prefix + "speedup"]),
                        speedup_ci=tuple(info.get(prefix + "speedup_ci") or (math.nan, math.nan)),  # type: ignore[arg-type]
                        pairs=cand.n, method=str(info.get(prefix + "method", "")),
                        stopped_because="not saved (from a pytest-benchmark run)",
                        gpu_state=dict(info.get("gpu_state") or {}))


def records_from_benchmark_run(data: Mapping[str, Any]) -> list[JudgedRecord]:
    """Records rebuilt from a run saved by pytest-benchmark (``--benchmark-save``/``--benchmark-autosave``).

    ``benchmark_bridge`` saves each judged, timed item as two benchmarks, ``<item>[reference]`` and
    ``<item>[candidate]`` (and the ``call`` measure's ``<item>[reference:call]``, ``<item>[candidate:call]``), whose ``extra_info`` holds speedup, interval, verdict, method, GPU state and
    backend; the GPU, driver and CUDA come from ``machine_info``, the date from ``datetime``. Such a run
    holds no source hash, evidence or kernels, and no item that was rejected before timing.
    A benchmark whose ``extra_info`` is a whole record (or holds one under ``"cudal1"``) is taken as is.
    """
    env = _benchmark_environment(data)
    when = str(data.get("datetime") or "")
    out: list[JudgedRecord] = []
    items: dict[str, dict[str, Any]] = {}
    for bench in data.get("benchmarks") or []:
        info = (bench or {}).get("extra_info") or {}
        whole = info.get("cudal1", info)
        if isinstance(whole, Mapping) and "task_id" in whole and "verdict" in whole:
            try:
                record = record_from(whole)
            except (ValueError, KeyError, TypeError):
                continue
            for key, value in env.items():
                record.environment.setdefault(key, value)
            out.append(record)
            continue
        m = _SIDE.match(str(bench.get("name", "")))
        if m and "speedup" in info and "verdict" in info:
            items.setdefault(str(bench.get("group") or m["item"]), {})[m["side"]] = bench
    for item, sides in items.items():
        if not {"reference", "candidate"} <= set(sides) or "::" not in item:
            continue
        info = sides["candidate"]["extra_info"]
        task_id, candidate = item.rsplit("::", 1)
        task = _TASK.match(task_id)
        try:
            reason = Reason(info["verdict"])
            timing = _benchmark_timing(sides, info, "")
            call_timing = _benchmark_timing(sides, info, "call") if "candidate:call" in sides else None
        except (KeyError, TypeError, ValueError):
            continue
        out.append(JudgedRecord(
            task_id=task_id, level=int(task["level"]) if task else None,
            problem_id=int(task["problem"]) if task and task["problem"] else None,
            task_name=task["name"] if task else task_id, candidate_name=candidate, candidate_sha256="",
            candidate_origin=f"pytest-benchmark: {sides['candidate'].get('fullname', item)}",
            backend=str(info.get("backend", "")), device=env["device"],
            verdict=Verdict(reason, "from a saved pytest-benchmark run"), timing=timing, call_timing=call_timing,
            reward_measure=str(info.get("reward_measure", "kernel")),
            environment=dict(env), judged_at=when or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")))
    return out


def _records_in_json(data: Any) -> Iterator[JudgedRecord]:
    """The records in one parsed JSON document: a record, a list of them, or a saved benchmark run."""
    if isinstance(data, list):
        for item in data:
            yield from _records_in_json(item)
    elif isinstance(data, dict):
        if "task_id" in data and "verdict" in data:
            try:
                yield record_from(data)
            except (ValueError, KeyError, TypeError):
                return
        elif isinstance(data.get("benchmarks"), list):
            yield from records_from_benchmark_run(data)


def read_records(path: Path) -> list[JudgedRecord]:
    """Records in one ledger (JSONL), JSON list of records or saved pytest-benchmark run.

    Lines or entries that are not records (or use a reason code unknown here) are skipped.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    try:
        return list(_records_in_json(json.loads(text)))
    except ValueError:  # JSONL: one record per line; a torn final line is skipped
        pass
    records: list[JudgedRecord] = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n") or not line.strip():
            continue
        try:
            records.extend(_records_in_json(json.loads(line)))
        except ValueError:
            continue
    return records


def input_files(paths: Iterable[Path]) -> list[Path]:
    """The files named, with every ``*.jsonl`` and ``*.json`` under each folder named."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in (".jsonl", ".json")))
        else:
            files.append(p)
    return files


# --------------------------------------------------------------- figures ---

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


def usable_speedup(record: JudgedRecord) -> float | None:
    """The record's speedup when it is correct, not simulated, and the speedup a finite positive number."""
    s = record.speedup
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


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def clocks_seen(records: Iterable[JudgedRecord]) -> dict[str, tuple[float, float]]:
    """Range (min, max) of every clock reading in the records' GPU state and environment."""
    seen: dict[str, list[float]] = {}
    for r in records:
        sources = [r.environment, r.timing.gpu_state if r.timing else {}]
        for source in sources:
            for path, v in _flatten(source or {}):
                name = path.rsplit(".", 1)[-1]
                low = name.lower()
                if _is_number(v) and ("clock" in low or "mhz" in low) and "reason" not in low and "event" not in low:
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
        mem = sorted({r.environment["memory_bytes"] for r in mine if _is_number(r.environment.get("memory_bytes"))})
        facts["memory"] = [f"{m / 2**30:.0f} GiB" for m in mem]
        dates = [r.judged_at for r in sorted(mine, key=judged_time)]
        out.append(GpuInfo(gpu, PALETTE[i % len(PALETTE)], len(mine), facts, clocks_seen(mine), dates[0], dates[-1]))
    return out


def commits_of(records: Iterable[JudgedRecord]) -> list[str]:
    keys = ("commit", "git_commit", "harness_commit")
    return sorted({str(r.environment[k]) for r in records for k in keys if r.environment.get(k)})


def harness_commit() -> str | None:
    """The git commit of the harness itself, when it runs from its own checkout; best effort."""
    root = Path(__file__).resolve().parent.parent
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


# ---------------------------------------------------------------- charts ---

class LogAxis:
    """A log2 axis from ``lo`` to ``hi`` (powers of two around the data and 1x) onto pixels a..b."""

    def __init__(self, values: Iterable[float], a: float, b: float) -> None:
        vals = [v for v in values if v > 0 and math.isfinite(v)] + [1.0]
        self.lo = 2.0 ** math.floor(math.log2(min(vals)) - 1e-9)
        self.hi = 2.0 ** math.ceil(math.log2(max(vals)) + 1e-9)
        if self.hi <= self.lo:
            self.hi = self.lo * 2
        self.a, self.b = a, b

    def __call__(self, v: float) -> float:
        v = min(max(v, self.lo), self.hi)
        t = (math.log2(v) - math.log2(self.lo)) / (math.log2(self.hi) - math.log2(self.lo))
        return round(self.a + t * (self.b - self.a), 2)

    def ticks(self) -> list[tuple[float, str]]:
        k0, k1 = round(math.log2(self.lo)), round(math.log2(self.hi))
        step = max(1, math.ceil((k1 - k0) / 10))
        return [(self(2.0 ** k), fmt_factor(2.0 ** k)) for k in range(k0, k1 + 1, step)]


def fmt_factor(v: float) -> str:
    return f"{v:g}×" if v >= 1 else f"1/{1 / v:g}×"


def histogram(values: Sequence[float], bins_per_doubling: int = 2) -> list[tuple[float, float, int]]:
    """(lo, hi, count) over log2-spaced bins covering ``values``; bin edges are powers of 2**(1/n)."""
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    if not vals:
        return []
    n = bins_per_doubling
    idx = [math.floor(math.log2(v) * n + 1e-9) for v in vals]
    counts = Counter(idx)
    return [(2.0 ** (k / n), 2.0 ** ((k + 1) / n), counts.get(k, 0)) for k in range(min(idx), max(idx) + 1)]


def distribution_chart(records: Sequence[JudgedRecord], gpus: Sequence[GpuInfo]) -> dict[str, Any]:
    """Histogram of correct candidates' speedups, one band per GPU on a shared log axis."""
    per_gpu = {g.name: correct_speedups([r for r in records if gpu_key(r) == g.name]) for g in gpus}
    hists = {name: histogram(v) for name, v in per_gpu.items()}
    edges = [e for h in hists.values() for lo, hi, _ in h for e in (lo, hi)]
    left, width, band, gap = 190, 900, 90, 26
    x = LogAxis(edges, left, left + width - 10)
    bands = []
    for i, g in enumerate(gpus):
        top = 12 + i * (band + gap)
        h = hists[g.name]
        peak = max((c for _, _, c in h), default=1) or 1
        bars = [{"x": x(lo), "w": max(1.0, round(x(hi) - x(lo) - 1, 2)), "y": round(top + band - band * c / peak, 2),
                 "h": round(band * c / peak, 2), "lo": lo, "hi": hi, "count": c} for lo, hi, c in h if c]
        bands.append({"gpu": g.name, "color": g.color, "top": top, "bottom": top + band, "bars": bars,
                      "n": len(per_gpu[g.name]), "peak": peak})
    height = 12 + len(gpus) * (band + gap) + 20
    return {"width": left + width, "height": height, "left": left, "right": left + width - 10,
            "ticks": x.ticks(), "one": x(1.0), "bands": bands, "axis_y": height - 24}


def task_order(records: Iterable[JudgedRecord]) -> list[tuple[str, int | None]]:
    """(task id, level) of every judged task, by level, problem number, id."""
    seen: dict[str, JudgedRecord] = {}
    for r in records:
        seen.setdefault(r.task_id, r)
    order = sorted(seen.values(), key=lambda r: (r.level is None, r.level or 0, r.problem_id is None,
                                                 r.problem_id or 0, r.task_id))
    return [(r.task_id, r.level) for r in order]


def task_chart(records: Sequence[JudgedRecord], gpus: Sequence[GpuInfo]) -> dict[str, Any]:
    """Per task, the best correct speedup on each GPU as a bar from 1x (log axis)."""
    best = {g.name: best_per_task([r for r in records if gpu_key(r) == g.name]) for g in gpus}
    tasks = [t for t, _ in task_order(judged(records))]
    values = [s for b in best.values() for r in b.values() if r is not None
              for s in [usable_speedup(r)] if s is not None]
    left, width, bar, gap = 230, 860, 12, 10
    x = LogAxis(values, left, left + width - 10)
    rows, y = [], 12
    for task in tasks:
        bars = []
        for i, g in enumerate(gpus):
            yy = y + i * bar
            if task not in best[g.name]:
                continue
            r = best[g.name][task]
            s = usable_speedup(r) if r is not None else None
            if s is None:
                bars.append({"gpu": g.name, "color": g.color, "y": yy, "missing": True, "x": x(1.0),
                             "label": "no correct candidate" if r is None else "correct, not timed",
                             "candidate": r.candidate_name if r else ""})
            else:
                x0, x1 = sorted((x(1.0), x(s)))
                bars.append({"gpu": g.name, "color": g.color, "y": yy, "missing": False, "x": x0,
                             "w": max(1.0, round(x1 - x0, 2)), "speedup": s, "candidate": r.candidate_name})
        rows.append({"task": task, "y": y, "mid": y + len(gpus) * bar / 2, "bars": bars})
        y += len(gpus) * bar + gap
    return {"width": left + width, "height": y + 24, "left": left, "right": left + width - 10,
            "ticks": x.ticks(), "one": x(1.0), "rows": rows, "bar": bar - 2, "axis_y": y + 4}


def scatter_charts(records: Sequence[JudgedRecord], gpus: Sequence[GpuInfo]) -> list[dict[str, Any]]:
    """For each pair of GPUs, the tasks' best correct speedups on one against the other."""
    best = {g.name: {t: usable_speedup(r) for t, r in best_per_task([x for x in records if gpu_key(x) == g.name]).items()
                     if r is not None and usable_speedup(r) is not None} for g in gpus}
    out = []
    size, pad = 380, 60
    for i, ga in enumerate(gpus):
        for gb in gpus[i + 1:]:
            common = [t for t, _ in task_order(records) if t in best[ga.name] and t in best[gb.name]]
            vals = [best[ga.name][t] for t in common] + [best[gb.name][t] for t in common]
            ax = LogAxis(vals, pad, pad + size)
            ay = LogAxis(vals, pad + size, pad)  # y grows downwards
            points = [{"task": t, "sx": best[ga.name][t], "sy": best[gb.name][t],
                       "cx": ax(best[ga.name][t]), "cy": ay(best[gb.name][t]),
                       "label_left": ax(best[ga.name][t]) > pad + 0.6 * size} for t in common]
            out.append({"a": ga.name, "b": gb.name, "color_a": ga.color, "color_b": gb.color, "points": points,
                        "size": size, "pad": pad, "width": size + pad + 20, "height": size + pad + 50,
                        "xticks": ax.ticks(), "yticks": ay.ticks(), "x1": ax(1.0), "y1": ay(1.0),
                        "lo": (ax(ax.lo), ay(ax.lo)), "hi": (ax(ax.hi), ay(ax.hi))})
    return out


# ----------------------------------------------------------------- tables ---

@dataclasses.dataclass
class Cell:
    """One GPU's view of one candidate or task row."""

    record: JudgedRecord | None
    anchor: str | None = None  # id of its evidence section
    note: str = ""


def _candidate_key(r: JudgedRecord) -> tuple[str, str, str]:
    return (r.task_id, r.candidate_name, r.candidate_sha256)


def before_after(before: Any, after: Any) -> list[dict[str, Any]]:
    """Rows (key, before, after, changed) comparing two states, nested keys dotted."""
    b, a = dict(_flatten(before if isinstance(before, Mapping) else {"value": before})), \
        dict(_flatten(after if isinstance(after, Mapping) else {"value": after}))
    keys = list(b) + [k for k in a if k not in b]
    return [{"key": k, "before": b.get(k), "after": a.get(k), "changed": b.get(k) != a.get(k)} for k in keys]


def evidence_view(record: JudgedRecord) -> dict[str, Any]:
    """What the evidence section shows: mismatch headline, other fields, long texts, before/after."""
    ev = dict(record.verdict.evidence)
    texts = {k: str(ev.pop(k)) for k in list(ev) if k in _LONG_TEXT_KEYS or (isinstance(ev[k], str) and "\n" in ev[k])}
    texts = {k: t for k, t in texts.items() if t.strip()}  # an empty log is no evidence
    compare = None
    if "before" in ev and "after" in ev:
        compare = before_after(ev.pop("before"), ev.pop("after"))
    mismatch = None
    if "got" in ev and "expected" in ev:
        mismatch = {k: ev.pop(k) for k in ("where", "index", "got", "expected", "max_abs_err", "max_rel_err", "n_bad",
                                           "numel", "rtol") if k in ev}
    gpu_state = record.timing.gpu_state if record.timing else {}
    clocks = None
    if isinstance(gpu_state, Mapping) and "before" in gpu_state and "after" in gpu_state:
        clocks = before_after(gpu_state["before"], gpu_state["after"])
        gpu_state = {k: v for k, v in gpu_state.items() if k not in ("before", "after")}
    return {"fields": ev, "texts": texts, "compare": compare, "mismatch": mismatch, "clocks": clocks,
            "gpu_state": gpu_state or {}, "warnings": list(record.timing.warnings) if record.timing else [],
            "findings": findings_of(record)}


def findings_of(record: JudgedRecord) -> list[Any]:
    """Static findings (warnings from reading the source, never verdicts), when the record has them."""
    findings = getattr(record, "static_findings", None) or []
    return list(findings) if isinstance(findings, (list, tuple)) else [findings]


def needs_evidence(record: JudgedRecord) -> bool:
    """Rejected, or carrying something worth a look: timing warnings, GPU state, static findings."""
    return status(record) == "rejected" or bool(findings_of(record)) or \
        bool(record.timing and (record.timing.warnings or record.timing.gpu_state))


def build_context(records: Iterable[JudgedRecord | Mapping[str, Any]], title: str | None = None,
                  sources: Sequence[str] = (), commit: str | None = None) -> dict[str, Any]:
    """Everything the template shows, computed from the records."""
    given = [record_from(r) for r in records]
    recs = latest(given)
    gpus = gpu_infos(recs)
    names = [g.name for g in gpus]

    evidence, anchors = [], {}
    for r in recs:
        if needs_evidence(r):
            anchor = f"ev-{len(evidence) + 1}"
            anchors[id(r)] = anchor
            evidence.append({"anchor": anchor, "record": r, "gpu": gpu_key(r), "status": status(r),
                             "meaning": describe(r.verdict.reason.value), "view": evidence_view(r)})

    order = {t: i for i, (t, _) in enumerate(task_order(recs))}
    cand_rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    # Records without a source hash (from saved benchmark runs) join a row of the same name where they fit.
    for r in sorted(recs, key=lambda r: (order[r.task_id], not r.candidate_sha256)):
        key = _candidate_key(r)
        if not r.candidate_sha256:
            key = next((k for k, row in cand_rows.items() if k[:2] == key[:2]
                        and row["cells"][gpu_key(r)].record is None), key)
        row = cand_rows.setdefault(key, {
            "task": r.task_id, "level": r.level, "candidate": r.candidate_name, "sha": r.candidate_sha256[:10],
            "backend": r.backend, "cells": {g: Cell(None) for g in names}, "statuses": set()})
        row["cells"][gpu_key(r)] = Cell(r, anchors.get(id(r)))
        row["statuses"].add(status(r))
        if status(r) == "rejected" and is_cheat(r.verdict.reason.value):
            row["statuses"].add("cheat")

    row_of = {}
    for i, row in enumerate(cand_rows.values(), 1):
        row["id"] = f"c-{i}"
        for cell in row["cells"].values():
            if cell.anchor:
                row_of[cell.anchor] = row["id"]
    for e in evidence:
        e["row"] = row_of.get(e["anchor"])

    grouped: dict[tuple[str, str], list[JudgedRecord]] = {}
    for r in judged(recs):
        grouped.setdefault((gpu_key(r), r.task_id), []).append(r)
    task_rows = []
    for task, level in task_order(recs):
        cells, statuses = {}, set()
        for g in names:
            mine = grouped.get((g, task), [])
            if not mine:
                cells[g] = Cell(None)
                continue
            best = best_correct(mine)
            if best is not None:
                statuses.add("correct")
                cells[g] = Cell(best, anchors.get(id(best)), f"best of {len(mine)}" if len(mine) > 1 else "")
            else:
                statuses.add("rejected")
                codes = rejections_by_reason(mine)
                first = next(r for r in mine if r.verdict.reason.value == next(iter(codes)))
                cells[g] = Cell(None, anchors.get(id(first)),
                                ", ".join(f"{c} ×{n}" if n > 1 else c for c, n in codes.items()))
        task_rows.append({"task": task, "level": level, "cells": cells, "statuses": statuses,
                          "candidates": sum(1 for k in cand_rows if k[0] == task)})

    dates = [r.judged_at for r in sorted(given, key=judged_time)]  # superseded judgements were made too
    stats = stats_by_gpu(recs)
    all_reasons = sorted({code for s in stats for code in s.rejected})
    return {
        "title": title or "cudal1 report: speedups per GPU",
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gpus": gpus, "stats": stats, "fast_p": FAST_P,
        "reasons": [{"code": c, "meaning": describe(c), "cheat": is_cheat(c),
                     "counts": {s.gpu: s.rejected.get(c, 0) for s in stats if s.scope == "all"}} for c in all_reasons],
        "task_rows": task_rows, "cand_rows": list(cand_rows.values()), "evidence": evidence,
        "levels": sorted({r.level for r in recs if r.level is not None}),
        "backends": sorted({r.backend for r in recs}),
        "dist": distribution_chart(recs, gpus), "taskchart": task_chart(recs, gpus),
        "scatters": scatter_charts(recs, gpus),
        "first": dates[0] if dates else None, "last": dates[-1] if dates else None,
        "commits": commits_of(recs), "harness_commit": commit if commit is not None else harness_commit(),
        "harness_versions": sorted({r.harness_version for r in recs}),
        "sources": list(sources), "n_given": len(given), "n_records": len(recs),
        "superseded": len(given) - len(recs),
    }


# ------------------------------------------------------------- rendering ---

def fmt_ms(v: float | None) -> str:
    return "—" if v is None or not _is_number(v) else f"{v:.3g}"


def fmt_seconds(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"


def fmt_x(v: float | None) -> str:
    return "—" if v is None or not _is_number(v) else f"{v:.2f}×"


def fmt_ci(ci: Sequence[float] | None) -> str:
    if not ci or not all(_is_number(v) for v in ci):
        return ""
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def fmt_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def fmt_date(iso: str | None) -> str:
    """``2025-06-01T10:00:00+00:00`` as ``2025-06-01 10:00 UTC``; anything unparsable as given."""
    if not iso:
        return "—"
    try:
        t = _dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    if t.tzinfo is not None:
        return t.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return t.strftime("%Y-%m-%d %H:%M")


def fmt_p(p: float) -> str:
    return f"{p:g}"


def fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)) and all(not isinstance(x, (dict, list)) for x in v):
        return "(" + ", ".join(fmt_value(x) for x in v) + ")" if isinstance(v, tuple) else \
            "[" + ", ".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return "—" if v is None else str(v)


def sort_value(v: Any) -> str:
    """A ``data-sort`` attribute value: the full-precision number, or empty when missing."""
    return repr(float(v)) if _is_number(v) else ""


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(date=fmt_date, ms=fmt_ms, seconds=fmt_seconds, x=fmt_x, ci=fmt_ci, pct=fmt_pct, p=fmt_p, value=fmt_value, num=sort_value,
                       first_line=lambda s: (s or "").strip().splitlines()[0] if (s or "").strip() else "")
    env.globals.update(status=status, kernels_of=kernels_of, gpu_key=gpu_key, usable_speedup=usable_speedup,
                       is_simulated=is_simulated,
                       describe=describe, is_cheat=is_cheat)
    return env


def render_report(records: Iterable[JudgedRecord | Mapping[str, Any]], title: str | None = None,
                  sources: Sequence[str] = (), commit: str | None = None) -> str:
    """The report page as a string."""
    return _environment().get_template("report.html.j2").render(**build_context(records, title, sources, commit))


def build_report(records: Iterable[JudgedRecord | Mapping[str, Any]], out: str | os.PathLike[str],
                 title: str | None = None, *, sources: Sequence[str] = (), commit: str | None = None) -> Path:
    """Write the report for ``records`` (``JudgedRecord`` or ``to_json()`` dicts) to ``out``; return its path.

    The file is replaced atomically, so a reader never sees half a page.
    """
    out = Path(out)
    html = render_report(records, title, sources, commit)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")  # created with the umask's mode, like any file
    try:
        tmp.write_text(html, encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``cudal1-report OUT.html LEDGER_OR_DIR [...]``: merge ledgers and saved runs into one report."""
    parser = argparse.ArgumentParser(prog="cudal1-report", description=(
        "Merge cudal1 ledgers (JSONL), JSON record lists and saved pytest-benchmark runs, "
        "from one or several GPUs, into one self-contained HTML report."))
    parser.add_argument("out", type=Path, help="the HTML file to write")
    parser.add_argument("inputs", nargs="+", type=Path, help="ledger files, JSON files or folders holding them")
    parser.add_argument("--title", default=None, help="page title")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.inputs if not p.exists()]
    if missing:
        parser.error("no such file or folder: " + ", ".join(missing))
    records: list[JudgedRecord] = []
    used = []
    for f in input_files(args.inputs):
        try:
            found = read_records(f)
        except OSError as exc:
            print(f"cudal1-report: skipping {f}: {exc}", file=sys.stderr)
            continue
        if found:
            used.append(str(f))
            records.extend(found)
    if not records:
        print("cudal1-report: no judged records found in " + ", ".join(map(str, args.inputs)), file=sys.stderr)
        return 1
    path = build_report(records, args.out, args.title, sources=used)
    print(f"cudal1-report: wrote {path} ({len(records)} records from {len(used)} file(s), "
          f"{len(gpus_of(records))} GPU(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
