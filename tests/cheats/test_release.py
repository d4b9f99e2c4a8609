"""Re-judge the red-team release (benchmarks/release/redteam_release.jsonl) in ONE pytest run.

The release is in the published form (``level_id``, ``task_id``, ``name``,
``ref_code``, ``custom_code``) plus an ``expect`` field: the reason code each
record must get. The run is given only ``--cudal1-candidates=<jsonl>`` (no
task option): every record carries its own reference. Each record's verdict is
asserted, and the run's terminal summary must name each cheat's code.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from .cheatkit import BASE_OPTIONS, REPO, Case, Group, explain, lookup, read_ledger, verdict_of

RELEASE_DIR = REPO / "benchmarks" / "release"
RELEASE = RELEASE_DIR / "redteam_release.jsonl"


def _records() -> list[dict]:
    if not RELEASE.exists():
        return []
    return [json.loads(line) for line in RELEASE.read_text(encoding="utf-8").splitlines() if line.strip()]


RECORDS = _records()
GROUP = Group("release", release=str(RELEASE))
CASES = [Case(f"{r['task_id']}_task", r["name"], frozenset({r["expect"]}), "release") for r in RECORDS]
MARK = pytest.mark.judge_group(GROUP)


def _load_builder():
    spec = importlib.util.spec_from_file_location("make_release", RELEASE_DIR / "make_release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_release_is_built_from_sources() -> None:
    """The JSONL is exactly what make_release.py makes of src/ (so the release stays reproducible)."""
    builder = _load_builder()
    records = builder.build_records()
    assert RELEASE.read_text(encoding="utf-8") == builder.render(records), (
        "redteam_release.jsonl is stale: run python benchmarks/release/make_release.py")
    assert len(records) >= 20
    assert {r["expect"] for r in records} >= {"OK"} and len({r["expect"] for r in records}) >= 10
    for r in records:
        assert list(r) == ["level_id", "task_id", "name", "ref_code", "custom_code", "expect"]
        assert "ModelNew" in r["custom_code"] and "get_inputs" in r["ref_code"]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=MARK) for c in CASES])
def test_release_record(case: Case, judged) -> None:
    result = judged.get(GROUP)
    rec = lookup(result, case.name, case.task)
    reason, _ = verdict_of(rec)
    assert reason in case.expect, explain(rec, case.expect)


@MARK
def test_release_judged_in_one_run(judged) -> None:
    result = judged.get(GROUP)
    names = [r.get("candidate_name") for r in result.records]
    assert sorted(names) == sorted(c.name for c in CASES), (
        f"the one run judged {len(names)} of {len(CASES)} records\n{result.tail(40)}")
    tasks = {r.get("task_id") for r in result.records}
    assert len(tasks) == len({c.task for c in CASES}), f"records grouped into tasks {sorted(map(str, tasks))}"


@MARK
def test_release_summary_names_each_cheat(judged) -> None:
    """The terminal summary's table has a row per cheat naming its expected reason code."""
    result = judged.get(GROUP)
    out = result.output
    assert "cudal1 verdicts" in out, f"no cudal1 summary section in the run's output\n{result.tail(40)}"
    summary = out.split("cudal1 verdicts", 1)[1]
    rows = summary.splitlines()
    missing = []
    for c in CASES:
        (code,) = c.expect
        if code == "OK":
            continue
        row = next((ln for ln in rows if re.search(rf"(^|\s){re.escape(c.name)}(\s|$)", ln)), None)
        if row is None or code not in row.split():
            missing.append(f"{c.name}: expected {code}, row: {row!r}")
    assert not missing, "summary rows without the cheat's code:\n  " + "\n  ".join(missing)
    counts = next((ln for ln in rows if ln.startswith("verdicts:")), "")
    for code in sorted({next(iter(c.expect)) for c in CASES} - {"OK"}):
        assert code in counts, f"the summary's count line does not name {code}: {counts!r}"


def test_release_judges_with_relative_cache_dir(pytester: pytest.Pytester) -> None:
    """A JSONL candidate has no file of its own; with a relative --cudal1-cache-dir its cached copy must still be found.

    (Seen: the worker, started in the build folder, was handed ``cache/sources/<sha>.py`` relative to the
    pytest process's folder, and every release record became IMPORT_ERROR.)
    """
    rec = next(r for r in RECORDS if r["expect"] == "OK" and "import triton" not in r["custom_code"])
    (pytester.path / "one.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    pytester.runpytest_subprocess("--cudal1-candidates=one.jsonl", *BASE_OPTIONS, "--cudal1-cache-dir=cache")
    records = read_ledger(pytester.path / "ledger.jsonl")
    assert len(records) == 1, f"expected one record, got {len(records)}"
    assert verdict_of(records[0])[0] == "OK", explain(records[0], "OK")
