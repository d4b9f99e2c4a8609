"""The terminal summary: one row per pair (skipped ones too), then counts per reason code.

Rows are sorted by task and candidate (under xdist records arrive in any order).
Columns are built from ``COLUMNS`` so another measure is one more entry there.
Simulated results (Triton/Numba without a GPU) show ``simulated`` in place of a
speed: their times say nothing about the kernel.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

from pytest_cudal1.candidates import simulated
from pytest_cudal1.reasons import Reason


def _speedup(rec: dict[str, Any], key: str = "timing") -> str:
    t = rec.get(key)
    if not t:
        return "-"
    if simulated(rec["backend"], rec.get("device", "")):
        return "simulated"
    lo, hi = t["speedup_ci"]
    return f"{t['speedup']:.2f}x [{lo:.2f}, {hi:.2f}]"


def _detail(rec: dict[str, Any]) -> str:
    v = rec["verdict"]
    if v["reason"] == "OK":
        return "correctness check only: run under a CPU simulator" if simulated(rec["backend"], rec.get("device", "")) \
            else ""
    return (v["message"].splitlines()[0] if v["message"] else "")[:90]


def _verdict(rec: dict[str, Any]) -> str:
    reason = rec["verdict"]["reason"]
    return reason if Reason(reason).judged else "SKIPPED"


COLUMNS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("task", lambda r: r["task_id"]),
    ("candidate", lambda r: r["candidate_name"]),
    ("backend", lambda r: r["backend"]),
    ("verdict", _verdict),
    ("kernel speedup (95% CI)", _speedup),
    ("call speedup (95% CI)", lambda r: _speedup(r, "call_timing")),
]


def sort_key(rec: dict[str, Any]) -> tuple[Any, ...]:
    return (rec.get("level") or 0, rec.get("problem_id") or 0, rec["task_id"], rec["candidate_name"])


def summary_lines(records: list[dict[str, Any]]) -> list[str]:
    """Rows of the columns plus a free-text detail (the reason's message, or why the row is special)."""
    records = sorted(records, key=sort_key)
    rows = [[title for title, _ in COLUMNS]] + [[cell(rec) for _, cell in COLUMNS] for rec in records]
    details = [""] + [_detail(rec) for rec in records]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + (f"  {d}" if d else "")
             for r, d in zip(rows, details)]
    counts = collections.Counter(_verdict(rec) for rec in records)
    lines.append("verdicts: " + ", ".join(f"{code} {n}" for code, n in sorted(counts.items())))
    return lines
