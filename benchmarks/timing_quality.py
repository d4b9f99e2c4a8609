"""How good are the harness's numbers? Precision, accuracy, side streams, overhead, end-to-end cost.

Run on a GPU machine (it also runs on the CPU, where the profiler comparison
and the side-stream case are skipped):

    python benchmarks/timing_quality.py --tasks PATH/problems.jsonl --out results.json

- precision: one kernel timed 10 times in one run (10 measurements on one pair
  of workers, or with ``--judged`` 10 judgments with fresh candidate workers as
  a session makes them); spread of the 10 medians,
  (max - min) / median, for a ~18 us and a ~127 us elementwise kernel and a
  ~2.8 ms matmul (``PRECISION_KERNELS``), with short-kernel calls replayed as a CUDA graph
  (the default) and eagerly, beside a bare loop; each judgment's speedup of the
  kernel over itself and its interval (which should hold 1);
- accuracy: the harness's median against the summed kernel durations the torch
  profiler reports for the same call (cold L2 in both), several level-1 tasks;
- side stream: a matmul launched on a side stream, never joined, timed by the
  harness (device-wide sync) and by current-stream events alone (the fake);
- overhead: a one-element op, the smallest time a timed call can report, and
  the controller's wall clock per sample;
- end to end: judging one load_inline candidate with a cold and a warm build cache.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbench.loaders import Task, load_tasks  # noqa: E402
from pytest_cudal1 import environment  # noqa: E402
from pytest_cudal1.builds import BuildPool  # noqa: E402
from pytest_cudal1.candidates import Candidate, reference_candidate  # noqa: E402
from pytest_cudal1.judge import Judge, JudgeConfig  # noqa: E402
from pytest_cudal1.records import PairedTiming  # noqa: E402
from pytest_cudal1.timing import TimingConfig, measure_pairs  # noqa: E402
from pytest_cudal1.workers.process import WorkerProcess  # noqa: E402

ACCURACY_TASKS = ("1_Square_matrix_multiplication_", "6_Matmul_with_large_K_dimension_", "40_LayerNorm",
                  "50_conv_standard_2D__square_input__square_kernel", "88_MinGPTNewGelu", "95_CrossEntropyLoss")


def synthetic(name: str, make_input: str, forward: str = "x + 1.0") -> Task:
    """A one-kernel task, ``forward`` on the input ``make_input`` builds (ours, not KernelBench's)."""
    src = textwrap.dedent(f"""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return {forward}

        def get_inputs():
            return [{make_input}]

        def get_init_inputs():
            return []
        """)
    return Task(None, None, name, src, f"<synthetic {name}>")


# Precision's kernels, one kernel each, on an H200: ~18 us and ~127 us (GPU-bound elementwise, replayed as
# graphs of many calls) and, GPU only, a ~2.8 ms fp32 matmul (one eager call a sample; small inputs, so ten
# judgments do not spend their time piping gigabytes between workers).
PRECISION_KERNELS = (("elementwise_small", "torch.randn(1 << 23)", "x + 1.0", False),
                     ("elementwise_large", "torch.randn(1 << 26)", "x + 1.0", False),
                     ("matmul_eager", "torch.randn(4096, 4096)", "x @ x", True))


SIDE_STREAM = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = torch.cuda.Stream()

        def forward(self, A, B):
            self.s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.s):
                out = torch.matmul(A, B)
            return out
    """)


class Pair:
    """A reference worker and a candidate worker, loaded and ready to time."""

    def __init__(self, task: Task, candidate_source: str, workdir: Path, seed: int = 1) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / f"cand_{abs(hash(candidate_source))}.py"
        path.write_text(candidate_source)
        self.ref = WorkerProcess("reference", workdir / "ref.log")
        self.cand = WorkerProcess("candidate", workdir / "cand.log")
        init = self.ref.request("load", {"source": task.source, "origin": task.origin, "seed": seed}, 600)["init_inputs"]
        self.cand.request("load", {"path": str(path), "module_name": f"bench_cand_{abs(hash(candidate_source))}"}, 600)
        self.cand.request("build", {"init_inputs": init, "seed": seed}, 600)
        self.ref.request("prepare_timing", {"seed": seed}, 600)
        base = self.ref.request("timing_base", None, 600, raw=True)
        self.cand.request("prepare_timing", {"inputs": base}, 600)

    def measure(self, seed: int, cfg: TimingConfig) -> PairedTiming:
        return measure_pairs(self.ref, self.cand, cfg, random.Random(seed), lambda: None)

    def close(self) -> None:
        self.ref.close()
        self.cand.close()


def precision(workdir: Path, pairs: int = 30, eager_too: bool = True, judged: bool = False, processes: int = 1,
              saved: Callable[[list[dict[str, Any]]], None] = lambda rows: None,
              kernels: set[str] | None = None) -> list[dict[str, Any]]:
    """Each kernel timed 10 times in one run: 10 paired measurements on one pair of workers or, ``judged``,
    10 judgments as a session makes them (the real ``Judge``: fresh candidate workers, ``processes`` pairs
    each, the task's reference workers kept); short-kernel calls replayed as a CUDA graph (the default) and
    eagerly; beside it the same kernel in a bare loop with no harness (the machine's own spread). ``saved``
    gets the rows after each measurement (a run cut short keeps them); ``kernels`` picks some by name."""
    rows: list[dict[str, Any]] = []
    gpu = environment.has_gpu()
    for name, make_input, forward, gpu_only in PRECISION_KERNELS:
        if (gpu_only and not gpu) or (kernels and name not in kernels):
            continue
        task = synthetic(name, make_input, forward)
        for graphs in ((True, False) if eager_too and not gpu_only else (True,)) if gpu else (False,):
            timing = TimingConfig(budget_s=3.0 * pairs / 30, min_pairs=pairs, max_pairs=max(200, pairs), graphs=graphs)
            runs: list[dict[str, Any]] = []
            rows.append({"kernel": name, "input": make_input, "forward": forward, "graphs": graphs, "judged": judged,
                         "processes": processes if judged else 1, "runs": runs})
            measured = _judged(task, timing, workdir / name, processes) if judged else _paired(task, timing, workdir / name)
            for i, (t, phases) in enumerate(measured):
                runs.append({"median_ms": t.candidate.median_ms, "iqr_ms": t.candidate.iqr_ms,
                             "min_ms": t.candidate.min_ms, "n": t.candidate.n, "tail_ms": t.candidate.tail_ms,
                             "reference_median_ms": t.reference.median_ms, "reference_tail_ms": t.reference.tail_ms,
                             "speedup": t.speedup, "speedup_ci": t.speedup_ci, "method": t.method,
                             "warnings": t.warnings, "gpu_state": t.gpu_state, "phase_s": phases,
                             "ended_at_unix": time.time(),
                             "samples_ms": t.candidate.samples_ms, "reference_samples_ms": t.reference.samples_ms})
                print(f"  {name} {i}: {t.candidate.median_ms:.5f} ms (tail {t.candidate.tail_ms:.5f}), "
                      f"reference {t.reference.median_ms:.5f} ms (tail {t.reference.tail_ms:.5f}), "
                      f"speedup {t.speedup:.4f} [{t.speedup_ci[0]:.4f}, {t.speedup_ci[1]:.4f}] {phases}", flush=True)
                saved(rows)
            cand = [r["median_ms"] for r in runs]
            ref = [r["reference_median_ms"] for r in runs]
            rows[-1].update(median_ms=statistics.median(cand), medians_ms=cand, spread=spread(cand),
                            reference_spread=spread(ref), calls_per_sample=t.candidate.calls_per_sample,
                            speedups=[r["speedup"] for r in runs],
                            intervals_holding_1=sum(r["speedup_ci"][0] <= 1.0 <= r["speedup_ci"][1] for r in runs))
            print(f"{name:<18} graphs={graphs!s:<5} judged={judged} median {rows[-1]['median_ms']:.5f} ms, "
                  f"spread {100 * rows[-1]['spread']:.2f}% (reference side {100 * rows[-1]['reference_spread']:.2f}%), "
                  f"self-speedups {min(rows[-1]['speedups']):.3f}-{max(rows[-1]['speedups']):.3f}, "
                  f"{rows[-1]['intervals_holding_1']}/10 intervals hold 1", flush=True)
        if gpu:
            rows[-1]["profiler_kernel_ms"] = profiler_kernel_ms(task, workdir)[0]
            rows[-1]["bare_loop"] = bare_loop(make_input, forward, t.candidate.calls_per_sample)
            saved(rows)
    return rows


def _paired(task: Task, timing: TimingConfig, workdir: Path) -> Iterator[tuple[PairedTiming, dict[str, float]]]:
    """10 measurements on one pair of workers."""
    pair = Pair(task, reference_candidate(task).source, workdir)
    try:
        for i in range(10):
            yield pair.measure(i, timing), {}
    finally:
        pair.close()


def _judged(task: Task, timing: TimingConfig, workdir: Path,
            processes: int) -> Iterator[tuple[PairedTiming, dict[str, float]]]:
    """10 judgments of the task's own code, as consecutive items of one session."""
    candidate = reference_candidate(task)
    cfg = JudgeConfig(seed=1, workdir=workdir, trials=1, timing=timing, timing_processes=processes)
    judge = Judge(cfg, BuildPool(workdir / "builds", 900, None), environment.has_gpu())
    try:
        for i in range(10):
            record = judge.judge(task, candidate, upcoming=[(task, candidate)] if i < 9 else [])
            if record.timing is None:
                raise RuntimeError(f"{task.name}: {record.verdict.reason.value} {record.verdict.message}")
            yield record.timing, record.phase_s
    finally:
        judge.close()


def spread(medians: list[float]) -> float:
    """(max - min) / median."""
    return (max(medians) - min(medians)) / statistics.median(medians)


BARE_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    make_input, forward, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    x = eval(make_input).cuda()
    f = eval("lambda x: " + forward)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    for _ in range(3):
        f(x)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        outs = [f(x) for _ in range(calls)]
    def sample(replay):
        flush.random_(); torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000); s.record()
        if replay:
            graph.replay()
        else:
            for _ in range(calls):
                f(x)
        e.record(); e.synchronize()
        return s.elapsed_time(e) / calls
    result = {}
    for mode in ("eager", "graph"):
        medians = []
        for _ in range(10):
            ts = sorted(sample(mode == "graph") for _ in range(30))
            medians.append(ts[15])
        result[mode] = {"medians_ms": medians, "spread": (max(medians) - min(medians)) / sorted(medians)[5]}
    print(json.dumps(result))
    """)


def bare_loop(make_input: str, forward: str, calls: int) -> dict[str, Any]:
    """The kernel timed with no harness: 10 runs of 30 samples, ``calls`` calls per sample, eager and graphed."""
    out = subprocess.run([sys.executable, "-c", BARE_SCRIPT, make_input, forward, str(calls)], capture_output=True,
                         text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-500:]}


PROFILE_SCRIPT = textwrap.dedent("""
    import json, sys, types, torch
    from torch.profiler import ProfilerActivity, profile
    src = open(sys.argv[1]).read()
    mod = types.ModuleType("t"); exec(compile(src, "task", "exec"), mod.__dict__)
    torch.manual_seed(1)
    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        totals = []
        for _ in range(20):
            flush.random_(); torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                model(*inputs); torch.cuda.synchronize()
            totals.append(sum(e.device_time for e in prof.events() if e.device_type.name == "CUDA") / 1e3)
    totals.sort()
    print(json.dumps({"kernel_ms": totals[len(totals) // 2]}))
    """)


def profiler_kernel_ms(task: Task, workdir: Path) -> tuple[float | None, str | None]:
    """Median over 20 cold-L2 calls of the summed CUDA kernel durations the torch profiler reports."""
    script = workdir / "profile_task.py"
    script.write_text(PROFILE_SCRIPT)
    src = workdir / f"{task.name}.py"
    src.write_text(task.source)
    out = subprocess.run([sys.executable, str(script), str(src)], capture_output=True, text=True, timeout=600)
    if out.returncode:
        return None, out.stderr[-500:]
    return json.loads(out.stdout.strip().splitlines()[-1])["kernel_ms"], None


def accuracy(tasks: list[Task], workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for task in tasks:
        pair = Pair(task, reference_candidate(task).source, workdir / task.name)
        t = pair.measure(7, TimingConfig(budget_s=5.0, min_pairs=20))
        pair.close()
        kernel_ms, error = profiler_kernel_ms(task, workdir)
        ours = t.reference.median_ms
        rows.append({"task": task.id, "harness_ms": ours, "harness_tail_ms": t.reference.tail_ms,
                     "profiler_kernel_ms": kernel_ms,
                     "rel_diff": (ours - kernel_ms) / kernel_ms if kernel_ms else None,
                     "calls_per_sample": t.reference.calls_per_sample, "gpu_state": t.gpu_state,
                     "profiler_error": error})
    return rows


def side_stream(task: Task, workdir: Path) -> dict[str, Any]:
    pair = Pair(task, SIDE_STREAM, workdir / "side_stream")
    t = pair.measure(3, TimingConfig(budget_s=5.0))
    pair.close()
    naive = subprocess.run([sys.executable, "-c", NAIVE_EVENTS, SIDE_STREAM, task.source], capture_output=True,
                           text=True, timeout=600)
    fake = json.loads(naive.stdout.strip().splitlines()[-1]) if naive.returncode == 0 else {"error": naive.stderr[-500:]}
    return {"task": task.id, "harness_reference_ms": t.reference.median_ms, "harness_side_stream_ms": t.candidate.median_ms,
            "harness_speedup": t.speedup, "current_stream_events": fake}


NAIVE_EVENTS = textwrap.dedent("""
    import json, sys, types, torch
    cand = types.ModuleType("c"); exec(sys.argv[1], cand.__dict__)
    task = types.ModuleType("t"); exec(sys.argv[2], task.__dict__)
    inputs = [x.cuda() for x in task.get_inputs()]
    model, ref = cand.ModelNew().cuda(), task.Model().cuda()
    def events(fn):
        for _ in range(3): fn(*inputs)
        torch.cuda.synchronize(); ts = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); fn(*inputs); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
            torch.cuda.synchronize()
        return sorted(ts)[5]
    with torch.no_grad():
        r, c = events(ref), events(model)
    print(json.dumps({"reference_ms": r, "side_stream_ms": c, "fake_speedup": r / c}))
    """)


def overhead(workdir: Path) -> dict[str, Any]:
    task = synthetic("one_element", "torch.randn(1)")
    pair = Pair(task, reference_candidate(task).source, workdir / "overhead")
    walls = []
    pair.cand.request("place", {"calls": 1, "most": 1}, 60)  # one placement: the controller's set-up, in short
    for i in range(30):
        t0 = time.perf_counter()
        pair.cand.request("time", {"turn": i, "calls": 1}, 60)
        walls.append((time.perf_counter() - t0) * 1e3)
    t = pair.measure(5, TimingConfig(budget_s=3.0, short_ms=0.0))
    pair.close()
    return {"timed_call_ms": t.candidate.median_ms, "controller_wall_ms_per_sample": statistics.median(walls),
            "clock": t.candidate.clock}


def end_to_end(workdir: Path) -> dict[str, Any]:
    tasks, _ = load_tasks(ROOT / "kernelbench" / "tasks" / "level1" / "1_ReLU.py")
    path = ROOT / "kernelbench" / "candidates" / "level1" / "1_ReLU" / ("cuda_inline.py" if environment.has_gpu() else "cpp.py")
    cand = Candidate(path.stem, path.read_text(), str(path), 1, 1, path=str(path))
    cache = workdir / "e2e_cache"
    rows = {}
    for label in ("cold_cache", "warm_cache"):
        cfg = JudgeConfig(seed=1, workdir=cache, trials=5, timing=TimingConfig(budget_s=2.0))
        judge = Judge(cfg, BuildPool(cache, 900, environment.gpu_facts().get("compute_capability")), environment.has_gpu())
        t0 = time.perf_counter()
        rec = judge.judge(tasks[0], cand)
        rows[label] = {"wall_s": time.perf_counter() - t0, "compile_s": rec.compile_s, "verdict": rec.verdict.reason.value,
                       "speedup": rec.speedup}
        judge.close()
    return {"candidate": str(path.relative_to(ROOT)), **rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, help="KernelBench problems.jsonl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="precision,accuracy,side_stream,overhead,end_to_end",
                    help="comma-separated sections to run")
    ap.add_argument("--precision-pairs", type=int, default=30, help="fewest pairs in each precision run")
    ap.add_argument("--graphs-only", action="store_true", help="precision: skip the eager comparison")
    ap.add_argument("--judged", action="store_true", help="precision: 10 judgments (fresh workers), not 10 measurements")
    ap.add_argument("--processes", type=int, default=1, help="precision --judged: worker-process pairs per judgment")
    ap.add_argument("--kernels", default="", help="precision: comma-separated kernel names (default all)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    gpu = environment.has_gpu()
    tasks, _ = load_tasks(args.tasks)
    by_name = {t.name: t for t in tasks if t.level == 1}
    work = Path(tempfile.mkdtemp(prefix="cudal1-timing-"))
    result: dict[str, Any] = {"environment": environment.describe(), "date": time.strftime("%Y-%m-%d")}

    def save(name: str, value: Any) -> None:
        result[name] = value
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))

    kernels = set(filter(None, args.kernels.split(",")))
    for name, fn in (
        ("precision", lambda: precision(work, args.precision_pairs, not args.graphs_only, args.judged, args.processes,
                                        lambda rows: save("precision", rows), kernels)),
        ("accuracy", lambda: accuracy([by_name[n] for n in ACCURACY_TASKS if n in by_name], work) if gpu else []),
        ("side_stream", lambda: side_stream(by_name["1_Square_matrix_multiplication_"], work) if gpu else {}),
        ("overhead", lambda: overhead(work)),
        ("end_to_end", lambda: end_to_end(work)),
    ):
        if name not in only:
            continue
        t0 = time.perf_counter()
        try:
            save(name, fn())
        except Exception as exc:  # noqa: BLE001 - one broken section must not hide the others
            save(name, {"error": f"{type(exc).__name__}: {exc}"})
        print(f"[{name}] {time.perf_counter() - t0:.1f} s", flush=True)
    print(json.dumps({k: v for k, v in result.items() if k != "environment"}, indent=1, default=str)[:6000])


if __name__ == "__main__":
    main()
