"""Write the KernelBench tasks a list names ("level id name ..." per line) from problems.jsonl to a JSONL file.

    python benchmarks/select_tasks.py benchmarks/gpu_optimize_tasks.txt ../shared/kernelbench/problems.jsonl \
        .device/kb_optimize.jsonl

The GPU runs read their tasks from ``.device/`` (copied from ``../shared``, never committed); the lists of which
tasks are committed beside this script.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def select(listing: Path, problems: Path) -> list[dict]:
    wanted = [tuple(int(x) for x in line.split()[:2]) for line in listing.read_text().splitlines() if line.strip()]
    by_key = {(r["level"], r["problem_id"]): r for r in map(json.loads, problems.read_text().splitlines())}
    missing = [k for k in wanted if k not in by_key]
    if missing:
        raise SystemExit(f"{problems}: no task {missing}")
    return [by_key[k] for k in wanted]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("listing", type=Path)
    parser.add_argument("problems", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = select(args.listing, args.problems)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} tasks -> {args.out}")


if __name__ == "__main__":
    main()
