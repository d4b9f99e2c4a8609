"""The terminal summary: one line per judged pair, then counts per reason code."""

from __future__ import annotations

import collections
from typing import Any


def _speedup(rec: dict[str, Any], key: str = "timing") -> str:
    t = rec.get(key)
    if not t:
        return "-"
    lo, hi = t["speedup_ci"]
    return f"{t['speedup']:.2f}x [{lo:.2f}, {hi:.2f}]"


def summary_lines(records: list[dict[str, Any]]) -> list[str]:
    """Rows of task, candidate, backend, verdict, both speedups (kernel, call) and reason, as plain text."""
    rows = [("task", "candidate", "backend", "verdict", "kernel speedup (95% CI)", "call speedup (95% CI)", "detail")]
    for rec in records:
        v = rec["verdict"]
        detail = v["message"].splitlines()[0] if v["message"] else ""
        rows.append((rec["task_id"], rec["candidate_name"], rec["backend"], v["reason"], _speedup(rec),
                     _speedup(rec, "call_timing"), detail[:90] if v["reason"] != "OK" else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + ("  " + r[6] if r[6] else "") for r in rows]
    counts = collections.Counter(rec["verdict"]["reason"] for rec in records)
    lines.append("verdicts: " + ", ".join(f"{code} {n}" for code, n in sorted(counts.items())))
    return lines
