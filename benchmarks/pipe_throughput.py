"""How fast one tensor goes from one worker through the controller to another, as a trial's inputs and outputs do.

    python benchmarks/pipe_throughput.py --out results.json

A sender process sends a 268 MB float32 tensor over ``wire.Channel``; the controller receives it undecoded
(``raw``) and relays it to a receiver process, which decodes it and answers. Each transfer is timed from the
controller's cue to the receiver's answer, five times, the first (start-up) left out. Three ways: Linux's
default pipes, pipes widened to ``workers.process.PIPE_BYTES``, and widened pipes with a bulk folder (the
bytes in a tmpfs file, only its name in the pipes: ``pytest_cudal1.bulk``).
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

from pytest_cudal1 import bulk  # noqa: E402
from pytest_cudal1.wire import Channel  # noqa: E402
from pytest_cudal1.workers.process import PIPE_BYTES, _widen  # noqa: E402

NUMEL = 8192 * 8192
SENDS = 5
CHILD = f"""
import os, sys, torch
from pytest_cudal1.wire import Channel
ch = Channel(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] or None)
x = torch.randn({NUMEL})
while True:
    kind, body = ch.recv()
    if kind == "exit":
        break
    ch.send("ok", x if kind == "go" else int(body.numel()))
"""


def child(folder: str | None, widen: bool) -> tuple[subprocess.Popen, Channel]:
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    if widen:
        _widen(to_w)
        _widen(from_w)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(to_r), str(from_w), folder or ""],
                            pass_fds=(to_r, from_w), cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(to_r)
    os.close(from_w)
    return proc, Channel(from_r, to_w, folder)


def measure(folder: str | None, widen: bool) -> list[float]:
    (sender, tx), (receiver, rx) = child(folder, widen), child(folder, widen)
    times = []
    for _ in range(SENDS):
        t0 = time.perf_counter()
        tx.send("go")
        _, relayed = tx.recv(600, raw=True)
        rx.send("data", relayed)
        _, numel = rx.recv(600)
        times.append(time.perf_counter() - t0)
        assert numel == NUMEL
        del relayed
    for proc, channel in ((sender, tx), (receiver, rx)):
        channel.send("exit")
        proc.wait()
        channel.close()
    return times[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    folder = bulk.controller_folder()
    result = {"bytes": NUMEL * 4, "host": platform.node(), "cpus": os.cpu_count(), "pipe_bytes": PIPE_BYTES,
              "bulk_folder": folder}
    ways = [("default_pipe", None, False), ("widened_pipe", None, True)] + ([("bulk_file", folder, True)] if folder else [])
    for label, where, widen in ways:
        times = measure(where, widen)
        result[label] = {"relay_s": times, "median_s": statistics.median(times),
                         "gb_per_s": NUMEL * 4 / statistics.median(times) / 1e9}
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
