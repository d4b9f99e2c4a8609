"""The optimizer's view: per task, the best speedup so far by round against the built-in baselines.

Shown when some records carry an ``origin`` (made by ``pytest --cudal1-optimize``).
Per GPU and task, over both measures (kernel, call):

* best so far after round r: the highest speedup of the optimizer's correct
  candidates from rounds up to r;
* the baselines: eager (the reference, 1×), torch.compile (the best single
  ``builtin_compile_*`` rewrite), CUDA graphs (``builtin_cuda_graph``), by the
  rewrite's name in the record's origin (the optimizer names candidates by
  round) or else the candidate's own name (a rewrite file judged as such), and the
  best of every candidate of the task (hand-written ones too);
* the best candidate's provenance: round, policy, prompt and exemplars.

The existing report's rules hold: skipped records count nowhere, simulated ones
in no speed figure. Per level, fast_1 and the geometric mean of each task's best
speedup compare the optimizer's best with each baseline; a task without a
correct, timed candidate in a column is not fast there and has no value in its
geometric mean (the column's count of tasks says how many did).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report.charts import LogAxis, task_order
from pytest_cudal1.report.figures import geomean, gpus_of, judged, level_label, usable_speedup
from pytest_cudal1.report.loading import gpu_key
from pytest_cudal1.report.provenance import ExemplarLookup, ParentView, PromptView, prompt_view

MEASURES = ("kernel", "call")
OPTIMIZER, EAGER, COMPILE, GRAPHS, OVERALL = "optimizer", "eager", "torch.compile", "CUDA graphs", "best overall"
BASELINES = (EAGER, COMPILE, GRAPHS)
COLUMNS = (OPTIMIZER, *BASELINES)  # the per-level table's columns
LINE_COLORS = {EAGER: "#57606a", COMPILE: "#bf8700", GRAPHS: "#8250df"}


def baseline_of(record: JudgedRecord) -> str | None:
    """The baseline a built-in rewrite stands for: one torch.compile step, or CUDA-graph capture alone."""
    name = (record.origin or {}).get("rewrite") or record.candidate_name
    if name == "builtin_cuda_graph":
        return GRAPHS
    if name.startswith("builtin_compile_") and "__" not in name:
        return COMPILE
    return None


def round_of(record: JudgedRecord) -> int:
    """The optimizer round that made the record (0 when it names none)."""
    try:
        return int((record.origin or {}).get("round") or 0)
    except (TypeError, ValueError):
        return 0


@dataclasses.dataclass
class Best:
    """A best speedup and the record that has it (eager has none: it is the reference)."""

    value: float | None
    record: JudgedRecord | None = None


def best_of(records: Iterable[JudgedRecord], measure: str) -> Best:
    """The highest usable speedup in ``measure`` (the first of equals), or no value."""
    timed = [(s, r) for r in records for s in [usable_speedup(r, measure)] if s is not None]
    if not timed:
        return Best(None)
    value, record = max(timed, key=lambda sr: sr[0])
    return Best(value, record)


@dataclasses.dataclass
class TaskProgress:
    """One task's optimizer run on one GPU."""

    gpu: str
    task: str
    level: int | None
    rounds: list[int]
    by_round: dict[str, list[float | None]]  # measure -> best so far after each round
    columns: dict[str, dict[str, Best]]  # measure -> OPTIMIZER, the baselines, OVERALL -> best
    tried: int
    correct: int
    best: JudgedRecord | None  # the optimizer's best (kernel measure; call when it has no kernel timing)
    best_row: str | None
    prompt: PromptView | None
    parents: list[ParentView]
    charts: dict[str, dict[str, Any] | None]


def task_progress(gpu: str, task: str, level: int | None, records: Sequence[JudgedRecord],
                  lookup: ExemplarLookup, rows: Mapping[tuple[str, str, str], str]) -> TaskProgress:
    """The task's figures from its judged records on ``gpu`` (hand-written ones only count as best overall)."""
    made = [r for r in records if r.origin is not None]
    rounds = sorted({round_of(r) for r in made})
    by_round = {m: [best_of([r for r in made if round_of(r) <= k], m).value for k in rounds] for m in MEASURES}
    columns = {m: {OPTIMIZER: best_of(made, m), EAGER: Best(1.0),
                   COMPILE: best_of([r for r in records if baseline_of(r) == COMPILE], m),
                   GRAPHS: best_of([r for r in records if baseline_of(r) == GRAPHS], m),
                   OVERALL: best_of(records, m)} for m in MEASURES}
    best = columns["kernel"][OPTIMIZER].record or columns["call"][OPTIMIZER].record
    origin = (best.origin or {}) if best else {}
    return TaskProgress(
        gpu=gpu, task=task, level=level, rounds=rounds, by_round=by_round, columns=columns,
        tried=len(made), correct=sum(r.verdict.passed for r in made), best=best,
        best_row=rows.get((gpu, task, best.candidate_sha256)) if best else None,
        prompt=prompt_view(origin) if best else None,
        parents=[lookup.parent(p, rows) for p in origin.get("parents") or []],
        charts={m: round_chart(rounds, by_round[m], columns[m]) for m in MEASURES})


def round_chart(rounds: Sequence[int], best: Sequence[float | None],
                columns: Mapping[str, Best]) -> dict[str, Any] | None:
    """A small chart's geometry: best so far per round (log axis) and a dashed line per baseline."""
    if all(v is None for v in best):
        return None
    left, right, top, bottom = 44, 300, 10, 120
    lines = [(name, columns[name].value) for name in BASELINES if columns[name].value is not None]
    y = LogAxis([v for v in best if v is not None] + [v for _, v in lines if v is not None], bottom, top)
    step = (right - left) / max(1, len(rounds) - 1)
    xs = [left + (i * step if len(rounds) > 1 else (right - left) / 2) for i in range(len(rounds))]
    points = [{"round": k, "best": v, "cx": round(x, 2), "cy": y(v)} for k, x, v in zip(rounds, xs, best)
              if v is not None]
    return {"width": right + 110, "height": bottom + 34, "left": left, "right": right, "top": top, "bottom": bottom,
            "yticks": y.ticks(), "xticks": [(round(x, 2), str(k)) for x, k in zip(xs, rounds)], "points": points,
            "path": " ".join(f"{p['cx']},{p['cy']}" for p in points),
            "lines": [{"name": name, "value": v, "y": y(v), "color": LINE_COLORS[name]} for name, v in lines]}


def level_table(progress: Sequence[TaskProgress]) -> list[dict[str, Any]]:
    """Per GPU, all tasks then each level, per measure: fast_1 and geomean of each column's best speedup."""
    out = []
    for gpu in dict.fromkeys(p.gpu for p in progress):
        mine = [p for p in progress if p.gpu == gpu]
        levels = sorted({p.level for p in mine}, key=lambda lv: (lv is None, lv or 0))
        scopes = [("all", mine)] + [(level_label(lv), [p for p in mine if p.level == lv]) for lv in levels]
        for scope, group in scopes:
            for m in MEASURES:
                cols = {}
                for col in COLUMNS:
                    values = [v for p in group for v in [p.columns[m][col].value] if v is not None]
                    cols[col] = {"fast_1": sum(v > 1 for v in values) / len(group), "geomean": geomean(values),
                                 "n": len(values)}
                out.append({"gpu": gpu, "scope": scope, "measure": m, "tasks": len(group), "cols": cols})
    return out


def optimizer_view(records: Sequence[JudgedRecord], rows: Mapping[tuple[str, str, str], str],
                   db_path: str | None = None) -> dict[str, Any] | None:
    """The optimizer section's context, or None when no judged record was made by the optimizer.

    ``rows`` maps (GPU, task, candidate hash) to the anchor of the candidate's row in the page.
    """
    done = judged(records)
    made = {(gpu_key(r), r.task_id) for r in done if r.origin is not None}
    if not made:
        return None
    grouped: dict[tuple[str, str], list[JudgedRecord]] = {}
    for r in done:
        grouped.setdefault((gpu_key(r), r.task_id), []).append(r)
    lookup = ExemplarLookup(db_path)
    try:
        progress = [task_progress(gpu, task, level, grouped[gpu, task], lookup, rows)
                    for gpu in gpus_of(r for r in done if r.origin is not None)
                    for task, level in task_order(done) if (gpu, task) in made]
    finally:
        lookup.close()
    return {"tasks": progress, "levels": level_table(progress), "measures": MEASURES, "columns": COLUMNS,
            "baselines": BASELINES, "db": lookup.path, "db_problem": lookup.problem,
            "gpus": list(dict.fromkeys(p.gpu for p in progress))}
