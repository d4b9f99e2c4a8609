"""Which part of a harness sample's preparation widens the spread of a short kernel's time?

A bare loop (L2 flush, hold kernel, events around one CUDA-graph replay of ``calls``
``x + 1`` kernels) has run medians within 0.1%; the harness's graph replays of the same
kernel spread 2-3.5%, with a stable lower decile and a heavy upper tail. This script adds
the harness's steps to the bare loop one at a time, each as 10 runs of 30 samples:

- ``bare``: flush, hold, replay;
- ``refill``: the ``calls`` input sets refilled with fresh values before the flush (as
  ``timing_inputs.TimingInputs`` does);
- ``refill_reset_l2``: and the persisting-L2 reset (``process_state.reset_persisting_l2``);
- ``refill_nvml``: and an NVML reading between samples (``environment.gpu_state``);
- ``refill_partner``: and a second process doing the same in lockstep, as the other
  worker of a pair does;
- ``realloc``: refill, with new buffers and a new graph for every run, as the harness's
  re-capture per measurement gets (where the buffers land in memory may set the speed);
- ``refill_tail``: refill, the partner in lockstep, and the sample's tail timed as it was up to session 5: an
  event recorded after the device-wide synchronize, past an idle event round trip;
- ``refill_spin``: the same with the tail as ``timed_loop.timed_sample`` takes it now: the host polls the end
  event, then times the synchronize on its own clock, past an idle synchronize and ``SPIN_SLACK_MS``
  (not ``timed_loop.HONEST_TAIL_MS``, which was set from these tails).

For the two tail variants each run is reported both ways: every sample with its own tail
(``spread``) and with the run's median tail added to every sample, as the controller counts it
(``spread_run_median_tail``), beside the tails themselves (an honest kernel's should be 0).

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
VARIANTS = ("bare", "refill", "refill_reset_l2", "refill_nvml", "refill_partner", "realloc", "refill_tail",
            "refill_spin")
TAILS = ("refill_tail", "refill_spin")
SPIN_SLACK_MS = 0.01  # ``refill_spin``'s allowance over an idle synchronize in the run of session 6


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
        from pytest_cudal1.workers import timed_loop

        self.timed_loop = timed_loop
        self.idle_sync = timed_loop.idle_sync_ms("cuda")
        trips = sorted(self._round_trip_ms() for _ in range(21))
        self.idle_trip = trips[15]

    def _round_trip_ms(self) -> float:
        """The old idle allowance: an event, a device-wide synchronize, another event."""
        torch = self.torch
        first, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        first.record()
        torch.cuda.synchronize()
        after.record()
        after.synchronize()
        return first.elapsed_time(after)

    def refill(self) -> None:
        torch = self.torch
        for i, target in enumerate(self.sets):
            gen = torch.Generator(device="cuda")
            gen.manual_seed(self.seed * 1009 + i)
            u = torch.rand(self.base.shape, generator=gen, device="cuda")
            torch.mul(self.base, u + 0.5, out=target)
        self.seed += 1

    def sample(self, variant: str) -> tuple[float, float]:
        """(ms per call, escaped ms of the sample: 0 unless a tail variant)."""
        torch = self.torch
        if variant != "bare":
            self.refill()
        if variant == "refill_reset_l2":
            from pytest_cudal1.workers import process_state

            process_state.reset_persisting_l2()
        self.flush.random_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)
        start.record()
        self.graph.replay()
        end.record()
        escaped = 0.0
        if variant == "refill_tail":
            tail = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            tail.record()
            tail.synchronize()
            allowance = max(self.idle_trip, min(self._round_trip_ms(), 2 * self.idle_trip + 0.05))
            escaped = max(0.0, end.elapsed_time(tail) - allowance)
        elif variant == "refill_spin":
            timed_loop = self.timed_loop
            timed_loop._spin_until(end)
            t0 = timed_loop._perf_counter_ns()
            torch.cuda.synchronize()
            escaped = max(0.0, (timed_loop._perf_counter_ns() - t0) / 1e6 - self.idle_sync - SPIN_SLACK_MS)
        else:
            end.synchronize()
        if variant == "refill_nvml":
            from pytest_cudal1 import environment

            environment.gpu_state()
        return start.elapsed_time(end) / len(self.sets), escaped


def partner(numel: int, calls: int, conn: Any) -> None:
    """The other worker of a pair: one sample of its own each time it is asked."""
    loop = Loop(numel, calls)
    while conn.recv():
        conn.send(loop.sample("refill")[0])


def probe(numel: int, calls: int, variants: list[str]) -> dict[str, Any]:
    loop = Loop(numel, calls)
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=partner, args=(numel, calls, theirs))
    proc.start()
    result = {}
    for variant in variants:
        medians, p10s, run_median_tail, tails = [], [], [], []
        for _ in range(10):
            if variant == "realloc":
                loop = Loop(numel, calls)
            samples = []
            for _ in range(30):
                if variant in ("refill_partner",) + TAILS:
                    ours.send(True)
                    ours.recv()
                samples.append(loop.sample("refill" if variant in ("refill_partner", "realloc") else variant))
            own = sorted(ms + escaped / calls for ms, escaped in samples)
            medians.append(statistics.median(own))
            p10s.append(own[3])
            tail = statistics.median(escaped for _, escaped in samples)
            run_median_tail.append(statistics.median(ms for ms, _ in samples) + tail / calls)
            tails.append(tail)
        med = statistics.median(medians)
        result[variant] = {"spread": (max(medians) - min(medians)) / med, "medians_ms": medians, "p10_ms": p10s}
        line = f"{numel:>9} {variant:<16} spread {100 * result[variant]['spread']:.2f}%  median {med:.5f} ms"
        if variant in TAILS:
            result[variant].update(
                spread_run_median_tail=(max(run_median_tail) - min(run_median_tail)) / statistics.median(run_median_tail),
                medians_run_median_tail_ms=run_median_tail, run_median_tails_ms=tails)
            line += (f"  with the run's median tail {100 * result[variant]['spread_run_median_tail']:.2f}%, "
                     f"tails per sample (run medians) {min(tails):.4f}-{max(tails):.4f} ms")
        print(line, flush=True)
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
