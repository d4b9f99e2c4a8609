"""Write the built-in policy's first-round rewrites of some tasks as a candidates folder.

    python benchmarks/write_rewrites.py TASKS OUT [--steps compile_default,cuda_graph]

The GPU session judges them (``gpu_session.sh rewrites``): torch.compile and CUDA-graph rewrites of
KernelBench tasks are the baselines every speedup is read against, and the judge must accept them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelbench.loaders import load_tasks  # noqa: E402
from policy.builtin import first_round, write_candidates  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", help="a task path the judge accepts (JSONL, folder, .py)")
    parser.add_argument("out", help="candidates folder to write (levelN/<id>_<name>/<rewrite>.py)")
    parser.add_argument("--steps", default="", help="comma-separated single steps (default: every first-round step)")
    args = parser.parse_args(argv)
    tasks, errors = load_tasks(args.tasks)
    for error in errors:
        print(f"write_rewrites: {error.origin}: {error.message}", file=sys.stderr)
    wanted = {s for s in args.steps.split(",") if s}
    written = 0
    for task in tasks:
        rewrites = [r for r in first_round(task) if not wanted or set(r.steps) <= wanted]
        written += len(write_candidates(task, rewrites, args.out))
    print(f"write_rewrites: {written} candidate(s) for {len(tasks)} task(s) under {args.out}")
    return 0 if written else 1


if __name__ == "__main__":
    raise SystemExit(main())
