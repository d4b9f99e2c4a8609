"""Records in: ledgers, JSON record lists and saved pytest-benchmark runs, and how each record is classed.

A record's GPU is ``environment["gpu"]`` (``"cpu"`` without one); its status is
correct, rejected or skipped; a rejection is a *cheat* when its code is not one
of the honest failures below (loading, building, running, wrong values).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from pytest_cudal1.reasons import NOT_JUDGED, Reason
from pytest_cudal1.records import JudgedRecord, PairedTiming, TimingSummary, Verdict

# Rejections that are plain failures; any other rejection code is a cheat caught.
HONEST_FAILURES = frozenset({
    "BAD_TASK", "BAD_CANDIDATE_FILE", "REFERENCE_ERROR",
    "SYNTAX_ERROR", "IMPORT_ERROR", "COMPILE_ERROR", "COMPILE_TIMEOUT", "NO_MODELNEW", "INIT_ERROR",
    "RUNTIME_ERROR", "CUDA_ERROR", "OUT_OF_MEMORY", "TIMEOUT", "CRASH", "EARLY_EXIT", "PROTOCOL_VIOLATION",
    "STRUCTURE_MISMATCH", "SHAPE_MISMATCH", "DTYPE_MISMATCH", "DEVICE_MISMATCH", "NONFINITE_MISMATCH",
    "WRONG_OUTPUT", "NONDETERMINISTIC", "NO_CODE",
})


def gpu_key(record: JudgedRecord) -> str:
    """The GPU a record was measured on, by name; ``"cpu"`` without one."""
    return str(record.environment.get("gpu") or "cpu")


def status(record: JudgedRecord) -> str:
    """``"correct"``, ``"rejected"`` or ``"skipped"`` (backend not available)."""
    if record.verdict.passed:
        return "correct"
    if not record.verdict.reason.judged:
        return "skipped"
    return "rejected"


def is_cheat(code: str) -> bool:
    """A rejection code that is not an honest failure (so an anti-cheat check fired)."""
    return code not in HONEST_FAILURES and code != "OK" and code not in NOT_JUDGED


def kernels_of(record: JudgedRecord) -> list[str]:
    """Kernel names seen while the candidate ran (LIBRARY_ONLY verdicts also carry them as evidence)."""
    return [str(k) for k in record.kernels or record.verdict.evidence.get("kernels") or []]


def record_from(obj: JudgedRecord | Mapping[str, Any]) -> JudgedRecord:
    """A record from a record or its ``to_json()`` dict (which ``from_json`` leaves untouched)."""
    return obj if isinstance(obj, JudgedRecord) else JudgedRecord.from_json(obj)


_SIDE = re.compile(r"^(?P<item>.*)\[(?P<side>(?:reference|candidate)(?::call)?)\]$")
_TASK = re.compile(r"^L(?P<level>\d+)/(?P<name>(?P<problem>\d+)?.*)$")


def _benchmark_environment(data: Mapping[str, Any]) -> dict[str, Any]:
    """A record's ``environment`` from a saved pytest-benchmark run's machine and commit info."""
    machine = data.get("machine_info") or {}
    gpu = machine.get("gpu")
    env = {"gpu": None if gpu in (None, "", "none") else gpu, "driver": machine.get("gpu_driver"),
           "cuda": machine.get("cuda"), "torch": machine.get("torch"),
           "compute_capability": machine.get("compute_capability"), "host": machine.get("node")}
    env["device"] = "cuda" if env["gpu"] else "cpu"
    commit = (data.get("commit_info") or {}).get("id")
    if commit and commit != "unversioned":
        env["commit"] = commit
    return {k: v for k, v in env.items() if v is not None}


def _benchmark_summary(bench: Mapping[str, Any]) -> TimingSummary:
    st = bench.get("stats") or {}
    return TimingSummary(median_ms=st["median"] * 1e3, iqr_ms=st.get("iqr", 0.0) * 1e3, min_ms=st["min"] * 1e3,
                         mean_ms=st["mean"] * 1e3, n=int(st.get("rounds", 0)),
                         clock=str((bench.get("options") or {}).get("timer", "perf_counter")),
                         calls_per_sample=int(st.get("iterations", 1) or 1))


def _benchmark_timing(sides: Mapping[str, Mapping[str, Any]], info: Mapping[str, Any], measure: str) -> PairedTiming:
    """One measure's timing (``""``: kernel, ``"call"``) from its two saved benchmarks and the item's extra_info."""
    suffix, prefix = (f":{measure}", f"{measure}_") if measure else ("", "")
    ref, cand = _benchmark_summary(sides["reference" + suffix]), _benchmark_summary(sides["candidate" + suffix])
    return PairedTiming(reference=ref, candidate=cand, speedup=float(info[prefix + "speedup"]),
                        speedup_ci=tuple(info.get(prefix + "speedup_ci") or (math.nan, math.nan)),  # type: ignore[arg-type]
                        pairs=cand.n, method=str(info.get(prefix + "method", "")),
                        stopped_because="not saved (from a pytest-benchmark run)",
                        gpu_state=dict(info.get("gpu_state") or {}))


def records_from_benchmark_run(data: Mapping[str, Any]) -> list[JudgedRecord]:
    """Records rebuilt from a run saved by pytest-benchmark (``--benchmark-save``/``--benchmark-autosave``).

    ``benchmark_bridge`` saves each judged, timed item as two benchmarks, ``<item>[reference]`` and
    ``<item>[candidate]`` (and the ``call`` measure's ``<item>[reference:call]``, ``<item>[candidate:call]``), whose ``extra_info`` holds speedup, interval, verdict, method, GPU state and
    backend; the GPU, driver and CUDA come from ``machine_info``, the date from ``datetime``. Such a run
    holds no source hash, evidence or kernels, and no item that was rejected before timing.
    A benchmark whose ``extra_info`` is a whole record (or holds one under ``"cudal1"``) is taken as is.
    """
    env = _benchmark_environment(data)
    when = str(data.get("datetime") or "")
    out: list[JudgedRecord] = []
    items: dict[str, dict[str, Any]] = {}
    for bench in data.get("benchmarks") or []:
        info = (bench or {}).get("extra_info") or {}
        whole = info.get("cudal1", info)
        if isinstance(whole, Mapping) and "task_id" in whole and "verdict" in whole:
            try:
                record = record_from(whole)
            except (ValueError, KeyError, TypeError):
                continue
            for key, value in env.items():
                record.environment.setdefault(key, value)
            out.append(record)
            continue
        m = _SIDE.match(str(bench.get("name", "")))
        if m and "speedup" in info and "verdict" in info:
            items.setdefault(str(bench.get("group") or m["item"]), {})[m["side"]] = bench
    for item, sides in items.items():
        if not {"reference", "candidate"} <= set(sides) or "::" not in item:
            continue
        info = sides["candidate"]["extra_info"]
        task_id, candidate = item.rsplit("::", 1)
        task = _TASK.match(task_id)
        try:
            reason = Reason(info["verdict"])
            timing = _benchmark_timing(sides, info, "")
            call_timing = _benchmark_timing(sides, info, "call") if "candidate:call" in sides else None
        except (KeyError, TypeError, ValueError):
            continue
        out.append(JudgedRecord(
            task_id=task_id, level=int(task["level"]) if task else None,
            problem_id=int(task["problem"]) if task and task["problem"] else None,
            task_name=task["name"] if task else task_id, candidate_name=candidate, candidate_sha256="",
            candidate_origin=f"pytest-benchmark: {sides['candidate'].get('fullname', item)}",
            backend=str(info.get("backend", "")), device=env["device"],
            verdict=Verdict(reason, "from a saved pytest-benchmark run"), timing=timing, call_timing=call_timing,
            reward_measure=str(info.get("reward_measure", "kernel")),
            environment=dict(env), judged_at=when or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")))
    return out


def _records_in_json(data: Any) -> Iterator[JudgedRecord]:
    """The records in one parsed JSON document: a record, a list of them, or a saved benchmark run."""
    if isinstance(data, list):
        for item in data:
            yield from _records_in_json(item)
    elif isinstance(data, dict):
        if "task_id" in data and "verdict" in data:
            try:
                yield record_from(data)
            except (ValueError, KeyError, TypeError):
                return
        elif isinstance(data.get("benchmarks"), list):
            yield from records_from_benchmark_run(data)


def read_records(path: Path) -> list[JudgedRecord]:
    """Records in one ledger (JSONL), JSON list of records or saved pytest-benchmark run.

    Lines or entries that are not records (or use a reason code unknown here) are skipped.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    try:
        return list(_records_in_json(json.loads(text)))
    except ValueError:  # JSONL: one record per line; a torn final line is skipped
        pass
    records: list[JudgedRecord] = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n") or not line.strip():
            continue
        try:
            records.extend(_records_in_json(json.loads(line)))
        except ValueError:
            continue
    return records


def input_files(paths: Iterable[Path]) -> list[Path]:
    """The files named, with every ``*.jsonl`` and ``*.json`` under each folder named."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in (".jsonl", ".json")))
        else:
            files.append(p)
    return files

