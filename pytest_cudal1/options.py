"""Every ``--cudal1-*`` setting: its type, default and help, and how a value is read.

One list, so each setting is an option and an ini key at once (``--cudal1-time-budget`` and
``cudal1_time_budget``), as pytest-timeout does; the command line wins over the ini file.
"""

from __future__ import annotations

from typing import Any

import pytest

SETTINGS: list[tuple[str, str, Any, str]] = [
    # (name, type, default, help) -- each is --cudal1-<name> and ini cudal1_<name>.
    ("tasks", "string", None, "KernelBench tasks: a checkout, a levelN/ folder, a JSONL file or one .py (default: bundled set)"),
    ("candidates", "string", None, "candidates: a levelN/<problem>/ folder or a JSONL file (default: bundled candidates "
                                   "for the bundled set, else each task's own reference)"),
    ("level", "string", None, "comma-separated levels to judge, e.g. 1,2"),
    ("ledger", "string", "cudal1-ledger.jsonl", "reward ledger (JSONL) to append every judged pair to"),
    ("trials", "int", 5, "correctness trials per candidate (hypothesis-drawn input recipes)"),
    ("seed", "int", None, "seed the models' weights are built under (default: random, recorded in the ledger)"),
    ("judge-seed", "int", None, "seed of timing inputs, order and audits, and of every task's trial recipes, to "
                                "reproduce a run (default: drawn per item after the candidate is built, recorded "
                                "as judge_seed; trial recipes per task, never recorded)"),
    ("lookahead", "int", 1, "items ahead whose workers (candidate, reference) start while one is judged; more "
                            "keeps short items from waiting for a start where cores are spare (on a CPU machine "
                            "every start is waited for before timing)"),
    ("fresh-trials", "bool", False, "give every candidate trial recipes of its own, the reference recomputed for "
                                    "each (default: a task's recipes are drawn once per run, its reference outputs "
                                    "reused by its candidates)"),
    ("compile-timeout", "float", 600.0, "seconds a candidate may spend importing/compiling, constructing ModelNew, "
                                        "and in its first (warm-up) call"),
    ("call-timeout", "float", 60.0, "seconds one forward call may take before its worker is killed"),
    ("time-budget", "float", 10.0, "seconds of paired timing per candidate and measure (kernel, call), at most"),
    ("min-pairs", "int", 10, "fewest timed (reference, candidate) pairs"),
    ("max-pairs", "int", 200, "most timed pairs"),
    ("target-ci", "float", 0.02, "stop timing once the speedup's 95 percent interval is within this fraction"),
    ("timing-processes", "int", 1, "time each candidate in this many (reference, candidate) worker-process pairs, "
                                   "sharing the budget; the interval then covers the spread between processes"),
    ("sample-ms", "float", 1.0, "calls shorter than this are batched, each on fresh inputs, so that one kernel-measure "
                                "sample lasts about this long (longer samples: a larger share of the wall time timed)"),
    ("call-sample-ms", "float", 0.0, "on a GPU, call-measure calls shorter than this are timed several to a sample "
                                     "(at most 16), each in a region of its own after the L2 flush, so that a "
                                     "sample's regions last about this long; 0: one call a sample"),
    ("eager-short", "bool", False, "time short kernels' batched calls eagerly, not as a replayed CUDA graph"),
    ("speedup", "string", "kernel", "the measure the reward is taken from: kernel (short calls replayed as CUDA "
                                    "graphs on both sides) or call (eager calls as a user makes them, launch "
                                    "included); both are recorded"),
    ("no-call-measure", "bool", False, "on a GPU, time the kernel measure only (the reward's by default; the call "
                                       "speedup stays empty): a quarter of the timing phase on an H100 (session 30)"),
    ("cache-dir", "string", None, "where builds, logs and source copies go (default: .cudal1_cache in rootdir)"),
    ("custom-kernels-only", "bool", False, "reject candidates whose GPU kernels are all library kernels (LIBRARY_ONLY)"),
    ("no-kernel-list", "bool", False, "skip listing each candidate's GPU kernels after timing: the profiler's first "
                                      "use in a process costs ~5.7 s on the H200 (records' kernels stay empty)"),
    ("peak-bandwidth", "float", None, "GB/s for the roofline floor (default: measured on the GPU; no floor on the CPU)"),
    ("remeasure-above", "float", 10.0, "re-measure speedups above this; reject if they differ by over 1.5x; the lower counts"),
    ("html", "string", None, "write a self-contained HTML report of this run's records to this path"),
    ("benchmark-tables", "bool", False, "also print pytest-benchmark's timing tables (before the verdicts)"),
    ("ray", "string", None, "judge on the Ray cluster at this address (host:port): one judge actor per GPU, "
                            "each isolated as a local judge; this process alone writes the ledger and the report"),
    ("allow-global", "string", None, "comma-separated algorithm-selection flags a candidate may set process-wide "
                                     "(cudnn.benchmark, cudnn.deterministic, cudnn.enabled, deterministic_algorithms); "
                                     "the record names those it set"),
    # pytest --cudal1-optimize (pytest_cudal1.optimize, policy.optimizer)
    ("optimize", "bool", False, "run the optimizer: rounds of generated candidates per selected task, judged, "
                                "the best kept in --cudal1-out"),
    ("policy", "string", "builtin", "generation backend spec: builtin, openai:URL?model=NAME, hf:PATH, vllm:PATH"),
    ("rounds", "int", 2, "optimizer rounds per task"),
    ("per-round", "int", 4, "candidates generated per round (k)"),
    ("turns", "int", 1, "turns per round: each later turn sends every answer back with its verdict (refinement)"),
    ("task-budget", "float", 30.0, "seconds per task after which the optimizer judges nothing more (0: no limit)"),
    ("out", "string", "cudal1-optimized", "where the best candidate per task goes (levelN/<task>/<name>.py + .json)"),
    ("resume", "bool", False, "continue earlier optimizer runs: rounds done are not redone, judged code not re-judged"),
    ("db", "string", None, "exemplar database (SQLite; default: <cache-dir>/exemplars.sqlite)"),
    ("exemplars", "int", 2, "earlier successes shown in each contrastive prompt (N)"),
    ("tau", "float", 2.0, "bucket-sampling temperature for exemplars (benchmarks/tau_sweep.py)"),
    ("import", "string", None, "comma-separated ledgers imported as exemplars at start (this judge's OK on this GPU "
     "only); entries that are not ledgers (a release JSONL, a candidates folder) are searched for the ledgers' code"),
    ("temperature", "float", 1.0, "sampling temperature of model backends"),
    ("max-tokens", "int", 8192, "most tokens a model backend may generate per answer"),
    ("train", "string", None, "with --cudal1-optimize: then train per this cudal1-train config (TOML/JSON) on what "
                              "the optimizer stored (its ledger and exemplar database; the optimized tasks)"),
]


def setting(config: pytest.Config, name: str) -> Any:
    """Command line first, then ini, then the default; converted to the setting's type."""
    ini = f"cudal1_{name.replace('-', '_')}"
    kind, default = next((k, d) for n, k, d, _ in SETTINGS if n == name)
    raw = config.getoption(ini)
    if raw is None:
        raw = config.getini(ini)
    if raw in (None, ""):
        return default
    if kind == "bool":
        return str(raw).lower() in ("1", "true", "yes", "on")
    try:
        return {"int": int, "float": float}.get(kind, str)(raw)
    except ValueError:
        raise pytest.UsageError(f"--cudal1-{name}: expected {kind}, got {raw!r}") from None


def allowed_globals(config: pytest.Config) -> frozenset[str]:
    """``--cudal1-allow-global`` as the settings' keys; a name that is not an algorithm-selection flag is refused."""
    from pytest_cudal1.allowances import parse_allowed

    try:
        return parse_allowed(setting(config, "allow-global"))
    except ValueError as exc:
        raise pytest.UsageError(f"--cudal1-allow-global: {exc}") from None


def custom_kernels_only(config: pytest.Config) -> bool:
    """``--cudal1-custom-kernels-only``, which needs the kernel listing ``--cudal1-no-kernel-list`` skips."""
    wanted = bool(setting(config, "custom-kernels-only"))
    if wanted and setting(config, "no-kernel-list"):
        raise pytest.UsageError("--cudal1-custom-kernels-only needs the kernel listing that "
                                "--cudal1-no-kernel-list skips")
    return wanted


def speedup_measure(config: pytest.Config) -> str:
    """``--cudal1-speedup``, checked against ``reward.MEASURES``."""
    from pytest_cudal1.reward import MEASURES

    measure = setting(config, "speedup")
    if measure not in MEASURES:
        raise pytest.UsageError(f"--cudal1-speedup: expected one of {', '.join(MEASURES)}, got {measure!r}")
    if measure == "call" and setting(config, "no-call-measure"):
        raise pytest.UsageError("--cudal1-speedup=call takes the reward from the call measure that "
                                "--cudal1-no-call-measure skips")
    return measure


def enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("cudal1") or setting(config, "tasks") or setting(config, "candidates")
                or setting(config, "optimize"))
