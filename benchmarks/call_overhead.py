"""The harness's own per-call overhead on the eager path (the ``call`` measure), next to a bare eager call.

For each module: a bare loop of eager calls in one process (host clock around each call, a device
synchronize after it on CUDA, and there CUDA events around it too, as Triton's ``do_bench`` takes them),
the same loop in a process with the workers' OpenMP setting, the harness's ``call`` sample run in this
process (refilled inputs, no worker, no pipe), then the same module judged against itself by real reference and candidate workers under the ``call``
measure (eager calls, each in a region of its own) and, for comparison, the ``kernel`` measure. The overhead is the
harness's recorded median per call less the bare loop's median.

    python benchmarks/call_overhead.py --out results.json [--pairs 100] [--calls 300]

Runs on the CPU and on a GPU (the script says which device it measured).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

from kernelbench.loaders import Task  # noqa: E402
from pytest_cudal1 import environment  # noqa: E402
from pytest_cudal1.timing import TimingConfig  # noqa: E402
from pytest_cudal1.workers import timed_loop  # noqa: E402
from pytest_cudal1.workers.timing_inputs import TimingInputs  # noqa: E402
from pytest_cudal1.workers.process import QUIET_CPU  # noqa: E402
from timing_quality import Pair, synthetic  # noqa: E402

# (name, input, forward): a launch-bound op, a small elementwise op and a small matmul.
MODULES = (("relu_4x8", "torch.randn(4, 8)", "torch.relu(x)"),
           ("add_64k", "torch.randn(1 << 16)", "x + 1.0"),
           ("matmul_256", "torch.randn(256, 256)", "x @ x"))


def bare(source: str, calls: int) -> dict[str, float | None]:
    """Median and minimum of ``calls`` eager calls of the task's ``Model`` in this process, in microseconds."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = types.ModuleType("bare_task")
    exec(compile(source, "bare_task", "exec"), module.__dict__)  # noqa: S102 - our own synthetic task
    model = module.Model().to(device).eval()
    inputs = [x.to(device) for x in module.get_inputs()]
    host, events = [], []
    with torch.no_grad():
        for _ in range(10):
            model(*inputs)
        for _ in range(calls):
            if device == "cuda":
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter_ns()
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize()
                host.append((time.perf_counter_ns() - t0) / 1e3)
                events.append(start.elapsed_time(end) * 1e3)
            else:
                t0 = time.perf_counter_ns()
                model(*inputs)
                host.append((time.perf_counter_ns() - t0) / 1e3)
    return {"host_median_us": statistics.median(host), "host_min_us": min(host),
            "event_median_us": statistics.median(events) if events else None}


def in_process(source: str, calls: int) -> dict[str, float]:
    """The harness's ``call`` sample (``timed_loop.timed_sample`` without the hold, fresh inputs refilled before
    each call, as the reference worker's ``fill`` does outside the request) in this process, with no worker or pipe
    around it: median and minimum per call, in microseconds."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = types.ModuleType("in_process_task")
    exec(compile(source, "in_process_task", "exec"), module.__dict__)  # noqa: S102 - our own synthetic task
    model = module.Model().to(device).eval()

    def call(inputs: list[Any]) -> Any:
        with torch.no_grad():
            return model(*inputs)
    loop = timed_loop.TimedLoop(call, TimingInputs([x.to(device) for x in module.get_inputs()], device))
    loop.place(1, 8)
    flush = timed_loop.Flusher(device)
    host = []
    for turn in range(calls):
        loop.inputs.fixed(turn, 1, first=loop.block(turn, 1, False))
        host.append(timed_loop.timed_sample(loop, turn, 1, device, flush, hold=False)[0]["host_ms"] * 1e3)
    return {"host_median_us": statistics.median(host), "host_min_us": min(host)}


def bare_as_workers_run(task: Task, calls: int) -> dict[str, Any]:
    """``bare`` in a fresh process with the workers' environment (``OMP_WAIT_POLICY=PASSIVE``: idle OpenMP
    threads sleep, so a parallel op wakes them)."""
    code = ("import json, sys; sys.path[:0] = sys.argv[1:3]; from call_overhead import bare; "
            "print(json.dumps(bare(open(sys.argv[3]).read(), int(sys.argv[4]))))")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(task.source)
    out = subprocess.run([sys.executable, "-c", code, str(ROOT), str(ROOT / "benchmarks"), f.name, str(calls)],
                         capture_output=True, text=True, timeout=600, env={**os.environ, **QUIET_CPU})
    Path(f.name).unlink()
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-500:]}


def judged(task: Task, forward: str, pairs: int, workdir: Path) -> dict[str, Any]:
    """The module against itself in real workers, under both measures: medians per call in microseconds."""
    candidate = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                 f"    def forward(self, x):\n        return {forward}\n")
    pair = Pair(task, candidate, workdir)
    out: dict[str, Any] = {}
    try:
        for measure in ("call", "kernel"):
            cfg = TimingConfig(min_pairs=pairs, max_pairs=pairs, budget_s=120.0, target_rel_ci=0.0, measure=measure)
            t = pair.measure(1, cfg)
            out[measure] = {"reference_median_us": t.reference.median_ms * 1e3,
                            "candidate_median_us": t.candidate.median_ms * 1e3,
                            "calls_per_sample": t.candidate.calls_per_sample, "speedup": t.speedup,
                            "speedup_ci": list(t.speedup_ci), "pairs": t.pairs, "method": t.method}
    finally:
        pair.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--only", default="", help="comma-separated module names (default: all)")
    args = parser.parse_args()
    wanted = {m for m in args.only.split(",") if m}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make_input, forward in [m for m in MODULES if not wanted or m[0] in wanted]:
            task = synthetic(name, make_input, forward)
            row: dict[str, Any] = {"module": name, "input": make_input, "forward": forward,
                                   "bare": bare(task.source, args.calls),
                                   "bare_omp_passive": bare_as_workers_run(task, args.calls),
                                   "harness_in_process": in_process(task.source, args.calls)}
            row.update(judged(task, forward, args.pairs, Path(tmp) / name))
            harness = statistics.median([row["call"]["reference_median_us"], row["call"]["candidate_median_us"]])
            row["call_overhead_us"] = harness - row["bare"]["host_median_us"]
            row["call_over_bare"] = harness / row["bare"]["host_median_us"]
            results.append(row)
            print(f"{name}: bare {row['bare']['host_median_us']:.2f} us "
                  f"(OMP passive {row['bare_omp_passive'].get('host_median_us', float('nan')):.2f} us), "
                  f"in-process sample {row['harness_in_process']['host_median_us']:.2f} us, harness call {harness:.2f} us "
                  f"(+{row['call_overhead_us']:.2f} us), kernel {row['kernel']['candidate_median_us']:.2f} us",
                  flush=True)
    facts = environment.describe()
    args.out.write_text(json.dumps({"device": facts.get("gpu") or "cpu", "environment": facts,
                                    "load_average_after": os.getloadavg(), "cpu_count": os.cpu_count(),
                                    "torch_threads": torch.get_num_threads(), "pairs": args.pairs,
                                    "bare_calls": args.calls, "modules": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
