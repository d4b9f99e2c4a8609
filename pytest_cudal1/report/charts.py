"""The inline SVG charts' geometry: log and linear axes, histograms, per-task bars and GPU-vs-GPU scatters."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report.figures import GpuInfo, best_per_task, correct_speedups, judged, usable_speedup
from pytest_cudal1.report.loading import gpu_key

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


class LinearAxis:
    """A linear axis over ``values`` onto pixels a..b, ticks at round steps (1, 2 or 5 × 10^k).

    The ends are widened to whole ticks, or, ``tight``, are the data's own (an x axis of steps);
    ``integer``: ticks at whole numbers only; ``fmt`` writes a tick's label.
    """

    def __init__(self, values: Iterable[float], a: float, b: float, integer: bool = False, tight: bool = False,
                 fmt: Callable[[float], str] = lambda v: f"{v:g}") -> None:
        vals = [v for v in values if math.isfinite(v)] or [0.0]
        lo, hi = min(vals), max(vals)
        if hi <= lo:
            lo, hi = (lo - 1, hi + 1) if lo else (0.0, 1.0)
        raw = (hi - lo) / 5
        k = 10.0 ** math.floor(math.log10(raw))
        self.step = next(m * k for m in (1, 2, 5, 10) if m * k >= raw - 1e-12)
        if integer:
            self.step = max(1.0, round(self.step))
        self.lo = lo if tight else math.floor(lo / self.step + 1e-9) * self.step
        self.hi = hi if tight else math.ceil(hi / self.step - 1e-9) * self.step
        self.a, self.b, self.fmt = a, b, fmt

    def __call__(self, v: float) -> float:
        v = min(max(v, self.lo), self.hi)
        return round(self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a), 2)

    def ticks(self) -> list[tuple[float, str]]:
        first, last = math.ceil(self.lo / self.step - 1e-9), math.floor(self.hi / self.step + 1e-9)
        return [(self(k * self.step), self.fmt(round(k * self.step, 10))) for k in range(first, last + 1)]


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

