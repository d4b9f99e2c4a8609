"""Which part of a harness sample's preparation widens the spread of a short kernel's time?

A bare loop (L2 flush, hold kernel, events around one CUDA-graph replay of ``calls``
``x + 1`` kernels) has run medians within 0.1%; the harness's graph replays of the same
kernel spread 2-3.5%, with a stable lower decile and a heavy upper tail. This script adds
the harness's steps to the bare loop one at a time, each as 10 runs of 30 samples:

- ``bare``: flush, hold, replay;
- ``refill``: the ``calls`` input sets refilled with fresh values before the flush (as
  ``runtime.TimingInputs`` does);
- ``refill_reset_l2``: and the persisting-L2 reset (``guards.reset_persisting_l2``);
- ``refill_nvml``: and an NVML reading between samples (``environment.gpu_state``);
- ``refill_partner``: and a second process doing the same in lockstep, as the other
  worker of a pair does;
- ``realloc``: refill, with new buffers and a new graph for every run, as the harness's
  re-capture per measurement gets (where the buffers land in memory may set the speed);
- ``refill_tail``: refill, the partner in lockstep, and each sample's own tail past an idle round trip added to it,
  as ``runtime.timed_sample`` did before the controller added the run's median instead
  (a host that wakes late from the synchronize then reads as a slow sample).

    python benchmarks/precision_probe.py --out probe.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = {"elementwise_small": (1 << 23, 41), "elementwise_large": (1 << 26, 8)}
VARIANTS = ("bare", "refill", "refill_reset_l2", "refill_nvml", "refill_partner", "realloc", "refill_tail")


class Loop:
    """``calls`` input sets, a graph of ``x + 1`` over them, and one timed sample."""

    def __init__(self, numel: int, calls: int) -> None:
        import torch

        self.torch = torch
        self.base = torch.randn(numel, device="cuda")
        self.sets = [self.base.clone() for _ in range(calls)]
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
        for x in self.sets:
            x + 1.0
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outs = [x + 1.0 for x in self.sets]
        self.seed = 0
        from pytest_cudal1.workers import runtime

        self.runtime = runtime
        self.idle_tail = runtime.idle_tail_ms("cuda")

    def refill(self) -> None:
        torch = self.torch
        for i, target in enumerate(self.sets):
            gen = torch.Generator(device="cuda")
            gen.manual_seed(self.seed * 1009 + i)
            u = torch.rand(self.base.shape, generator=gen, device="cuda")
            torch.mul(self.base, u + 0.5, out=target)
        self.seed += 1

    def sample(self, variant: str) -> float:
        torch = self.torch
        if variant != "bare":
            self.refill()
        if variant == "refill_reset_l2":
            from pytest_cudal1.workers import guards

            guards.reset_persisting_l2()
        self.flush.random_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)
        start.record()
        self.graph.replay()
        end.record()
        if variant == "refill_tail":
            runtime, tail = self.runtime, torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            tail.record()
            tail.synchronize()
            allowance = max(self.idle_tail, min(runtime._round_trip_ms("cuda"),
                                                2 * self.idle_tail + runtime.TAIL_SLACK_MS))
            return (start.elapsed_time(end) + max(0.0, end.elapsed_time(tail) - allowance)) / len(self.sets)
        end.synchronize()
        if variant == "refill_nvml":
            from pytest_cudal1 import environment

            environment.gpu_state()
        return start.elapsed_time(end) / len(self.sets)


def partner(numel: int, calls: int, conn: Any) -> None:
    """The other worker of a pair: one sample of its own each time it is asked."""
    loop = Loop(numel, calls)
    while conn.recv():
        conn.send(loop.sample("refill"))


def probe(numel: int, calls: int, variants: list[str]) -> dict[str, Any]:
    loop = Loop(numel, calls)
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=partner, args=(numel, calls, theirs))
    proc.start()
    result = {}
    for variant in variants:
        medians, p10s = [], []
        for _ in range(10):
            if variant == "realloc":
                loop = Loop(numel, calls)
            samples = []
            for _ in range(30):
                if variant in ("refill_partner", "refill_tail"):
                    ours.send(True)
                    ours.recv()
                samples.append(loop.sample("refill" if variant in ("refill_partner", "realloc") else variant))
            samples.sort()
            medians.append(statistics.median(samples))
            p10s.append(samples[3])
        med = statistics.median(medians)
        result[variant] = {"spread": (max(medians) - min(medians)) / med, "medians_ms": medians, "p10_ms": p10s}
        print(f"{numel:>9} {variant:<16} spread {100 * result[variant]['spread']:.2f}%  median {med:.5f} ms",
              flush=True)
    ours.send(False)
    proc.join(30)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    args = ap.parse_args()
    variants = args.variants.split(",")
    out = {name: {"numel": numel, "calls": calls, **probe(numel, calls, variants)} for name, (numel, calls) in KERNELS.items()}
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
