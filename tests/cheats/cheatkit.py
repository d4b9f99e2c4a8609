"""Shared machinery of the red-team suite: judge groups of planted candidates in real pytest runs.

A *group* is one real ``pytest --cudal1-...`` run in a scratch folder: one or
more tiny task files from ``cases/tasks/level1/`` and a chosen set of candidate
files from ``cases/candidates/level1/<task>/`` (or a whole JSONL release), laid
out the way the plugin reads them. The run's ledger is read back raw (one JSON
object per line), so fields the harness adds later (``static_findings``) are
seen without this module knowing them.

Many candidates share one run because every worker imports torch (~1.5 s on
the CPU); the groups themselves run concurrently (``conftest.py``), as many at
a time as ``CUDAL1_CHEATS_JOBS`` says (default: the CPU count, at most 4).
Under pytest-xdist each group still runs once (``run_group_shared``).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
TASKS = CASES / "tasks" / "level1"
CANDIDATES = CASES / "candidates" / "level1"
REPO = HERE.parents[1]

# The options every group runs with (the brief's fast CPU settings).
BASE_OPTIONS = (
    "--cudal1-ledger=ledger.jsonl",
    "--cudal1-trials=3",
    "--cudal1-time-budget=0.5",
    "--cudal1-min-pairs=4",
    "--cudal1-max-pairs=8",
    "--cudal1-seed=1",
    "-p",
    "no:cacheprovider",
    "-rs",
)

RUN_TIMEOUT_S = 900


@dataclasses.dataclass(frozen=True)
class Group:
    """One judged run: which candidates of which tasks, or a JSONL release, and any extra options."""

    name: str
    candidates: tuple[tuple[str, str], ...] = ()  # (task stem, candidate stem)
    release: str | None = None  # a JSONL candidate file carrying its own ref_code
    extra_options: tuple[str, ...] = ()
    needs_gpu: bool = False

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(sorted({t for t, _ in self.candidates}))


@dataclasses.dataclass(frozen=True)
class Case:
    """One planted candidate and the verdicts the harness may give it (usually exactly one)."""

    task: str
    name: str
    expect: frozenset[str]
    group: str
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.group}:{self.name}"


def planted(task: str, name: str, *expect: str, group: str, why: str = "") -> Case:
    return Case(task, name, frozenset(expect), group, why)


def groups_from(cases: list[Case], extra: dict[str, tuple[str, ...]] | None = None,
                gpu: bool = False) -> dict[str, Group]:
    """One Group per distinct ``case.group``, holding that group's candidates."""
    by: dict[str, list[tuple[str, str]]] = {}
    for c in cases:
        by.setdefault(c.group, []).append((c.task, c.name))
    return {g: Group(g, tuple(sorted(set(members))), extra_options=(extra or {}).get(g, ()), needs_gpu=gpu)
            for g, members in by.items()}


@dataclasses.dataclass
class GroupResult:
    group: Group
    returncode: int
    output: str
    records: list[dict[str, Any]]
    seconds: float
    workdir: Path

    def record(self, name: str, task: str | None = None) -> dict[str, Any] | None:
        """The ledger record of candidate ``name`` (of ``task``'s problem when given), or None."""
        hits = [r for r in self.records if r.get("candidate_name") == name
                and (task is None or str(r.get("task_name", "")).startswith(task.split("_")[0] + "_"))]
        return hits[-1] if hits else None

    def skipped(self, name: str) -> str | None:
        """The ``-rs`` line that says the candidate was skipped (backend unavailable), or None."""
        for line in self.output.splitlines():
            if line.startswith("SKIPPED") and f"::{name}:" in line:
                return line
        return None

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-n:])


def layout(group: Group, workdir: Path) -> list[str]:
    """Copy the group's files into ``workdir``; return the options that point the plugin at them."""
    workdir.mkdir(parents=True, exist_ok=True)
    if group.release:
        return [f"--cudal1-candidates={group.release}"]
    tdir = workdir / "tasks" / "level1"
    tdir.mkdir(parents=True, exist_ok=True)
    for task in group.tasks:
        shutil.copy(TASKS / f"{task}.py", tdir / f"{task}.py")
    for task, name in group.candidates:
        cdir = workdir / "cands" / "level1" / task
        cdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(CANDIDATES / task / f"{name}.py", cdir / f"{name}.py")
    return ["--cudal1-tasks=tasks", "--cudal1-candidates=cands"]


def run_group(group: Group, workdir: Path) -> GroupResult:
    """Judge the group in a fresh ``python -m pytest`` (what ``pytester.runpytest_subprocess`` does)."""
    options = layout(group, workdir)
    # An absolute cache folder: with a relative one, JSONL candidates (which have no file of their own)
    # are handed to the worker as a path relative to the wrong folder (see test_release.py).
    cache = f"--cudal1-cache-dir={workdir / 'cache'}"
    cmd = [sys.executable, "-m", "pytest", *options, *BASE_OPTIONS, cache, *group.extra_options]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CUDAL1_CHEATS_"))}
    env["PYTHONUNBUFFERED"] = "1"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", timeout=RUN_TIMEOUT_S)
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code, out = -1, out + f"\n[cheatkit] run timed out after {RUN_TIMEOUT_S} s"
    seconds = time.monotonic() - t0
    (workdir / "pytest-output.txt").write_text(" ".join(cmd) + "\n\n" + out)
    return GroupResult(group, code, out, read_ledger(workdir / "ledger.jsonl"), seconds, workdir)


def run_group_shared(group: Group, root: Path) -> GroupResult:
    """``run_group`` once per ``root``: under pytest-xdist every worker asks, the first one runs it.

    The result is kept in ``root/judge-<name>/result.json`` behind a file lock, so
    workers sharing ``root`` (the parent of their base temp folders) wait for the
    one run instead of judging the same candidates again.
    """
    gdir = root / f"judge-{group.name}"
    gdir.mkdir(parents=True, exist_ok=True)
    done = gdir / "result.json"
    with open(gdir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            data = json.loads(done.read_text(encoding="utf-8"))
            return GroupResult(group, data["returncode"], data["output"], data["records"], data["seconds"],
                               Path(data["workdir"]))
        result = run_group(group, gdir / "run")
        done.write_text(json.dumps({"returncode": result.returncode, "output": result.output,
                                    "records": result.records, "seconds": result.seconds,
                                    "workdir": str(result.workdir)}), encoding="utf-8")
        return result


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def verdict_of(rec: dict[str, Any] | None) -> tuple[str, str]:
    if rec is None:
        return "<no record>", ""
    v = rec.get("verdict") or {}
    return str(v.get("reason")), str(v.get("message", ""))


def lookup(result: GroupResult, name: str, task: str | None = None) -> dict[str, Any]:
    """The candidate's record; skips when its backend is unavailable here, fails when it is missing."""
    import pytest

    rec = result.record(name, task)
    if rec is not None:
        return rec
    why = result.skipped(name)
    if why:
        pytest.skip(why)
    pytest.fail(f"no ledger record for candidate {name!r} in group {result.group.name!r} "
                f"(run exit code {result.returncode}, {len(result.records)} records; output in "
                f"{result.workdir / 'pytest-output.txt'}):\n{result.tail()}", pytrace=False)


def explain(rec: dict[str, Any], expected: frozenset[str] | set[str] | str) -> str:
    reason, message = verdict_of(rec)
    want = expected if isinstance(expected, str) else " or ".join(sorted(expected))
    timing = rec.get("timing") or {}
    speed = f"; speedup {timing.get('speedup'):.3g}x" if timing.get("speedup") else ""
    return (f"{rec.get('task_id')}::{rec.get('candidate_name')}: expected {want}, harness said {reason}{speed}\n"
            f"  verdict.message: {message[:600]}")


def findings_text(rec: dict[str, Any]) -> str:
    """``static_findings`` as lower-case text, whatever shape its items take."""
    return json.dumps(rec.get("static_findings"), default=str).lower()
