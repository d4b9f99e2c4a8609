"""``cudal1-report OUT.html LEDGER_OR_DIR [...] [--train-log METRICS]``: merge ledgers and saved runs into one report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report.figures import gpus_of
from pytest_cudal1.report.loading import input_files, read_records
from pytest_cudal1.report.render import build_report


def main(argv: Sequence[str] | None = None) -> int:
    """``cudal1-report OUT.html LEDGER_OR_DIR [...]``: merge ledgers and saved runs into one report."""
    parser = argparse.ArgumentParser(prog="cudal1-report", description=(
        "Merge cudal1 ledgers (JSONL), JSON record lists and saved pytest-benchmark runs, "
        "from one or several GPUs, into one self-contained HTML report."))
    parser.add_argument("out", type=Path, help="the HTML file to write")
    parser.add_argument("inputs", nargs="+", type=Path, help="ledger files, JSON files or folders holding them")
    parser.add_argument("--title", default=None, help="page title")
    parser.add_argument("--db", type=Path, default=None, metavar="PATH",
                        help="the exemplar database (--cudal1-db): the optimizer view shows the exemplars "
                             "its best candidates were shown")
    parser.add_argument("--train-log", type=Path, default=None, metavar="PATH",
                        help="a cudal1-train run's metrics.jsonl: adds the Training section's curves")
    args = parser.parse_args(argv)
    missing = [str(p) for p in [*args.inputs, *([args.db] if args.db else [])] if not p.exists()]
    if args.train_log is not None and not args.train_log.is_file():
        missing.append(str(args.train_log))
    if missing:
        parser.error("no such file or folder: " + ", ".join(missing))
    records: list[JudgedRecord] = []
    used = []
    for f in input_files(args.inputs):
        try:
            found = read_records(f)
        except OSError as exc:
            print(f"cudal1-report: skipping {f}: {exc}", file=sys.stderr)
            continue
        if found:
            used.append(str(f))
            records.extend(found)
    if not records:
        print("cudal1-report: no judged records found in " + ", ".join(map(str, args.inputs)), file=sys.stderr)
        return 1
    path = build_report(records, args.out, args.title, sources=used, db_path=args.db, metrics_log=args.train_log)
    print(f"cudal1-report: wrote {path} ({len(records)} records from {len(used)} file(s), "
          f"{len(gpus_of(records))} GPU(s))")
    return 0
