"""One candidate judged by a peer harness (KernelBench's or CUDA-L1's), in its own process.

``benchmarks/throughput.py`` starts this file once per (harness, candidate) with a timeout, so a crash or
hang is that harness's failure on that candidate, never the benchmark's:

    python benchmarks/throughput_anchors.py --harness kernelbench --anchors DIR --job JOB.json --result OUT.json

The anchors are loaded from ``--anchors`` by path (never from the package or the tests). Imports the
upstream code makes that this machine lacks (``pydantic``, ``litellm``, ``dotenv``, ``openai``; none is
used when judging) come from tiny stand-in modules that ``write_standins`` puts in a folder the parent
passes as ``--standins``, first on ``sys.path``. The result is one JSON object in a common form: ``correct``,
``speedup`` (the harness's own: reference time over candidate time), ``verdict``, ``timed_s`` (seconds the
harness spent inside its timed regions, both models), ``eval_s`` (the harness's call, without this
process's start) and ``detail`` (the harness's raw answer).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

# The stand-ins: just enough of each module for the upstream files to import (and, for pydantic,
# for KernelBench's KernelExecResult to be built, read and written); none is called while judging.
STANDINS = {
    "pydantic": '''\
"""Stand-in for pydantic.BaseModel (written by benchmarks/throughput_anchors.py): fields with defaults."""
import copy


class BaseModel:
    def __init__(self, **values):
        for cls in reversed(type(self).__mro__):
            for name in getattr(cls, "__annotations__", {}):
                if hasattr(cls, name):
                    setattr(self, name, copy.deepcopy(getattr(cls, name)))
        for name, value in values.items():
            setattr(self, name, value)

    def model_dump(self):
        return dict(vars(self))

    dict = model_dump
''',
    "litellm": '''\
"""Stand-in for litellm (written by benchmarks/throughput_anchors.py): judging never calls a model."""


def completion(*args, **kwargs):
    raise RuntimeError("litellm stand-in: no model calls in a benchmark")
''',
    "dotenv": '''\
"""Stand-in for python-dotenv (written by benchmarks/throughput_anchors.py)."""


def load_dotenv(*args, **kwargs):
    return False
''',
    "openai": '''\
"""Stand-in for openai (written by benchmarks/throughput_anchors.py): judging never calls a model."""


class OpenAI:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("openai stand-in: no model calls in a benchmark")
''',
}


def missing_modules() -> list[str]:
    """The stand-in names this interpreter cannot import (the ones the anchors need stand-ins for)."""
    return [name for name in STANDINS if importlib.util.find_spec(name) is None]


def write_standins(folder: Path, names: list[str]) -> None:
    """Write the stand-in modules ``names`` into ``folder`` (put it first on the anchor process's path)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text(STANDINS[name], encoding="utf-8")


def judge_kernelbench(anchors: Path, ref_code: str, custom_code: str) -> dict[str, Any]:
    """KernelBench's ``eval_kernel_against_ref`` with its defaults; it times the reference too (its
    excessive-speedup check is on by default), so the speedup is its own ``ref_runtime / runtime``."""
    sys.path.insert(0, str(anchors))
    from kernelbench_upstream.eval import eval_kernel_against_ref

    trials = 100
    result = eval_kernel_against_ref(ref_code, custom_code, num_correct_trials=5, num_perf_trials=trials,
                                     measure_performance=True, timing_method="cuda_event", device=0,
                                     backend="cuda")
    correct = bool(result.compiled and result.correctness)
    timed = sum(stats.get("mean", 0.0) * stats.get("num_trials", 0)
                for stats in (result.runtime_stats, result.ref_runtime_stats)) / 1000.0
    timed_both = correct and result.runtime > 0 and result.ref_runtime > 0
    speedup = result.ref_runtime / result.runtime if timed_both else None
    verdict = "OK" if correct else "INCORRECT" if result.compiled else "COMPILE_FAILED"
    detail = {"compiled": result.compiled, "correctness": result.correctness, "runtime_us": result.runtime,
              "ref_runtime_us": result.ref_runtime, "runtime_stats": result.runtime_stats,
              "ref_runtime_stats": result.ref_runtime_stats,
              "metadata": {k: str(v)[:500] for k, v in result.metadata.items()}}
    return {"correct": correct, "speedup": speedup, "verdict": verdict, "timed_s": timed, "detail": detail}


def judge_cudal1(anchors: Path, ref_code: str, custom_code: str, log_path: Path) -> dict[str, Any]:
    """CUDA-L1's ``eval_pipeline`` with its published defaults; verdict and score from its log's last line."""
    sys.path.insert(0, str(anchors / "cudal1_upstream"))
    from eval_cuda import eval_pipeline

    eval_pipeline(warmup_src=ref_code, original_model_src=ref_code, custom_model_src=custom_code,
                  num_correct_trials=10, num_perf_trials=10, global_n_trials=7, gpu_index=0,
                  log_path=str(log_path), max_time=600, original_eval_setup="vanilla")
    last = json.loads(log_path.read_text(encoding="utf-8").splitlines()[-1])
    correct = not last.get("error", True) and last.get("score") is not None
    verdict = "OK" if correct else f"FAILED: {str(last.get('error_msg', 'no score'))[:120]}"
    return {"correct": correct, "speedup": last["score"] if correct else None, "verdict": verdict,
            "timed_s": float(last.get("total_gpu_execution_time") or 0.0),
            "detail": {k: v for k, v in last.items() if k != "code"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", choices=("kernelbench", "cudal1"), required=True)
    parser.add_argument("--anchors", type=Path, required=True)
    parser.add_argument("--job", type=Path, required=True, help="JSON with ref_code and custom_code")
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--standins", type=Path, help="folder of stand-in modules, first on sys.path")
    args = parser.parse_args(argv)
    if args.standins:
        sys.path.insert(0, str(args.standins))
    job = json.loads(args.job.read_text(encoding="utf-8"))
    start = time.perf_counter()
    if args.harness == "kernelbench":
        result = judge_kernelbench(args.anchors, job["ref_code"], job["custom_code"])
    else:
        result = judge_cudal1(args.anchors, job["ref_code"], job["custom_code"], args.result.with_suffix(".log"))
    result["eval_s"] = time.perf_counter() - start
    args.result.write_text(json.dumps(result, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
