"""How fast one tensor crosses a controller<->worker pipe, with Linux's default and with widened pipes.

    python benchmarks/pipe_throughput.py --out results.json

A child process sends a 268 MB float32 tensor five times over ``wire.Channel``;
the parent times each ``recv``. This backs ``workers.process.PIPE_BYTES``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_cudal1.wire import Channel  # noqa: E402
from pytest_cudal1.workers.process import PIPE_BYTES, _widen  # noqa: E402

NUMEL = 8192 * 8192
SENDS = 5
SENDER = f"""
import sys, torch
from pytest_cudal1.wire import Channel
ch = Channel(-1, int(sys.argv[1]))
x = torch.randn({NUMEL})
for _ in range({SENDS}):
    ch.send("ok", x)
"""


def measure(widen: bool) -> list[float]:
    r, w = os.pipe()
    if widen:
        _widen(w)
    child = subprocess.Popen([sys.executable, "-c", SENDER, str(w)], pass_fds=(w,), cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(w)
    channel = Channel(r, -1)
    times = []
    for _ in range(SENDS):
        t0 = time.perf_counter()
        channel.recv(600)
        times.append(time.perf_counter() - t0)
    child.wait()
    os.close(r)
    return times[1:]  # the first includes the sender's start-up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    result = {"bytes": NUMEL * 4, "host": platform.node(), "cpus": os.cpu_count(), "pipe_bytes": PIPE_BYTES}
    for label, widen in (("default_pipe", False), ("widened_pipe", True)):
        times = measure(widen)
        result[label] = {"recv_s": times, "median_s": statistics.median(times),
                         "gb_per_s": NUMEL * 4 / statistics.median(times) / 1e9}
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
