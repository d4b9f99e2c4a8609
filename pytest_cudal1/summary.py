"""The terminal summary: one line per judged pair, then counts per reason code."""

from __future__ import annotations

import collections
from typing import Any


def _speedup(rec: dict[str, Any]) -> str:
    t = rec.get("timing")
    if not t:
        return "-"
    lo, hi = t["speedup_ci"]
    return f"{t['speedup']:.2f}x [{lo:.2f}, {hi:.2f}]"


def summary_lines(records: list[dict[str, Any]]) -> list[str]:
    """Rows of task, candidate, backend, verdict, speedup and reason, as plain text."""
    rows = [("task", "candidate", "backend", "verdict", "speedup (95% CI)", "detail")]
    for rec in records:
        v = rec["verdict"]
        detail = v["message"].splitlines()[0] if v["message"] else ""
        rows.append((rec["task_id"], rec["candidate_name"], rec["backend"], v["reason"], _speedup(rec),
                     detail[:90] if v["reason"] != "OK" else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + ("  " + r[5] if r[5] else "") for r in rows]
    counts = collections.Counter(rec["verdict"]["reason"] for rec in records)
    lines.append("verdicts: " + ", ".join(f"{code} {n}" for code, n in sorted(counts.items())))
    return lines
