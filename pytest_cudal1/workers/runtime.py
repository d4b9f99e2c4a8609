"""What both workers run: the request loop, error classification, and the timed region.

Each worker is a fresh ``python -m pytest_cudal1.workers.<role> READ_FD WRITE_FD``
process. It answers one request at a time with ``("ok", body)`` or
``("error", {"kind", "type", "message", "traceback"})``. The timed region lives
here so that reference and candidate are measured by the very same code.
"""

from __future__ import annotations

import sys
import time
import traceback
from typing import Any, Callable

import torch

from pytest_cudal1.wire import Channel, ChannelClosed

Handler = Callable[[Any], Any]

# Bound before any candidate code is imported, so a candidate that rebinds the
# module attributes does not change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event


def pick_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def sync(device: str) -> None:
    """Device-wide: waits for work on every stream of this process, not just the current one."""
    if device.startswith("cuda"):
        _cuda_synchronize()


def classify(exc: BaseException) -> str:
    """Map an exception to a coarse kind the controller turns into a reason code."""
    text = f"{type(exc).__name__}: {exc}"
    mod = type(exc).__module__ or ""
    if isinstance(exc, SystemExit):
        return "exit"
    if isinstance(exc, SyntaxError):
        return "syntax"
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text or "can't allocate memory" in text:
        return "oom"
    if "CUDA error" in text or "illegal memory access" in text or "cudaError" in text or "AcceleratorError" in text:
        return "cuda"
    if (
        "Error building extension" in text
        or "CompilationError" in text
        or "CompileException" in text
        or mod.startswith(("numba.core.errors", "triton.compiler"))
    ):
        return "compile"
    return "python"


def describe(exc: BaseException) -> dict[str, str]:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"kind": classify(exc), "type": type(exc).__name__, "message": str(exc)[:4000], "traceback": tb[-6000:]}


def serve(handlers: dict[str, Handler]) -> None:
    """Answer requests until the controller says ``exit`` or closes the pipe."""
    channel = Channel(int(sys.argv[1]), int(sys.argv[2]))
    while True:
        try:
            kind, body = channel.recv()
        except ChannelClosed:
            return
        if kind == "exit":
            return
        try:
            result = handlers[kind](body)
            channel.send("ok", result)  # encoding can fail too (e.g. a meta tensor): report it, stay alive
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, incl. SystemExit
            channel.send("error", describe(exc))


# ------------------------------------------------------------------ timing ---

class Flusher:
    """Evicts the L2 between samples by writing a buffer of twice its size (CUDA only)."""

    def __init__(self, device: str) -> None:
        self.buffer = None
        if device.startswith("cuda"):
            l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20))
            self.buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.random_()


def fresh_inputs(base: list[Any], seed: int, device: str) -> list[Any]:
    """New tensors for one timed call: each float input scaled by (0.5 + U[0,1)) from ``seed``.

    Both workers derive the same values from the same seed, so the reference's
    output for the call checks the candidate's. New storage and new content on
    every call defeat caches keyed on pointers, ids, versions or content.
    """
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out = []
    for x in base:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            u = torch.rand(x.shape, generator=gen, device=device, dtype=x.dtype)
            out.append(x * (u + 0.5))
        elif isinstance(x, torch.Tensor):
            out.append(x.clone())
        else:
            out.append(x)
    return out


def timed_sample(call: Callable[[list[Any]], Any], base: list[Any], seed: int, calls: int,
                 device: str, flush: Flusher, before: Callable[[], None] = lambda: None) -> tuple[dict[str, Any], list[Any]]:
    """One sample: ``calls`` forward calls on fresh inputs inside one synchronized region.

    Returns the per-call times (event and host clock) and every call's output.
    The region ends with a device-wide synchronize, so work left on any stream
    of this process is inside the measurement. ``before`` runs outside the
    region (e.g. resetting the persisting-L2 limit).
    """
    batches = [fresh_inputs(base, seed * 1009 + i, device) for i in range(calls)]
    outs = []
    before()
    flush()
    sync(device)
    if device.startswith("cuda"):
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        t0 = _perf_counter_ns()
        start.record()
        for inputs in batches:
            outs.append(call(inputs))
        sync(device)
        end.record()
        sync(device)
        t1 = _perf_counter_ns()
        event_ms = start.elapsed_time(end) / calls
    else:
        t0 = _perf_counter_ns()
        for inputs in batches:
            outs.append(call(inputs))
        t1 = _perf_counter_ns()
        event_ms = None
    return {"event_ms": event_ms, "host_ms": (t1 - t0) / 1e6 / calls, "calls": calls}, outs


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

