"""Throughput (issue 18): one batch judged by pytest-cudal1, KernelBench's harness and CUDA-L1's harness.

The batch is 12 records of CUDA-L1's release (``--records``) and ``--rollout-tasks`` tasks x ``--rollouts``
rollouts (G rollouts of one prompt: distinct variants of one torch-only release candidate, so no harness
can reuse a build or a verdict). Which records, by the rule in ``SELECTION_RULE``, is committed in
``benchmarks/throughput_batch.json`` (ids and names only; the code comes from ``--release``):

    python benchmarks/throughput.py --select --release a100.jsonl [--problems problems.jsonl]
    python benchmarks/throughput.py --release .device/a100.jsonl --anchors .device/anchors --out DIR \\
        [--harnesses ours,kernelbench,cudal1] [--records 12 --rollout-tasks 2 --rollouts 4] [--ours-args "..."]
    python benchmarks/throughput.py --summarize DIR [DIR ...] --out DIR

A run appends one line per (harness, candidate) to ``DIR/throughput.jsonl`` as it finishes (a call cut at
its limit still returns data), then summarizes DIR; ``--summarize`` builds ``throughput.json`` and
``throughput.md`` from the lines of several runs (say, one device call per harness). Ours is one pytest
run over the whole batch, as a user runs it (``--cudal1-time-budget=2``, else defaults, plus
``--ours-args``); each anchor candidate is its own process (``throughput_anchors.py``) with
``--anchor-timeout``. Every harness gets a fresh ``TORCH_EXTENSIONS_DIR``, so none reuses another's builds.

What is counted: candidates/hour is judged candidates over the harness's whole wall time (ours: the pytest
run, start-up and collection included; anchors: every candidate's process, start included; their in-call
rate is ``candidates_per_hour_in_eval``). Timed seconds are the time inside timed calls, both models (ours:
``samples_ms`` x ``calls_per_sample`` of each measure, without the hold and L2 flush around them;
KernelBench: mean x trials of ``runtime_stats`` and ``ref_runtime_stats``; CUDA-L1: its log's
``total_gpu_execution_time``). KernelBench at the anchored commit times the reference inside every call
(its excessive-speedup check, on by default), so its speedup is its own ``ref_runtime / runtime`` and no
separate reference run is added to its total. On the GPU machine (``bash benchmarks/gpu_session.sh
throughput``), the default batch (20 candidates) should take about 5 min each for ours and KernelBench
and 7-10 min for CUDA-L1 (from 15 s, 5-8 s and 20 s a candidate measured before, plus 30-90 s per
load_inline build): ``TP_HARNESSES=ours,kernelbench`` in one call, ``TP_HARNESSES=cudal1`` in a second, then
``--summarize`` both folders.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytest_cudal1.candidates import detect_backend  # noqa: E402
from throughput_anchors import missing_modules, write_standins  # noqa: E402

SELECTION = Path(__file__).with_name("throughput_batch.json")
ANCHOR_SCRIPT = Path(__file__).with_name("throughput_anchors.py")
HARNESSES = ("ours", "kernelbench", "cudal1")
OURS_SETTINGS = ("--cudal1-time-budget=2",)  # issue 14's setting for re-judging; all else default
RESULTS = "throughput.jsonl"
MAX_INPUT_BYTES = 32 << 20
MAX_REF_CPU_MS = 20.0
TORCH_RECORDS, INLINE_RECORDS, ROLLOUT_TASKS, ROLLOUT_CHECKED = 9, 3, 2, 3
SELECTION_RULE = (
    "Records of levels 1-2 whose custom_code is code (not None/'None') in plain PyTorch or C++/CUDA through "
    f"load_inline (detect_backend), whose reference's inputs are at most {MAX_INPUT_BYTES >> 20} MB (shapes from "
    f"get_inputs on torch's meta device) and whose reference forward takes at most {MAX_REF_CPU_MS:g} ms on one "
    f"CPU thread (median of 3 calls after a warm-up). Records: the {TORCH_RECORDS} cheapest torch-only, taken "
    f"cheapest level 1, cheapest level 2, in turn, then the {INLINE_RECORDS} cheapest load_inline ones (torch-only "
    f"first, so a smaller --records keeps to torch). Rollout tasks: of the {ROLLOUT_CHECKED} costliest eligible "
    "torch-only records of each level (not among the records; kernels long enough for timing to be most of a "
    "judgment, as in RL on real tasks), the costliest of level 1, then of level 2, whose candidate pytest-cudal1 "
    "accepts on the CPU (rollout_cpu_check: a rejected one's rollouts would time nothing).")


# ------------------------------------------------------------------------------------------- selection ---

def reference_cost(ref_code: str) -> tuple[float, float | None]:
    """The reference's input size in MB and, when small enough, its forward's CPU time in ms (trusted code)."""
    import torch

    def loaded(device: str) -> tuple[Any, list[Any]]:
        namespace: dict[str, Any] = {}
        with torch.device(device):
            exec(compile(ref_code, "<reference>", "exec"), namespace)
            return namespace, namespace["get_inputs"]()

    _, meta_inputs = loaded("meta")
    nbytes = sum(x.numel() * x.element_size() for x in meta_inputs if isinstance(x, torch.Tensor))
    if nbytes > MAX_INPUT_BYTES:
        return nbytes / 2**20, None
    namespace, inputs = loaded("cpu")
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
    times = []
    with torch.no_grad():
        model(*inputs)
        for _ in range(3):
            start = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - start) * 1000)
    return nbytes / 2**20, statistics.median(times)


def task_names(problems: Path | None) -> dict[tuple[int, int], str]:
    """KernelBench's task names by (level, problem id), from a problems.jsonl (the release has none)."""
    if problems is None:
        return {}
    rows = [json.loads(line) for line in problems.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["level"], r["problem_id"]): r["name"] for r in rows}


def select(release: Path, problems: Path | None) -> dict[str, Any]:
    """Apply ``SELECTION_RULE`` to the release; the ids, names and costs it chose."""
    import torch

    torch.set_num_threads(1)
    names = task_names(problems)
    eligible = []
    for rec in read_jsonl(release):
        code = rec.get("custom_code")
        if rec["level_id"] not in (1, 2) or not isinstance(code, str) or code.strip() in ("", "None"):
            continue
        backend = detect_backend(code)
        if backend not in ("torch", "cuda", "cpp"):
            continue
        try:
            input_mb, cpu_ms = reference_cost(rec["ref_code"])
        except Exception as exc:  # a reference the meta device cannot run is not a small one to pick
            print(f"L{rec['level_id']}/{rec['task_id']}: skipped ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        if cpu_ms is None or cpu_ms > MAX_REF_CPU_MS:
            continue
        level, pid = rec["level_id"], rec["task_id"]
        eligible.append({"level_id": level, "task_id": pid, "name": names.get((level, pid), f"{pid}_task"),
                         "backend": "torch" if backend == "torch" else "load_inline",
                         "ref_input_mb": round(input_mb, 3), "ref_cpu_ms": round(cpu_ms, 3)})
    eligible.sort(key=lambda e: e["ref_cpu_ms"])
    torch_by_level = {lv: [e for e in eligible if e["backend"] == "torch" and e["level_id"] == lv] for lv in (1, 2)}
    records = [torch_by_level[1 + i % 2].pop(0) for i in range(TORCH_RECORDS)]
    records += [e for e in eligible if e["backend"] == "load_inline"][:INLINE_RECORDS]
    spares = [e for lv in (1, 2) for e in reversed(torch_by_level[lv][-ROLLOUT_CHECKED:])]
    by_id = {(r["level_id"], r["task_id"]): r for r in read_jsonl(release)}
    checked = check_on_cpu([make_entry(c, by_id[(c["level_id"], c["task_id"])], "release", "rollouts")
                            for c in spares])
    rollout_tasks = [next(c for c in spares if c["level_id"] == lv and checked[key_of(c, "release")] == "OK")
                     for lv in (1, 2)][:ROLLOUT_TASKS]
    return {"rule": SELECTION_RULE, "release": release.name, "records": records, "rollout_tasks": rollout_tasks,
            "rollout_cpu_check": checked}


def check_on_cpu(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Our verdict on each entry, judged here (CPU, short timing): a rollout task's candidate must be accepted,
    or its rollouts would measure a rejection, not a judgment."""
    with tempfile.TemporaryDirectory(prefix="tp-check-") as tmp:
        run_ours(entries, Path(tmp), "--cudal1-time-budget=0.3", Results(Path(tmp)), Path(tmp) / "work")
        return {c["key"]: c["verdict"] for c in read_jsonl(Path(tmp) / RESULTS) if c["kind"] == "candidate"}


# ----------------------------------------------------------------------------------------------- batch ---

def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def build_batch(release: Path, selection: dict[str, Any], records: int, rollout_tasks: int,
                rollouts: int) -> list[dict[str, Any]]:
    """The batch's entries: ``records`` release records, then ``rollouts`` variants of each rollout task's."""
    if records > len(selection["records"]) or rollout_tasks > len(selection["rollout_tasks"]):
        raise SystemExit(f"the selection has {len(selection['records'])} records and "
                         f"{len(selection['rollout_tasks'])} rollout tasks")
    by_id = {(r["level_id"], r["task_id"]): r for r in read_jsonl(release)}
    batch = [make_entry(c, by_id[(c["level_id"], c["task_id"])], "release", "records")
             for c in selection["records"][:records]]
    for chosen in selection["rollout_tasks"][:rollout_tasks]:
        rec = by_id[(chosen["level_id"], chosen["task_id"])]
        batch += [make_entry(chosen, rec, f"rollout{i}", "rollouts",
                             f"# rollout {i} of {rollouts}: {chosen['name']}\n{rec['custom_code']}")
                  for i in range(1, rollouts + 1)]
    return batch


def key_of(chosen: dict[str, Any], name: str) -> str:
    return f"L{chosen['level_id']}/{chosen['task_id']}::{name}"


def make_entry(chosen: dict[str, Any], rec: dict[str, Any], name: str, part: str,
               code: str | None = None) -> dict[str, Any]:
    """One batch entry: a selected task's release record, its candidate ``code`` (the release's by default)."""
    return {"key": key_of(chosen, name), "part": part, "level_id": chosen["level_id"], "task_id": chosen["task_id"],
            "task_name": chosen["name"], "name": name, "backend": chosen["backend"],
            "published_score": rec.get("score_default"), "ref_code": rec["ref_code"],
            "custom_code": rec["custom_code"] if code is None else code}


class Results:
    """The run's JSONL, one line per (harness, candidate) written as it finishes, plus each run's start and end."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / RESULTS

    def write(self, line: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())


def candidate_line(harness: str, entry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"kind": "candidate", "harness": harness, "key": entry["key"], "part": entry["part"],
            "backend": entry["backend"], "published_score": entry["published_score"], **fields}


# ------------------------------------------------------------------------------------------------ ours ---

def timed_seconds(record: dict[str, Any]) -> float:
    """Seconds both sides spent in timed calls, over the record's measures (the CPU's ``call`` measure holds
    the ``kernel`` measure's own pairs: counted once)."""
    measures = [m for m in (record.get("timing"), record.get("call_timing")) if m]
    if len(measures) == 2 and all(measures[0][s]["samples_ms"] == measures[1][s]["samples_ms"]
                                  for s in ("reference", "candidate")):
        measures = measures[:1]
    return sum(sum(m[s]["samples_ms"]) * m[s]["calls_per_sample"] for m in measures
               for s in ("reference", "candidate")) / 1000.0


def timing_steps(record: dict[str, Any]) -> dict[str, float]:
    """Where the record's timing runs spent their wall time, by step (``PairedTiming.wall_s``), over its
    measures (the CPU's ``call`` measure is the ``kernel`` measure's own run: counted once)."""
    measures = [m for m in (record.get("timing"), record.get("call_timing")) if m]
    if len(measures) == 2 and measures[0].get("wall_s") == measures[1].get("wall_s"):
        measures = measures[:1]
    steps: dict[str, float] = {}
    for m in measures:
        for step, seconds in (m.get("wall_s") or {}).items():
            steps[step] = steps.get(step, 0.0) + seconds
    return steps


def new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Complete JSON lines appended to ``path`` since ``offset``, and the new offset."""
    if not path.exists():
        return [], offset
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    complete = data[:data.rfind(b"\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()], offset + len(complete)


def run_ours(batch: list[dict[str, Any]], out: Path, ours_args: str, results: Results, work: Path) -> None:
    """One pytest run over the whole batch (its files and caches in ``work``); a line per ledger record as it
    appears."""
    work.mkdir(parents=True, exist_ok=True)
    candidates = work / "batch.jsonl"
    fields = ("level_id", "task_id", "task_name", "name", "ref_code", "custom_code")
    candidates.write_text("".join(json.dumps({k: e[k] for k in fields}) + "\n" for e in batch), encoding="utf-8")
    ledger = out / "ours-ledger.jsonl"
    ledger.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", f"--cudal1-candidates={candidates}",
           f"--cudal1-ledger={ledger}", f"--cudal1-cache-dir={work / 'cache'}", *OURS_SETTINGS, *shlex.split(ours_args)]
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions")}
    results.write({"kind": "run_start", "harness": "ours", "candidates": len(batch),
                   "options": cmd[3:]})
    by_key = {e["key"]: e for e in batch}
    seen: set[str] = set()
    offset, startup_s = 0, 0.0
    start = last = time.perf_counter()
    with (out / "ours.log").open("a", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        while True:
            finished = proc.poll() is not None
            lines, offset = new_lines(ledger, offset)
            for rec in lines:
                now = time.perf_counter()
                key = f"L{rec['level']}/{rec['problem_id']}::{rec['candidate_name']}"
                wall = now - last
                if not seen:  # the first item's gap holds pytest's start and collection: kept apart
                    judged = min(wall, sum(rec["phase_s"].values()))
                    startup_s, wall = wall - judged, judged
                seen.add(key)
                last = now
                results.write(candidate_line(
                    "ours", by_key[key], correct=rec["passed"], verdict=rec["verdict"]["reason"],
                    speedup=rec["speedup"], call_speedup=rec["call_speedup"], timed_s=timed_seconds(rec),
                    phase_s=rec["phase_s"], timing_steps_s=timing_steps(rec),
                    reference_steps_s=rec.get("warm_start", {}).get("reference_s", {}), wall_s=wall, t_s=now - start))
            if finished:
                break
            time.sleep(0.5)
    for entry in batch:
        if entry["key"] not in seen:
            results.write(candidate_line("ours", entry, correct=None, verdict="NOT_JUDGED",
                                         detail="no ledger line: skipped on this machine or not reached (ours.log)"))
    results.write({"kind": "run_end", "harness": "ours", "wall_s": time.perf_counter() - start,
                   "startup_s": startup_s, "returncode": proc.returncode})


# --------------------------------------------------------------------------------------------- anchors ---

def run_anchor(harness: str, batch: list[dict[str, Any]], out: Path, anchors: Path, timeout: float,
               results: Results, work: Path) -> None:
    """Each candidate judged by the peer harness in a fresh process of its own, with a timeout (its jobs,
    stand-ins and builds in ``work``)."""
    standins = missing_modules()
    write_standins(work / "standins", standins)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions")}
    results.write({"kind": "run_start", "harness": harness, "candidates": len(batch), "standins": standins,
                   "timeout_s": timeout})
    start = time.perf_counter()
    with (out / f"{harness}.log").open("a", encoding="utf-8") as log:
        for i, entry in enumerate(batch):
            job, result = work / f"job{i}.json", work / f"result{i}.json"
            job.write_text(json.dumps({k: entry[k] for k in ("ref_code", "custom_code")}), encoding="utf-8")
            cmd = [sys.executable, str(ANCHOR_SCRIPT), "--harness", harness, "--anchors", str(anchors),
                   "--job", str(job), "--result", str(result), "--standins", str(work / "standins")]
            log.write(f"=== {entry['key']}\n")
            log.flush()
            began = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout)
                verdict = None if result.exists() else f"CRASHED (exit status {proc.returncode})"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                verdict = f"TIMEOUT ({timeout:g} s)"
            now = time.perf_counter()
            fields = json.loads(result.read_text(encoding="utf-8")) if verdict is None else {
                "correct": False, "speedup": None, "verdict": verdict, "timed_s": 0.0, "eval_s": None}
            results.write(candidate_line(harness, entry, wall_s=now - began, t_s=now - start, **fields))
    results.write({"kind": "run_end", "harness": harness, "wall_s": time.perf_counter() - start})


# ------------------------------------------------------------------------------------------- summarize ---

def harness_summary(lines: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Candidates per hour, timed share and (ours) phase totals of one harness over its runs' lines."""
    judged = [c for c in lines if c["verdict"] != "NOT_JUDGED"]
    wall = sum(r["wall_s"] for r in runs)
    timed = sum(c["timed_s"] for c in judged)
    parts = {}
    for part in sorted({c["part"] for c in judged}):
        mine = [c for c in judged if c["part"] == part]
        part_wall, part_timed = sum(c["wall_s"] for c in mine), sum(c["timed_s"] for c in mine)
        parts[part] = {"candidates": len(mine), "wall_s": part_wall, "timed_s": part_timed,
                       "timed_share": part_timed / part_wall if part_wall else None,
                       "candidates_per_hour": 3600 * len(mine) / part_wall if part_wall else None}
    summary: dict[str, Any] = {
        "candidates": len(judged), "not_judged": len(lines) - len(judged), "wall_s": wall,
        "candidates_per_hour": 3600 * len(judged) / wall if wall else None, "timed_s": timed,
        "timed_share": timed / wall if wall else None, "parts": parts,
        "correct": sum(bool(c["correct"]) for c in judged)}
    phases: dict[str, float] = {}
    for c in judged:
        for phase, seconds in (c.get("phase_s") or {}).items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    # The timing phase by step (the timed regions lie inside "samples"), and the reference's start by step.
    for key in ("timing_steps_s", "reference_steps_s"):
        steps: dict[str, float] = {}
        for c in judged:
            for step, seconds in (c.get(key) or {}).items():
                steps[step] = steps.get(step, 0.0) + seconds
        if steps:
            summary[key] = dict(sorted(steps.items(), key=lambda kv: -kv[1]))
    if phases:
        summary["phase_s"] = dict(sorted(phases.items(), key=lambda kv: -kv[1]))
        summary["startup_s"] = sum(r.get("startup_s", 0.0) for r in runs)
        # the rest: between items (workers closing, the next item's set-up, pytest's own reporting)
        summary["outside_phases_s"] = wall - summary["startup_s"] - sum(phases.values())
    evals = [c["eval_s"] for c in judged if c.get("eval_s") is not None]
    if evals:  # the anchors' own call, without their process start: their throughput at best
        summary["eval_s"] = sum(evals)
        summary["candidates_per_hour_in_eval"] = 3600 * len(evals) / sum(evals)
    standins = sorted({name for r in runs for name in r.get("standins", [])})
    if any("standins" in r for r in runs):
        summary["standins"] = standins
    return summary


def summarize(dirs: list[Path], out: Path) -> dict[str, Any]:
    """``throughput.json`` and ``throughput.md`` in ``out`` from the JSONL of the runs in ``dirs``."""
    lines = [line for d in dirs if (d / RESULTS).exists() for line in read_jsonl(d / RESULTS)]
    runs: dict[str, list[dict[str, Any]]] = {}
    for line in lines:  # a run cut short has no end line: its wall is up to its last candidate
        if line["kind"] == "run_start":
            runs.setdefault(line["harness"], []).append({"wall_s": 0.0, **line})
        elif line["kind"] == "run_end":
            runs[line["harness"]][-1].update(line)
        elif "t_s" in line:
            runs[line["harness"]][-1]["wall_s"] = max(runs[line["harness"]][-1]["wall_s"], line["t_s"])
    candidates = [c for c in lines if c["kind"] == "candidate"]
    harnesses = {h: harness_summary([c for c in candidates if c["harness"] == h], runs[h]) for h in HARNESSES
                 if h in runs}
    latest = {(c["harness"], c["key"]): c for c in candidates}
    keys = list(dict.fromkeys(c["key"] for c in candidates))
    rows = [{"key": k, **{f: next(c[f] for c in candidates if c["key"] == k) for f in ("part", "backend",
                                                                                   "published_score")},
             **{h: {f: latest[(h, k)].get(f) for f in ("correct", "verdict", "speedup", "call_speedup")}
                for h in harnesses if (h, k) in latest}} for k in keys]
    summary = {"runs": [str(d) for d in dirs], "harnesses": harnesses, "ratios": ratios(harnesses),
               "agreement": agreement(rows, list(harnesses)), "verdicts": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (out / "throughput.md").write_text(markdown(summary), encoding="utf-8")
    return summary


def ratios(harnesses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 18's goals: ours >= 4x CUDA-L1's and >= 2x KernelBench's candidates/hour, rollouts >= 50% timed."""
    ours = harnesses.get("ours", {})
    found: dict[str, Any] = {}
    for peer, goal in (("cudal1", 4.0), ("kernelbench", 2.0)):
        if ours.get("candidates_per_hour") and harnesses.get(peer, {}).get("candidates_per_hour"):
            x = ours["candidates_per_hour"] / harnesses[peer]["candidates_per_hour"]
            found[f"ours_over_{peer}"] = {"ratio": x, "goal": goal, "met": x >= goal}
    share = ours.get("parts", {}).get("rollouts", {}).get("timed_share")
    if share is not None:
        found["ours_rollout_timed_share"] = {"share": share, "goal": 0.5, "met": share >= 0.5}
    return found


def agreement(rows: list[dict[str, Any]], harnesses: list[str]) -> dict[str, Any]:
    """Per pair of harnesses: candidates both judged, and on how many they agree that it is correct."""
    found = {}
    for i, a in enumerate(harnesses):
        for b in harnesses[i + 1:]:
            both = [r for r in rows if r.get(a, {}).get("correct") is not None and r.get(b, {}).get("correct")
                    is not None]
            found[f"{a}~{b}"] = {"both_judged": len(both),
                                 "same_correctness": sum(r[a]["correct"] == r[b]["correct"] for r in both)}
    return found


def _num(x: float | None, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _cell(verdict: dict[str, Any] | None, measure: str = "speedup") -> str:
    if verdict is None:
        return "not run"
    speedup = verdict.get(measure)
    return verdict["verdict"] + (f" {speedup:.2f}x" if speedup is not None else "")


def markdown(summary: dict[str, Any]) -> str:
    """The summary as tables: harnesses, goals, our phases, and the verdict per candidate and harness."""
    hs = summary["harnesses"]
    out = ["# Throughput: pytest-cudal1 vs KernelBench vs CUDA-L1", "",
           "| harness | candidates | correct | wall s | candidates/hour | timed share | rollouts timed share |",
           "|---|---|---|---|---|---|---|"]
    for h, s in hs.items():
        rollouts = s["parts"].get("rollouts", {}).get("timed_share")
        out.append(f"| {h} | {s['candidates']} | {s['correct']} | {s['wall_s']:.1f} | "
                   f"{_num(s['candidates_per_hour'], '.0f')} | {_num(s['timed_share'], '.1%')} | "
                   f"{_num(rollouts, '.1%')} |")
    out += ["", "Goals: " + ("; ".join(f"{k} {_num(v.get('ratio', v.get('share')), '.2f')} (goal {v['goal']:g}, "
                                      f"{'met' if v['met'] else 'not met'})" for k, v in summary["ratios"].items())
                             or "none measurable in these runs")]
    if "phase_s" in hs.get("ours", {}):
        ours = hs["ours"]
        out += ["", f"Our wall time per phase (s, summed over candidates; startup {ours['startup_s']:.1f} s, "
                f"outside the phases {ours['outside_phases_s']:.1f} s): "
                + ", ".join(f"{p} {s:.1f}" for p, s in ours["phase_s"].items())]
    if "timing_steps_s" in hs.get("ours", {}):
        out += ["", f"Our timing runs by step (s, summed; timed regions {hs['ours']['timed_s']:.2f} s, inside "
                "samples): " + ", ".join(f"{p} {s:.2f}" for p, s in hs["ours"]["timing_steps_s"].items())]
    if "reference_steps_s" in hs.get("ours", {}):
        out += ["", "Our reference starts by step (s, summed; `probe_*` inside the reference worker): "
                + ", ".join(f"{p} {s:.2f}" for p, s in hs["ours"]["reference_steps_s"].items())]
    names = [h for h in HARNESSES if h in hs]
    header = ["candidate", "part", "published"] + [f"{h} (call)" if h == "ours" else h for h in names]
    out += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary["verdicts"]:
        cells = [row["key"], row["part"], _num(row["published_score"], ".2f")]
        for h in names:
            cell = _cell(row.get(h))
            if h == "ours" and row.get(h) and row[h].get("call_speedup") is not None:
                cell += f" ({row[h]['call_speedup']:.2f}x)"
            cells.append(cell)
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Agreement on correctness: " + (", ".join(f"{k} {v['same_correctness']}/{v['both_judged']}"
                                                         for k, v in summary["agreement"].items())
                                                or "one harness only")]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------- main ---

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--select", action="store_true", help=f"write the selection to {SELECTION.name} and stop")
    parser.add_argument("--problems", type=Path, help="with --select: KernelBench problems.jsonl, for task names")
    parser.add_argument("--summarize", type=Path, nargs="+", metavar="DIR", help="summarize these runs' JSONL")
    parser.add_argument("--release", type=Path, help="CUDA-L1's release (a100.jsonl)")
    parser.add_argument("--anchors", type=Path, help="the anchors folder (kernelbench_upstream, cudal1_upstream)")
    parser.add_argument("--out", type=Path, help="results folder")
    parser.add_argument("--selection", type=Path, default=SELECTION)
    parser.add_argument("--harnesses", default=",".join(HARNESSES))
    parser.add_argument("--records", type=int, default=TORCH_RECORDS + INLINE_RECORDS)
    parser.add_argument("--rollout-tasks", type=int, default=ROLLOUT_TASKS)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--ours-args", action="append", default=[],
                        help="more pytest options for our run (may be given more than once; a later option wins)")
    parser.add_argument("--anchor-timeout", type=float, default=300.0, help="seconds per anchor candidate")
    args = parser.parse_args(argv)
    if args.select:
        if args.release is None:
            parser.error("--select needs --release")
        args.selection.write_text(json.dumps(select(args.release, args.problems), indent=1) + "\n", encoding="utf-8")
        return 0
    if args.out is None:
        parser.error("--out is required")
    if args.summarize:
        print(markdown(summarize(args.summarize, args.out)))
        return 0
    harnesses = [h for h in args.harnesses.split(",") if h]
    unknown = set(harnesses) - set(HARNESSES)
    if unknown or args.release is None or (set(harnesses) - {"ours"} and args.anchors is None):
        parser.error(f"unknown harness {sorted(unknown)}" if unknown else "--release (and, for the anchors, "
                     "--anchors) are required")
    batch = build_batch(args.release, json.loads(args.selection.read_text(encoding="utf-8")), args.records,
                        args.rollout_tasks, args.rollouts)
    results = Results(args.out)
    for harness in harnesses:
        with tempfile.TemporaryDirectory(prefix=f"tp-{harness}-", ignore_cleanup_errors=True) as work:
            if harness == "ours":
                run_ours(batch, args.out, " ".join(args.ours_args), results, Path(work))
            else:
                run_anchor(harness, batch, args.out, args.anchors.resolve(), args.anchor_timeout, results,
                           Path(work))
    print(markdown(summarize([args.out], args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
