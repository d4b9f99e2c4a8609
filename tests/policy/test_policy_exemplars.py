"""The exemplar database: what becomes an exemplar, idempotent imports, foreign files refused, concurrent
and killed writers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from policy.exemplars import SCHEMA_VERSION, ExemplarDB, ExemplarDBError, Origin, gpu_of, measures
from policy_records import TASK, code, record
from pytest_cudal1 import ledger
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WRITER = HERE / "policy_records.py"
ORIGIN = Origin("builtin", round=2, parents=(3, 5), prompt_sha256="ab" * 32)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}


def test_successes_are_ok_rows_of_this_gpu_with_a_measured_speedup(tmp_path: Path) -> None:
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        slow, fast, wrong, other_gpu, untimed = (code(t) for t in ("slow", "fast", "wrong", "other", "untimed"))
        db.add(record(slow, speedup=1.2), slow, TASK, ORIGIN)
        fast_id = db.add(record(fast, speedup=3.0), fast, TASK, ORIGIN)
        db.add(record(wrong, reason=Reason.WRONG_OUTPUT, speedup=9.0), wrong, TASK, ORIGIN)
        db.add(record(other_gpu, gpu="NVIDIA A100", speedup=5.0), other_gpu, TASK, ORIGIN)
        db.add(record(untimed, speedup=None), untimed, TASK, ORIGIN)
        got = db.successes(TASK.sha256, "NVIDIA H200")
        assert [e.code for e in got] == [fast, slow]  # fastest first; no failure, other GPU or untimed row
        assert len(db.all()) == 5  # failures are kept, as non-successes
        best = db.get(fast_id)
    assert best is not None and best.speedup == 3.0 and best.kernel.lo == pytest.approx(2.94)
    assert best.call is None  # a record without the call measure: stored as NULL
    assert best.origin == ORIGIN and best.task_id == TASK.id and best.record["verdict"]["reason"] == "OK"


def test_call_measure_is_stored_when_the_record_has_one(tmp_path: Path) -> None:
    source = code("call")
    rec = record(source)
    rec["call_timing"] = {**rec["timing"], "speedup": 1.4, "speedup_ci": [1.3, 1.5]}
    assert measures(rec)[1].speedup == 1.4
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        db.add(rec, source, TASK, ORIGIN)
        (row,) = db.successes(TASK.sha256, gpu_of(rec))
    assert (row.call.speedup, row.call.lo, row.call.hi) == (1.4, 1.3, 1.5)


def test_the_optimizer_and_the_exemplars_read_each_measure_where_the_reward_does() -> None:
    """One rule for which field holds which measure: the reward's (``reward.measured``) on the judge's record,
    the exemplars' and the optimizer's on its ledger line."""
    from policy.optimizer import speed
    from pytest_cudal1.reward import MEASURES, measured

    rec = record(code("both"), speedup=1.25)
    rec["call_timing"] = {**rec["timing"], "speedup": 0.8, "speedup_ci": [0.7, 0.9]}
    judged = JudgedRecord.from_json(rec)
    kernel, call = measures(rec)
    for name, measure in zip(MEASURES, (kernel, call)):
        assert measure is not None and speed(rec, name) == measure.speedup == measured(judged, name).speedup
    assert (speed(rec, "kernel"), speed(rec, "call")) == (1.25, 0.8)
    assert speed({**rec, "call_timing": None}, "call") is None and measures({**rec, "timing": None})[0] is None


def test_code_must_be_what_was_judged(tmp_path: Path) -> None:
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        with pytest.raises(ValueError, match="does not hash"):
            db.add(record(code("a")), code("b"), TASK, ORIGIN)
        assert db.all() == []


def test_re_adding_is_idempotent_and_the_newest_judgment_wins(tmp_path: Path) -> None:
    source = code("same")
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        first = db.add(record(source, judged_at="2026-12-01T10:00:00+00:00"), source, TASK, ORIGIN)
        assert db.add(record(source, judged_at="2026-12-01T10:00:00+00:00"), source, TASK, ORIGIN) == first
        assert len(db.all()) == 1
        stricter = record(source, reason=Reason.GLOBAL_STATE_MODIFIED, judged_at="2026-12-02T10:00:00+00:00")
        assert db.add(stricter, source, TASK, Origin("other")) == first
        assert db.successes(TASK.sha256, "NVIDIA H200") == []  # a newer judge rejected it: no longer an exemplar
        older = record(source, speedup=4.0, judged_at="2026-11-30T10:00:00+00:00")
        db.add(older, source, TASK, ORIGIN)  # an older ledger imported later changes nothing
        (row,) = db.all()
    assert row.reason == "GLOBAL_STATE_MODIFIED" and row.origin == ORIGIN  # origin stays the first one


def write_ledger(path: Path, records: list[dict]) -> Path:
    for rec in records:
        ledger.append(path, JudgedRecord.from_json(rec))
    return path


def test_import_ledger_reads_code_from_origins_cache_copies_and_releases(tmp_path: Path) -> None:
    on_disk = tmp_path / "cands" / "level1" / "7_scaled_relu" / "file.py"
    on_disk.parent.mkdir(parents=True)
    on_disk.write_text(file_code := code("file"))
    edited = on_disk.with_name("edited.py")
    edited.write_text(code("edited-before"))
    cache_code = code("cached")
    (tmp_path / "cache" / "sources").mkdir(parents=True)
    (tmp_path / "cache" / "sources" / f"{record(cache_code)['candidate_sha256']}.py").write_text(cache_code)
    release_code = code("release")
    release = tmp_path / "release.jsonl"
    release.write_text(json.dumps({"level_id": 1, "task_id": 7, "custom_code": release_code, "op_name": "scaled_relu",
                                   "ref_code": TASK.source, "score_default": 50.0}) + "\n")
    release_task = TASK.__class__(1, 7, "7_scaled_relu", TASK.source, f"{release}:1")
    lines = [
        record(file_code, origin=str(on_disk)),
        record(code("edited-before"), origin=str(edited)),  # the file changed after judging
        record(cache_code, origin="somewhere/gone.jsonl:4"),  # only the judge's cache copy is left
        record(release_code, task=release_task, origin=f"{release}:1", speedup=1.1),
        record(code("lost"), origin="nowhere.py"),
    ]
    edited.write_text(code("edited-after"))
    path = write_ledger(tmp_path / "ledger.jsonl", lines)
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        report = db.import_ledger(path, [TASK], search=[tmp_path / "cache"])
        assert (report.stored, report.no_code, report.no_task) == (3, 2, 0)
        again = db.import_ledger(path, [TASK], search=[tmp_path / "cache"])
        assert again.stored == 3 and len(db.all()) == 3  # re-importing duplicates nothing
        speedups = sorted(e.speedup for e in db.successes(TASK.sha256, "NVIDIA H200"))
    assert speedups == [1.1, 1.5, 1.5]  # the release entry counts with its measured 1.1x, never its published 50x


def test_import_counts_records_of_unknown_tasks(tmp_path: Path) -> None:
    source_file = tmp_path / "c.py"
    source_file.write_text(source := code("c"))
    path = write_ledger(tmp_path / "ledger.jsonl", [record(source, origin=str(source_file))])
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        report = db.import_ledger(path, [])
        assert (report.stored, report.no_task) == (0, 1) and db.all() == []


def test_a_release_file_is_not_a_ledger_and_adds_nothing(tmp_path: Path) -> None:
    release = tmp_path / "release.jsonl"
    release.write_text(json.dumps({"level_id": 1, "task_id": 7, "custom_code": code("r"), "ref_code": TASK.source,
                                   "score_default": 50.0}) + "\n")
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        assert db.import_ledger(release, [TASK]).stored == 0 and db.all() == []


@pytest.mark.parametrize("make", ["newer_version", "foreign_sqlite", "garbage"])
def test_unusable_files_raise_naming_the_file_and_stay_untouched(tmp_path: Path, make: str) -> None:
    path = tmp_path / "x.sqlite"
    if make == "garbage":
        path.write_bytes(b"this is not a database file at all, only text" * 100)
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (t TEXT)")
        if make == "newer_version":
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
        conn.commit()
        conn.close()
    before = path.read_bytes()
    with pytest.raises(ExemplarDBError, match=str(path)):
        ExemplarDB(path)
    assert path.read_bytes() == before
    assert not path.with_name("x.sqlite-wal").exists()


def test_schema_version_is_recorded(tmp_path: Path) -> None:
    ExemplarDB(tmp_path / "x.sqlite").close()
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    ExemplarDB(tmp_path / "x.sqlite").close()  # reopening its own file is fine


@pytest.mark.parametrize("writers", [2, 4])
def test_processes_writing_at_once_lose_nothing(tmp_path: Path, writers: int) -> None:
    # They also race to create the schema in the new file (a 16-core machine once saw one
    # process read the version before and the tables after the other's creation).
    db_path = tmp_path / "x.sqlite"
    procs = [subprocess.Popen([sys.executable, str(WRITER), str(db_path), f"w{i}", "40"], env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(writers)]
    outputs = [w.communicate(timeout=300) for w in procs]
    assert [w.returncode for w in procs] == [0] * writers, [err for _, err in outputs]
    ids = [int(line) for out, _ in outputs for line in out.split()]
    with ExemplarDB(db_path) as db:
        rows = db.all()
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert len(rows) == 40 * writers and sorted(ids) == sorted(r.id for r in rows)


def test_a_writer_killed_mid_write_keeps_every_committed_row(tmp_path: Path) -> None:
    db_path = tmp_path / "x.sqlite"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(db_path), "k", "0"], env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    committed = [int(writer.stdout.readline()) for _ in range(30)]  # it keeps writing while we read
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    with ExemplarDB(db_path) as db:
        stored = {r.id for r in db.all()}
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(committed) <= stored
