"""What the template shows: the tables' rows, the evidence sections, and the whole page's context."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from typing import Any, Iterable, Mapping, Sequence

from pytest_cudal1.reasons import describe
from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report.charts import distribution_chart, scatter_charts, task_chart, task_order
from pytest_cudal1.report.figures import (FAST_P, best_correct, commits_of, flatten, gpu_infos, harness_commit,
                                          judged, judged_time, latest, rejections_by_reason, stats_by_gpu)
from pytest_cudal1.report.loading import gpu_key, is_cheat, record_from, status
from pytest_cudal1.report.optimizer import optimizer_view
from pytest_cudal1.report.training import training_view

_LONG_TEXT_KEYS = ("log_tail", "traceback", "stderr", "stdout", "log")


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
    b, a = dict(flatten(before if isinstance(before, Mapping) else {"value": before})), \
        dict(flatten(after if isinstance(after, Mapping) else {"value": after}))
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
    """Warnings, never verdicts: the static findings (from reading the source) and the extensions that failed
    to build while the candidate ran something else."""
    findings = getattr(record, "static_findings", None) or []
    found = list(findings) if isinstance(findings, (list, tuple)) else [findings]
    return found + [{"rule": "EXTENSION_NOT_BUILT", "extension": f.get("extension"), "error": f.get("error"),
                     "attempts": f.get("attempts", 1)}
                    for f in getattr(record, "extension_failures", None) or []]


def needs_evidence(record: JudgedRecord) -> bool:
    """Rejected, or carrying something worth a look: timing warnings, GPU state, static findings."""
    return status(record) == "rejected" or bool(findings_of(record)) or \
        bool(record.timing and (record.timing.warnings or record.timing.gpu_state))


def build_context(records: Iterable[JudgedRecord | Mapping[str, Any]], title: str | None = None,
                  sources: Sequence[str] = (), commit: str | None = None,
                  db_path: str | os.PathLike[str] | None = None,
                  metrics_log: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Everything the template shows, computed from the records (``db_path``: the exemplar database the
    optimizer view looks its candidates' parents up in; ``metrics_log``: a training run's per-step log)."""
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
    rows = {(g, row["task"], cell.record.candidate_sha256): row["id"]
            for row in cand_rows.values() for g, cell in row["cells"].items() if cell.record is not None}

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
        "optimizer": optimizer_view(recs, rows, str(db_path) if db_path else None),
        "training": training_view(metrics_log) if metrics_log is not None else None,
    }

