"""The reward ledger: one JSON line per judged pair, the single source of truth for results.

Each record is written with one ``write`` on an ``O_APPEND`` descriptor under an
exclusive ``flock``, then fsynced, so concurrent xdist workers never interleave
lines and an interrupted run keeps every line it finished. Readers skip a
torn final line rather than fail.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

from pytest_cudal1.records import JudgedRecord


def strict(value: Any) -> Any:
    """NaN and ±Inf (e.g. in mismatch evidence) as strings, so every line is strict JSON for jq and browsers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def append(path: Path, record: JudgedRecord) -> None:
    # ``default=repr``: a value JSON cannot carry (an ``Unsupported`` a candidate's worker sent in its evidence) is
    # written as its repr; a record is never lost to it.
    line = (json.dumps(strict(record.to_json()), sort_keys=True, allow_nan=False, default=repr) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path) -> Iterator[JudgedRecord]:
    """Every complete record in ``path``, oldest first; a torn or foreign line is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                return
            try:
                yield JudgedRecord.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
