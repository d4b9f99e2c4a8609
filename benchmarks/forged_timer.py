"""What a forged timer gets past the judge: relu tasks of several sizes, each judged against itself (``honest``)
and against candidates that disarm the tamper watch through ``gc`` and report a share of their time
(``forged_<divisor>``). Per record: the verdict, the speedup, the controller-seen overhead the candidate left
unexplained (``unreported_ms``) and what the allowance passed (``unreported_allowed_ms``), beside the sample, and
the median per-pair ratio of the pairs the candidate's sample came first in and of those it came second in.

    python benchmarks/forged_timer.py --out DIR [--shapes "4096, 1024;64, 64"] [--divisors 2,100] [--repeats 2]

Writes ``DIR/forged-timer.json`` (every record) and ``DIR/forged-timer.md`` (a table). Runs on the GPU when
there is one, else on the CPU. Each repeat is one pytest run of every item, under a judge seed of its own.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand({shape}) * 2 - 1]


def get_init_inputs():
    return []
'''

HONEST = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

# Disarms the watch (any code in the worker can reach it through gc) and divides every reported sample time: the host
# clock's and, on a GPU, the events' and the host's queueing time.
FORGED = '''import gc
import sys
import types

import torch
import torch.nn as nn

from pytest_cudal1.workers import tamper, timed_loop

for obj in gc.get_objects():
    if isinstance(obj, tamper.TamperWatch):
        obj.objs = {{}}

_real = timed_loop.timed_sample


def _forged(*args, **kwargs):
    sample, outs = _real(*args, **kwargs)
    forged = {{k: v / {divisor} for k, v in sample.items() if k in ("host_ms", "event_ms", "enqueue_ms") and v}}
    return dict(sample, **forged), outs


_stand_in = types.ModuleType(timed_loop.__name__)
_stand_in.__dict__.update(vars(timed_loop))
_stand_in.timed_sample = _forged
sys.modules["__main__"].timed_loop = _stand_in


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def write_layout(root: Path, shapes: list[str], divisors: list[float]) -> None:
    for i, shape in enumerate(shapes, start=1):
        name = f"{i}_relu_{shape.replace(',', 'x').replace(' ', '')}"
        (root / "tasks" / "level1").mkdir(parents=True, exist_ok=True)
        (root / "tasks" / "level1" / f"{name}.py").write_text(TASK.format(shape=shape), encoding="utf-8")
        cands = root / "cands" / "level1" / name
        cands.mkdir(parents=True, exist_ok=True)
        (cands / "honest.py").write_text(HONEST, encoding="utf-8")
        for d in divisors:
            (cands / f"forged_{d:g}.py").write_text(FORGED.format(divisor=d), encoding="utf-8")


def row(record: dict[str, Any], repeat: int) -> dict[str, Any]:
    t = record.get("timing") or {}
    out = {"repeat": repeat, "task": record["task_id"], "candidate": record["candidate_name"],
           "verdict": record["verdict"]["reason"], "message": record["verdict"]["message"][:240],
           "evidence": {k: v for k, v in record["verdict"].get("evidence", {}).items()
                        if k in ("unreported_ms", "allowed_ms", "candidate_reported_ms")}}
    if t:
        cand = t["candidate"]
        out.update(speedup=t["speedup"], unreported_ms=t["unreported_ms"],
                   unreported_allowed_ms=t["unreported_allowed_ms"], calls_per_sample=cand["calls_per_sample"],
                   candidate_sample_ms=cand["median_ms"] * cand["calls_per_sample"], pairs=t["pairs"],
                   method=t["method"], **by_order(t))
    return out


def by_order(timing: dict[str, Any]) -> dict[str, float]:
    """The median per-pair ratio (reference over candidate) of the pairs the candidate came first in, and of those
    the reference came first in: where a sample lands in its pair moves it, on either side."""
    ratios = [r / c for r, c in zip(timing["reference"]["samples_ms"], timing["candidate"]["samples_ms"])]
    out = {}
    for key, first in (("ratio_candidate_first", True), ("ratio_reference_first", False)):
        picked = [x for x, f in zip(ratios, timing.get("candidate_first", [])) if f is first]
        out[key] = statistics.median(picked) if picked else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default="4096, 1024;512, 512;64, 64", help="input shapes, ';'-separated")
    parser.add_argument("--divisors", default="2,100", help="what the forged candidates divide their time by")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pytest-args", default="", help="more options for the judge (space-separated)")
    args = parser.parse_args()
    shapes = [s.strip() for s in args.shapes.split(";") if s.strip()]
    divisors = [float(d) for d in args.divisors.split(",") if d.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_layout(root, shapes, divisors)
        for repeat in range(args.repeats):
            ledger = root / f"ledger-{repeat}.jsonl"
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--cudal1-trials=2",
                 f"--cudal1-tasks={root / 'tasks'}", f"--cudal1-candidates={root / 'cands'}",
                 f"--cudal1-ledger={ledger}", f"--cudal1-cache-dir={root / 'cache'}", *args.pytest_args.split()],
                cwd=root, capture_output=True, text=True, timeout=1800)
            if not ledger.exists():
                sys.exit(f"forged_timer: the judge wrote no ledger (exit {done.returncode}):\n{done.stdout[-3000:]}")
            rows += [row(json.loads(line), repeat) for line in ledger.read_text(encoding="utf-8").splitlines()]
    (args.out / "forged-timer.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    lines = ["| task | candidate | repeat | verdict | speedup | candidate first | reference first | sample ms | "
             "unreported ms | allowed ms |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ev = r["evidence"]  # a TIMER_MISMATCH's own figures before the first run's (it was measured twice)
        unreported = ev.get("unreported_ms", r.get("unreported_ms"))
        allowed = ev.get("allowed_ms", r.get("unreported_allowed_ms"))
        lines.append(f"| {r['task']} | {r['candidate']} | {r['repeat']} | {r['verdict']} | "
                     f"{r.get('speedup', float('nan')):.3f} | {r.get('ratio_candidate_first', float('nan')):.3f} | "
                     f"{r.get('ratio_reference_first', float('nan')):.3f} | {r.get('candidate_sample_ms', float('nan')):.3f} | "
                     f"{unreported if unreported is not None else float('nan'):+.3f} | "
                     f"{allowed if allowed is not None else float('nan'):.3f} |")
    honest = [r["speedup"] for r in rows if r["candidate"] == "honest" and "speedup" in r]
    if honest:
        lines.append(f"\nhonest self-judged speedups: median {statistics.median(honest):.3f}, "
                     f"{min(honest):.3f}-{max(honest):.3f} over {len(honest)}")
    (args.out / "forged-timer.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
