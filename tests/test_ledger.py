"""The reward ledger: record round trips, torn lines, and runs that are killed or repeated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudal1_helpers import FAST, candidate_source, read_ledger, write_candidate, write_task
from pytest_cudal1 import ledger
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord, PairedTiming, TimingSummary, Verdict


def make_record(name: str = "cand", reason: Reason = Reason.OK, timed: bool = True) -> JudgedRecord:
    timing = None
    if timed:
        timing = PairedTiming(
            reference=TimingSummary(2.0, 0.1, 1.9, 2.01, 12, "perf_counter", 3),
            candidate=TimingSummary(1.0, 0.05, 0.95, 1.02, 12, "perf_counter", 3),
            speedup=2.0, speedup_ci=(1.8, 2.2), pairs=12, method="host perf_counter",
            stopped_because="converged", warnings=["w"], gpu_state={"clock": 1},
            candidate_first=[True, False] * 6,
        )
    return JudgedRecord(
        task_id="L1/1_relu", level=1, problem_id=1, task_name="1_relu", candidate_name=name,
        candidate_sha256="ab" * 32, candidate_origin="/x/cand.py", backend="torch", device="cpu",
        verdict=Verdict(reason, "msg", {"index": [1, 2], "nested": {"a": [1.5, None]}}),
        timing=timing, reward=1.99 if timed else 0.0, compile_s=0.5, first_call_ms=0.1, seed=7,
        environment={"torch": "2.x", "host": "h"},
    )


# ---------------------------------------------------------------- records ---

@pytest.mark.parametrize("reason, timed", [(Reason.OK, True), (Reason.WRONG_OUTPUT, False), (Reason.CRASH, False)])
def test_record_json_roundtrip(reason: Reason, timed: bool) -> None:
    rec = make_record(reason=reason, timed=timed)
    data = json.loads(json.dumps(rec.to_json()))
    assert data["verdict"]["reason"] == reason.value
    assert data["passed"] is (reason is Reason.OK)
    assert data["speedup"] == (2.0 if timed else None)
    back = JudgedRecord.from_json(data)
    assert back == rec
    assert back.verdict.reason is reason
    if timed:
        assert back.timing.speedup_ci == (1.8, 2.2) and isinstance(back.timing.speedup_ci, tuple)
        assert isinstance(back.timing.reference, TimingSummary)
    assert back.item_id == "L1/1_relu::cand"


def test_from_json_ignores_unknown_fields_and_rejects_unknown_codes() -> None:
    data = make_record().to_json()
    data["added_by_a_newer_version"] = 1
    data["timing"]["added_by_a_newer_version"] = 2  # in its timing too: an older reader still reads the record
    assert JudgedRecord.from_json(data) == make_record()
    data["verdict"]["reason"] = "NOT_A_CODE"
    with pytest.raises(ValueError):
        JudgedRecord.from_json(data)


# ----------------------------------------------------------- append / read ---

def test_append_and_read(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.jsonl"  # parent folders are created
    recs = [make_record(f"c{i}", Reason.OK if i % 2 else Reason.WRONG_OUTPUT, timed=bool(i % 2)) for i in range(5)]
    for r in recs:
        ledger.append(path, r)
    lines = path.read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line)["candidate_name"] == f"c{i}" for i, line in enumerate(lines))
    assert list(ledger.read(path)) == recs


def test_a_value_json_cannot_carry_is_written_as_its_repr(tmp_path: Path) -> None:
    """A candidate's worker that sends a value the wire does not carry (a rebound ``float`` made its encoder refuse
    every number) put an ``Unsupported`` in the record's evidence, and the record was lost to a TypeError."""
    from pytest_cudal1.wire import Unsupported

    rec = make_record("tampered", Reason.JUDGE_TAMPERING, timed=False)
    rec.verdict.evidence["host_ms"] = Unsupported("float", "not a plain float")
    ledger.append(tmp_path / "ledger.jsonl", rec)
    [back] = ledger.read(tmp_path / "ledger.jsonl")
    assert back.candidate_name == "tampered"
    assert back.verdict.evidence["host_ms"] == "<unsupported float: not a plain float>"


def test_torn_last_line_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger.append(path, make_record("first"))
    with open(path, "a") as f:
        f.write("not json at all\n")
        f.write(json.dumps({"some": "other tool's line"}) + "\n")
    ledger.append(path, make_record("second"))
    whole = json.dumps(make_record("torn").to_json())
    with open(path, "a") as f:
        f.write(whole[: len(whole) // 2])  # the writer died mid-line
    assert [r.candidate_name for r in ledger.read(path)] == ["first", "second"]
    # an append after the torn line still yields complete records for the next reader
    ledger.append(path, make_record("third"))
    assert "first" in [r.candidate_name for r in ledger.read(path)]


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    template = make_record()
    template.verdict.evidence["pad"] = "x" * 20000  # well past PIPE_BUF: one write() per line still
    (tmp_path / "record.json").write_text(json.dumps(template.to_json()))
    code = (
        "import json, sys; from pathlib import Path\n"
        "from pytest_cudal1 import ledger\n"
        "from pytest_cudal1.records import JudgedRecord\n"
        "rec = JudgedRecord.from_json(json.loads(Path({src!r}).read_text()))\n"
        "rec.candidate_name = 'p' + sys.argv[1]\n"
        "for _ in range(40):\n"
        "    ledger.append(Path({path!r}), rec)\n"
    ).format(src=str(tmp_path / "record.json"), path=str(path))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)]) for i in range(3)]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    records = list(ledger.read(path))
    assert len(records) == 120
    assert sorted({r.candidate_name for r in records}) == ["p0", "p1", "p2"]


# ---------------------------------------------------- killed and repeated runs ---

def processes_under(folder: Path) -> list[int]:
    """Live processes (not zombies) whose working directory is inside ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and cwd.is_relative_to(folder):
            found.append(int(entry.name))
    return found


def test_killed_run_keeps_complete_lines_and_rerun_appends(tmp_path: Path) -> None:
    tasks, cands = tmp_path / "tasks", tmp_path / "cands"
    write_task(tasks, 1, "1_relu")
    names = ["cand_a", "cand_b", "cand_c", "cand_d", "cand_e"]
    for i, name in enumerate(names):
        # distinct sources (a comment) so each is its own candidate; all correct
        write_candidate(cands, 1, "1_relu", name, f"# {i}\n" + candidate_source())
    path = tmp_path / "ledger.jsonl"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *FAST, f"--cudal1-tasks={tasks}",
            f"--cudal1-candidates={cands}", f"--cudal1-ledger={path}", f"--cudal1-cache-dir={tmp_path / 'cache'}",
            "-p", "no:randomly", "-q"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}

    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists() and path.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    # its workers notice the controller is gone (their pipes close) and exit on their own
    deadline = time.monotonic() + 30
    while processes_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_under(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "worker processes outlived their killed controller"

    data = path.read_bytes()
    assert data.endswith(b"\n")
    killed = read_ledger(path)  # every line parses
    assert 1 <= len(killed) < len(names)
    assert [r["candidate_name"] for r in killed] == names[: len(killed)]
    assert all(r["verdict"]["reason"] == "OK" for r in killed)
    assert len(list(ledger.read(path))) == len(killed)

    rerun = subprocess.run([*args, "-k", "cand_e"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert rerun.returncode == 0, rerun.stdout[-2000:]
    assert path.read_bytes().startswith(data)  # earlier lines untouched
    after = read_ledger(path)
    assert len(after) == len(killed) + 1
    assert after[-1]["candidate_name"] == "cand_e" and after[-1]["verdict"]["reason"] == "OK"
