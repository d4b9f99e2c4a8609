"""Per task and level, the built-in policy's rewrites from optimizer ledgers: a Markdown table and a merged report.

    python benchmarks/optimize_table.py --tasks .device/kb_optimize.jsonl LEDGER [LEDGER ...] [--html OUT.html]

Each optimizer record is named by its built-in rewrite: its origin's ``rewrite`` where the optimizer recorded it,
else the rewrite of the task whose code has the record's hash (ledgers written before the optimizer recorded it;
the rewrites are rendered again from the tasks). A task judged in several ledgers keeps its latest record per
rewrite. Speedups are against eager (the reference); fast_1 counts a task whose best rewrite is above 1x.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

from kernelbench.loaders import load_tasks
from policy import builtin, optimizer
from policy.parser import extract_code
from pytest_cudal1.report import build_report, geomean

MEASURES = ("kernel", "call")


def rewrites_by_hash(tasks_file: Path) -> dict[str, str]:
    """The hash of every built-in rewrite's code (every combination of steps) of every task -> its name."""
    tasks, errors = load_tasks(tasks_file)
    if errors:
        raise SystemExit(f"{tasks_file}: {errors[0]}")
    names = {}
    for task in tasks:
        for k in range(1, len(builtin.STEPS) + 1):
            for steps in itertools.combinations(builtin.STEPS, k):
                rewrite = builtin.rewrite_of(steps)
                if rewrite is not None:
                    code = extract_code(f"```python\n{builtin.render(task, rewrite)}\n```\n")
                    names[hashlib.sha256(code.encode()).hexdigest()] = rewrite.name
    return names


def named_records(ledgers: list[Path], names: dict[str, str]) -> list[dict[str, Any]]:
    """The ledgers' optimizer records, each with ``origin["rewrite"]``, the latest per (task, rewrite)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for path in ledgers:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            origin = record.get("origin")
            if not origin:
                continue
            rewrite = origin.get("rewrite") or names.get(record["candidate_sha256"])
            if rewrite is None:
                continue
            origin["rewrite"] = rewrite
            latest[(record["task_id"], rewrite)] = record
    return sorted(latest.values(), key=lambda r: (r["level"], r["problem_id"], r["judged_at"]))


def speed(record: dict[str, Any], measure: str) -> float | None:
    """A correct record's speedup under ``measure``; None for a rejected or untimed one."""
    return optimizer.speed(record, measure) if record["passed"] else None


def table(records: list[dict[str, Any]]) -> str:
    """Per task, each rewrite's kernel (call) speedup and the best; per level, fast_1 and the best's geomean."""
    rewrites = sorted({r["origin"]["rewrite"] for r in records}, key=lambda n: (n.count("__"), n))
    tasks: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        tasks.setdefault(r["task_id"], {})[r["origin"]["rewrite"]] = r

    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return "-"
        if not r["passed"]:
            return r["verdict"]["reason"]
        kernel, call = speed(r, "kernel"), speed(r, "call")
        return f"{kernel:.2f}x ({call:.2f}x)" if call is not None else f"{kernel:.2f}x"

    lines = ["| task | " + " | ".join(n.removeprefix("builtin_") for n in rewrites) + " | best |",
             "|---" * (len(rewrites) + 2) + "|"]
    best: dict[int | str, dict[str, list[float]]] = {}
    for task, judged in tasks.items():
        level = next(iter(judged.values()))["level"]
        row = [cell(judged.get(n)) for n in rewrites]
        tops = {}  # measure -> the task's best speedup
        for m in MEASURES:
            values = [v for r in judged.values() if (v := speed(r, m)) is not None]
            if values:
                tops[m] = max(values)
                best.setdefault(level, {}).setdefault(m, []).append(tops[m])
        top = f"{tops['kernel']:.2f}x" if "kernel" in tops else "-"
        lines.append(f"| {task} | " + " | ".join(row) + f" | {top} |")
    lines += ["", "| level | tasks | fast_1 kernel (above 1.01x) | fast_1 call (above 1.01x) | geomean kernel | "
                  "geomean call |", "|---|---|---|---|---|---|"]
    best["all"] = {m: [v for level in list(best.values()) for v in level.get(m, [])] for m in MEASURES}
    for level, figures in best.items():
        k, c = figures["kernel"], figures.get("call", [])
        lines.append(f"| {level} | {len(k)} | {sum(v > 1 for v in k)} ({sum(v > 1.01 for v in k)}) | "
                     f"{sum(v > 1 for v in c)} ({sum(v > 1.01 for v in c)}) | {geomean(k):.2f}x | {geomean(c):.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledgers", nargs="+", type=Path)
    parser.add_argument("--tasks", type=Path, required=True, help="the tasks the optimizer ran (JSONL or folder)")
    parser.add_argument("--html", type=Path, default=None, help="also write one report of the named records")
    args = parser.parse_args()
    records = named_records(args.ledgers, rewrites_by_hash(args.tasks))
    print(table(records))
    if args.html is not None:
        build_report(records, args.html, "The built-in policy's rewrites", sources=list(map(str, args.ledgers)))


if __name__ == "__main__":
    main()
