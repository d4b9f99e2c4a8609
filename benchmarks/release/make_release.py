"""Build the red-team "kernel release" JSONL from the readable sources in ``src/``.

Layout::

    src/tasks/<N>_<Name>.py                 a tiny reference task (Model, get_inputs, get_init_inputs)
    src/candidates/<N>_<Name>/<name>.py     a candidate for task N; its first line is
                                            ``# expect: <REASON CODE>``

Each candidate becomes one line in the published-release format::

    {"level_id": 1, "task_id": N, "name": "<name>", "ref_code": "<task source>",
     "custom_code": "<candidate source>", "expect": "<REASON CODE>"}

``custom_code`` is the candidate file without its ``# expect:`` line. Records
are ordered by task id, then name, with a fixed key order, so the output is
byte-for-byte reproducible. ``--check`` exits 1 when
the JSONL on disk differs from what the sources give.

Usage: ``python benchmarks/release/make_release.py [--check] [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
OUT = HERE / "redteam_release.jsonl"
LEVEL = 1
EXPECT = re.compile(r"^#\s*expect:\s*([A-Z_]+)\s*$")
TASK_FILE = re.compile(r"^(\d+)_\w+\.py$")


def _reason_codes() -> set[str] | None:
    try:
        from pytest_cudal1.reasons import Reason
    except ImportError:  # building needs no harness; validation is skipped without it
        return None
    return {r.value for r in Reason}


def build_records(src: Path = SRC) -> list[dict[str, object]]:
    codes = _reason_codes()
    records: list[dict[str, object]] = []
    tasks = sorted((p for p in (src / "tasks").glob("*.py") if TASK_FILE.match(p.name)),
                   key=lambda p: int(TASK_FILE.match(p.name).group(1)))  # type: ignore[union-attr]
    if not tasks:
        raise SystemExit(f"no task files in {src / 'tasks'}")
    names: set[str] = set()
    for task in tasks:
        task_id = int(TASK_FILE.match(task.name).group(1))  # type: ignore[union-attr]
        ref_code = task.read_text(encoding="utf-8")
        cand_dir = src / "candidates" / task.stem
        for cand in sorted(cand_dir.glob("*.py")):
            lines = cand.read_text(encoding="utf-8").splitlines(keepends=True)
            m = EXPECT.match(lines[0].strip()) if lines else None
            if m is None:
                raise SystemExit(f"{cand}: first line must be '# expect: <REASON CODE>'")
            expect = m.group(1)
            if codes is not None and expect not in codes:
                raise SystemExit(f"{cand}: unknown reason code {expect!r}")
            if cand.stem in names:
                raise SystemExit(f"{cand}: candidate name {cand.stem!r} is used twice")
            names.add(cand.stem)
            records.append({
                "level_id": LEVEL,
                "task_id": task_id,
                "name": cand.stem,
                "ref_code": ref_code,
                "custom_code": "".join(lines[1:]),
                "expect": expect,
            })
    return records


def render(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"where to write the JSONL (default {OUT})")
    ap.add_argument("--check", action="store_true", help="only compare the file on disk with the sources")
    args = ap.parse_args(argv)
    text = render(build_records())
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date; run: python {Path(__file__).name}", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date ({text.count(chr(10))} records)")
        return 0
    args.out.write_text(text, encoding="utf-8")
    records = text.count("\n")
    print(f"wrote {records} records to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
