"""The exemplar database: every judged candidate's code with this judge's verdict and measured speedups.

The contrastive prompt shows earlier *successful* variants with their speedups;
those numbers must be this judge's measurements on this GPU, never a published
score or a model's claim, so rows come only from ledger records (``add`` takes
the record the judge wrote). One row per (task source hash, GPU, candidate
hash): the same code judged again is the same exemplar, and the newest judgment
replaces the older one (a stricter judge's verdict wins); re-importing a ledger
changes nothing. SQLite in WAL mode with a busy timeout, one transaction per
row, so concurrent writers and a killed writer never lose a committed row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from kernelbench.loaders import Task
from policy.codefinder import CodeFinder
from pytest_cudal1 import ledger
from pytest_cudal1.reward import timing_field

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE exemplars (
    id INTEGER PRIMARY KEY,
    task_sha256 TEXT NOT NULL, task_id TEXT NOT NULL, level INTEGER, problem_id INTEGER, task_name TEXT NOT NULL,
    gpu TEXT NOT NULL,
    candidate_sha256 TEXT NOT NULL, code TEXT NOT NULL,
    reason TEXT NOT NULL,
    kernel_speedup REAL, kernel_lo REAL, kernel_hi REAL,
    call_speedup REAL, call_lo REAL, call_hi REAL,
    policy TEXT NOT NULL, round INTEGER, parents TEXT NOT NULL, prompt_sha256 TEXT,
    judged_at TEXT NOT NULL, record TEXT NOT NULL,
    UNIQUE (task_sha256, gpu, candidate_sha256)
);
CREATE INDEX exemplars_by_task ON exemplars (task_sha256, gpu, reason);
"""
_MEASURED = ("reason", "kernel_speedup", "kernel_lo", "kernel_hi", "call_speedup", "call_lo", "call_hi",
             "judged_at", "record")


class ExemplarDBError(RuntimeError):
    """The database file is not one this version can use; it was left untouched."""


@dataclasses.dataclass(frozen=True)
class Origin:
    """How a candidate came to be: which policy wrote it, in which round, from which exemplars and prompt."""

    policy: str
    round: int | None = None
    parents: tuple[int, ...] = ()
    prompt_sha256: str | None = None


@dataclasses.dataclass(frozen=True)
class Measure:
    """One speedup with its 95% interval."""

    speedup: float
    lo: float | None
    hi: float | None


@dataclasses.dataclass(frozen=True)
class Exemplar:
    """One stored row."""

    id: int
    task_sha256: str
    task_id: str
    gpu: str
    candidate_sha256: str
    code: str
    reason: str
    kernel: Measure | None
    call: Measure | None
    origin: Origin
    judged_at: str
    record: dict[str, Any]

    @property
    def speedup(self) -> float | None:
        """The kernel-time speedup: the measure the sampler and prompts use by default."""
        return self.kernel.speedup if self.kernel else None


def measure_of(record: dict[str, Any], measure: str) -> Measure | None:
    """A ledger record's speedup under ``measure`` ("kernel" or "call") with its interval; None if not timed."""
    timing = record.get(timing_field(measure))
    if not timing or timing.get("speedup") is None:
        return None
    lo, hi = timing.get("speedup_ci") or (None, None)
    return Measure(float(timing["speedup"]), lo, hi)


def measures(record: dict[str, Any]) -> tuple[Measure | None, Measure | None]:
    """The record's (kernel, call) speedups with their intervals."""
    return measure_of(record, "kernel"), measure_of(record, "call")


def gpu_of(record: dict[str, Any]) -> str:
    """The GPU's name from the record's environment, or its device ("cpu") when it ran without one."""
    return (record.get("environment") or {}).get("gpu") or record.get("device") or "unknown"


@dataclasses.dataclass
class ImportReport:
    """What ``import_ledger`` did with each record."""

    stored: int = 0  # written (new, or a newer judgment of a stored candidate) or already present
    no_code: int = 0  # the judged code could not be found (or no longer has the judged hash)
    no_task: int = 0  # the record's task is not among the given tasks


class ExemplarDB:
    """An open exemplar database; use as a context manager or call ``close``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            self._check_or_create()
        except BaseException:
            self.conn.close()
            raise

    def _wal(self) -> None:
        """WAL mode. Switching to it needs the file to itself, and SQLite answers "locked" at once, without
        waiting, while another process creates the schema (CI: two writers opening a new file): retried until
        the busy timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _check_or_create(self) -> None:
        """Refuse (and never write to) a file that is not this schema; create the schema in an empty one."""
        try:
            # One statement, one snapshot: another process may be creating the schema right now.
            version, tables = self.conn.execute(
                "SELECT user_version, (SELECT count(*) FROM sqlite_master) FROM pragma_user_version").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ExemplarDBError(f"{self.path}: not a readable exemplar database ({exc}); left untouched") from None
        empty = version == 0 and tables == 0
        if not empty and version != SCHEMA_VERSION:
            what = "an unknown SQLite database" if version == 0 and tables else f"schema version {version}"
            raise ExemplarDBError(f"{self.path}: {what}, this code reads version {SCHEMA_VERSION}; left untouched")
        self._wal()
        if empty:
            self.conn.execute("BEGIN IMMEDIATE")
            if self.conn.execute("PRAGMA user_version").fetchone()[0] == 0:  # another process may have won
                for statement in _SCHEMA.split(";"):
                    self.conn.execute(statement)
                self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ExemplarDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, record: dict[str, Any], code: str, task: Task, origin: Origin) -> int:
        """Store one judged record (``JudgedRecord.to_json()``) with the code judged; returns the row id.

        ``code`` must hash to the record's ``candidate_sha256`` and ``task`` must be
        the record's task, so a row never pairs a measurement with other code.
        """
        if hashlib.sha256(code.encode()).hexdigest() != record["candidate_sha256"]:
            raise ValueError(f"{record['task_id']}::{record['candidate_name']}: code does not hash to the "
                             "judged candidate_sha256")
        if record["task_id"] != task.id:
            raise ValueError(f"{record['task_id']}::{record['candidate_name']}: record is for task "
                             f"{record['task_id']}, not {task.id}")
        kernel, call = measures(record)
        row = {
            "task_sha256": task.sha256, "task_id": task.id, "level": task.level, "problem_id": task.problem_id,
            "task_name": task.name, "gpu": gpu_of(record), "candidate_sha256": record["candidate_sha256"],
            "code": code, "reason": record["verdict"]["reason"],
            "kernel_speedup": kernel and kernel.speedup, "kernel_lo": kernel and kernel.lo,
            "kernel_hi": kernel and kernel.hi, "call_speedup": call and call.speedup,
            "call_lo": call and call.lo, "call_hi": call and call.hi,
            "policy": origin.policy, "round": origin.round, "parents": json.dumps(list(origin.parents)),
            "prompt_sha256": origin.prompt_sha256, "judged_at": record["judged_at"],
            "record": json.dumps(ledger.strict(record), sort_keys=True),
        }
        names = ", ".join(row)
        updates = ", ".join(f"{k}=excluded.{k}" for k in _MEASURED)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(
                f"INSERT INTO exemplars ({names}) VALUES ({', '.join(':' + k for k in row)}) "
                f"ON CONFLICT (task_sha256, gpu, candidate_sha256) DO UPDATE SET {updates} "
                "WHERE excluded.judged_at > exemplars.judged_at", row)
            (row_id,) = self.conn.execute(
                "SELECT id FROM exemplars WHERE task_sha256=? AND gpu=? AND candidate_sha256=?",
                (row["task_sha256"], row["gpu"], row["candidate_sha256"])).fetchone()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return int(row_id)

    def import_ledger(self, path: str | Path, tasks: Iterable[Task], search: Iterable[str | Path] = (),
                      origin: Origin | None = None) -> ImportReport:
        """Import every record of a ledger; failures are stored too (as non-successes).

        ``tasks`` are the task sets the ledger was judged on (a release's records
        carry their own reference, found with the code). The code is looked up by
        hash: the record's ``candidate_origin``, then each ``search`` path (a
        ``--cudal1-cache-dir`` with its ``sources/`` copies, a candidate folder or
        JSONL). Records whose code or task cannot be found are counted, not stored.
        """
        by_id = {t.id: t for t in tasks}
        finder = CodeFinder(search)
        origin = origin or Origin(policy=f"import:{Path(path).name}")
        report = ImportReport()
        for judged in ledger.read(Path(path)):
            record = judged.to_json()
            found = finder.find(record["candidate_sha256"], record["candidate_origin"])
            if found is None:
                report.no_code += 1
                continue
            task = found.task if found.task is not None and found.task.id == record["task_id"] \
                else by_id.get(record["task_id"])
            if task is None:
                report.no_task += 1
                continue
            self.add(record, found.source, task, origin)
            report.stored += 1
        return report

    def successes(self, task_sha256: str, gpu: str) -> list[Exemplar]:
        """The task's candidates this judge passed (OK) with a measured speedup on this GPU, fastest first."""
        return self._select("task_sha256=? AND gpu=? AND reason='OK' AND kernel_speedup IS NOT NULL "
                            "ORDER BY kernel_speedup DESC, id", (task_sha256, gpu))

    def get(self, exemplar_id: int) -> Exemplar | None:
        rows = self._select("id=?", (exemplar_id,))
        return rows[0] if rows else None

    def all(self) -> list[Exemplar]:
        return self._select("1 ORDER BY id", ())

    def _select(self, where: str, args: tuple[Any, ...]) -> list[Exemplar]:
        cur = self.conn.execute(f"SELECT * FROM exemplars WHERE {where}", args)
        cols = [d[0] for d in cur.description]
        return [_exemplar(dict(zip(cols, values))) for values in cur.fetchall()]


def _exemplar(row: dict[str, Any]) -> Exemplar:
    def measure(prefix: str) -> Measure | None:
        value = row[f"{prefix}_speedup"]
        return None if value is None else Measure(value, row[f"{prefix}_lo"], row[f"{prefix}_hi"])

    return Exemplar(
        id=row["id"], task_sha256=row["task_sha256"], task_id=row["task_id"], gpu=row["gpu"],
        candidate_sha256=row["candidate_sha256"], code=row["code"], reason=row["reason"],
        kernel=measure("kernel"), call=measure("call"),
        origin=Origin(row["policy"], row["round"], tuple(json.loads(row["parents"])), row["prompt_sha256"]),
        judged_at=row["judged_at"], record=json.loads(row["record"]),
    )
