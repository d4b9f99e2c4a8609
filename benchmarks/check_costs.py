"""What the checks of one timed sample cost, per call: the candidate worker's tamper watch (once a sample), the
output digests each worker computes, the sampled elements each gathers, and the reference worker's comparison of
the candidate's elements with its own (in one pass, ``one_pass``, and tensor by tensor, ``compare``, where one fails).

Every timed call's output is checked (docs/anticheat.md), so these costs grow with the calls a sample holds:
on an H100 they were most of the timing phase (session 30: setup, element checks and digests 40 of 48 s).
Writes one JSON line per (size, calls, step) to --out and prints them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from pytest_cudal1.compare import compare, within_bounds
from pytest_cudal1.workers import digests, runtime

CASES = ((4096, 81), (128 * 1024, 81), (1 << 20, 20), (1 << 24, 4))


def _timed(fn, device: str, repeats: int = 5) -> float:
    """Median seconds of ``fn`` (after one untimed call), the device synchronized around each."""
    fn()
    times = []
    for _ in range(repeats):
        runtime.sync(device)
        t0 = time.perf_counter()
        fn()
        runtime.sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    with open(args.out, "w") as out:
        # The candidate worker's tamper watch (``tamper.TamperWatch.tampered``), once a sample in its ``digests``
        # request: in a process holding the worker's modules, as the watch sees them there.
        import pytest_cudal1.workers.candidate  # noqa: F401
        from pytest_cudal1.workers import tamper

        watch = tamper.TamperWatch()
        row = {"step": "tamper_watch", "watched": len(watch.objs), "modules": len(sys.modules),
               "ms": round(_timed(watch.tampered, "cpu", repeats=51) * 1e3, 3)}
        print(json.dumps(row), flush=True)
        out.write(json.dumps(row) + "\n")
        for numel, calls in CASES:
            outs = [torch.randn(numel, device=args.device) for _ in range(calls)]
            theirs = digests.sampled_elements(outs, 5, 256)
            steps = {
                "digests": lambda: digests.fingerprints(outs),
                "elements": lambda: digests.sampled_elements(outs, 5, 256),
                # A sample whose elements all pass takes one pass; one that fails goes tensor by tensor too.
                "one_pass": lambda: within_bounds(theirs, digests.sampled_elements(outs, 5, 256), 1e-6, 0.0),
                "compare": lambda: compare(theirs, digests.sampled_elements(outs, 5, 256), None, "elements",
                                           rounding=1e-6),
            }
            for step, fn in steps.items():
                s = _timed(fn, args.device)
                row = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "numel": numel,
                       "calls": calls, "step": step, "ms": round(s * 1e3, 3), "ms_per_call": round(s * 1e3 / calls, 4)}
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
