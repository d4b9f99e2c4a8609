"""The Training section: ``cudal1-train``'s per-step metrics log as curves, one set per stage.

The trainer (``policy/train_log.py``) appends one JSON object per step to
``OUTPUT/metrics.jsonl``: stage, step, reward mean and std, success rate, cheats
caught by reason, the best speedup per task so far and the judge's seconds per
completion. Each stage gets five small charts over its steps (reward mean with a
±std band, success rate, judge seconds per completion, cheats per reason, best
speedup per task on a log axis) and a summary row. Lines that are not a step's
metrics (a torn last line, another file's records) are skipped, as the ledger
reader skips them: a log being written can be read at any time.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pytest_cudal1.report.charts import LinearAxis, LogAxis
from pytest_cudal1.report.figures import PALETTE, is_number

STAGE_LABELS = {"sft": "SFT", "self_supervised": "self-supervised rounds", "rl": "contrastive RL"}
LEFT, RIGHT, TOP, BOTTOM = 52, 340, 10, 120  # every curve chart's plot area, in pixels


@dataclasses.dataclass
class Step:
    """One logged step's numbers (``judge_s``: None when the log has no judge time)."""

    stage: str
    step: int
    reward_mean: float
    reward_std: float
    success_rate: float
    judge_s: float | None
    cheats: dict[str, int]
    best: dict[str, float]
    completions: int
    judged: int


def _counts(value: Any) -> dict[str, int] | None:
    if not isinstance(value, Mapping) or not all(isinstance(n, int) and not isinstance(n, bool)
                                                 for n in value.values()):
        return None
    return {str(k): int(n) for k, n in value.items()}


def step_from(entry: Any) -> Step | None:
    """A log line's step, or None when the line is not one (missing or mistyped fields)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("stage"), str):
        return None
    step = entry.get("step")
    numbers = [entry.get(k) for k in ("reward_mean", "reward_std", "success_rate")]
    if not isinstance(step, int) or isinstance(step, bool) or not all(is_number(v) for v in numbers):
        return None
    cheats, best = _counts(entry.get("cheats", {})), entry.get("best_speedup", {})
    if cheats is None or not isinstance(best, Mapping) or not all(is_number(v) and v > 0 for v in best.values()):
        return None
    judge_s = entry.get("judge_s_per_completion")
    completions = entry.get("completions", 0)
    completions = completions if isinstance(completions, int) and not isinstance(completions, bool) else 0
    judged = entry.get("judged", completions)
    return Step(entry["stage"], step, *map(float, numbers), float(judge_s) if is_number(judge_s) else None,
                cheats, {str(k): float(v) for k, v in best.items()}, completions,
                judged if isinstance(judged, int) and not isinstance(judged, bool) else completions)


def read_metrics(path: str | os.PathLike[str]) -> list[Step]:
    """The steps in a metrics log, in the order written; other lines are skipped."""
    steps = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True):
        if not line.endswith("\n") or not line.strip():  # a torn last line is still being written
            continue
        try:
            step = step_from(json.loads(line))
        except ValueError:
            continue
        if step is not None:
            steps.append(step)
    return steps


def _segments(xs: Sequence[float], ys: Sequence[float | None]) -> list[str]:
    """SVG polyline point lists, broken where a value is missing."""
    out, run = [], []
    for x, y in zip(xs, ys):
        if y is None:
            out, run = out + ([" ".join(run)] if run else []), []
        else:
            run.append(f"{x},{y}")
    return out + ([" ".join(run)] if run else [])


def curve_chart(steps: Sequence[int], series: Mapping[str, Sequence[float | None]],
                axis: Callable[[list[float], float, float], Any], fmt: Callable[[float], str],
                band: tuple[Sequence[float], Sequence[float]] | None = None) -> dict[str, Any]:
    """One chart's geometry: a line (and its points) per series over ``steps``, an optional (low, high) band.

    ``axis(values, bottom, top)`` makes the y axis (``LinearAxis`` or ``LogAxis`` from ``charts``);
    ``fmt`` writes a point's value in its tooltip.
    """
    values = [v for vs in series.values() for v in vs if v is not None] + [v for b in band or () for v in b]
    x = LinearAxis(steps, LEFT, RIGHT, integer=True, tight=True)
    y = axis(values, BOTTOM, TOP)
    xs = [x(s) for s in steps]
    lines = []
    for i, (name, vs) in enumerate(series.items()):
        ys = [None if v is None else y(v) for v in vs]
        lines.append({"name": name, "color": PALETTE[i % len(PALETTE)], "segments": _segments(xs, ys),
                      "points": [{"step": s, "value": v, "label": fmt(v), "cx": cx, "cy": cy}
                                 for s, v, cx, cy in zip(steps, vs, xs, ys) if v is not None and cy is not None]})
    polygon = None
    if band is not None:
        low, high = band
        polygon = " ".join([f"{cx},{y(v)}" for cx, v in zip(xs, high)] +
                           [f"{cx},{y(v)}" for cx, v in reversed(list(zip(xs, low)))])
    return {"width": RIGHT + 16, "height": BOTTOM + 34, "left": LEFT, "right": RIGHT, "top": TOP, "bottom": BOTTOM,
            "xticks": x.ticks(), "yticks": y.ticks(), "lines": lines, "band": polygon}


def _from_zero(values: list[float], a: float, b: float) -> LinearAxis:
    return LinearAxis([0.0, *values], a, b)


def _counts_axis(values: list[float], a: float, b: float) -> LinearAxis:
    return LinearAxis([0.0, *values], a, b, integer=True)


def _share_axis(_values: list[float], a: float, b: float) -> LinearAxis:
    return LinearAxis([0.0, 1.0], a, b, fmt=lambda v: f"{100 * v:g}%")


def stage_view(stage: str, steps: Sequence[Step]) -> dict[str, Any]:
    """A stage's charts and summary, its steps in step order (a resumed run's repeats kept)."""
    steps = sorted(steps, key=lambda s: s.step)
    xs = [s.step for s in steps]
    reasons = sorted({r for s in steps for r in s.cheats})
    tasks = sorted({t for s in steps for t in s.best})
    means = [s.reward_mean for s in steps]
    timed = [(s.judge_s, s.judged) for s in steps if s.judge_s is not None]
    weight = sum(n for _, n in timed)
    band = ([s.reward_mean - s.reward_std for s in steps], [s.reward_mean + s.reward_std for s in steps])
    charts: dict[str, dict[str, Any] | None] = {
        "reward": curve_chart(xs, {"reward mean": means}, LinearAxis, lambda v: f"{v:+.3f}", band),
        "success": curve_chart(xs, {"success rate": [s.success_rate for s in steps]}, _share_axis,
                               lambda v: f"{100 * v:.0f}%"),
        "judge_s": None, "cheats": None, "best": None,
    }
    if timed:
        charts["judge_s"] = curve_chart(xs, {"judge s / completion": [s.judge_s for s in steps]}, _from_zero,
                                        lambda v: f"{v:.3g} s")
    if reasons:
        charts["cheats"] = curve_chart(xs, {r: [float(s.cheats.get(r, 0)) for s in steps] for r in reasons},
                                       _counts_axis, lambda v: f"{v:g}")
    if tasks:
        charts["best"] = curve_chart(xs, {t: [s.best.get(t) for s in steps] for t in tasks}, LogAxis,
                                     lambda v: f"{v:.2f}×")
    last = steps[-1]
    summary = {
        "steps": len(steps), "first": xs[0], "last": xs[-1], "completions": sum(s.completions for s in steps),
        "judged": sum(s.judged for s in steps), "reward_final": last.reward_mean, "reward_best": max(means),
        "success_final": last.success_rate, "success_best": max(s.success_rate for s in steps),
        "cheats": {r: sum(s.cheats.get(r, 0) for s in steps) for r in reasons},
        "judge_s": sum(t * n for t, n in timed) / weight if weight else None,  # per freshly judged completion
        "best": dict(last.best),
    }
    return {"stage": stage, "label": STAGE_LABELS.get(stage, stage), "x_label": "round" if stage ==
            "self_supervised" else "step", "charts": charts, "summary": summary}


def training_view(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The Training section's context from a metrics log: one view per stage, in the order they first logged."""
    steps = read_metrics(path)
    stages: dict[str, list[Step]] = {}
    for s in steps:
        stages.setdefault(s.stage, []).append(s)
    return {"source": str(path), "stages": [stage_view(name, mine) for name, mine in stages.items()]}
