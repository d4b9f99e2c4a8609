"""What both workers run: the request loop, error classification, and the process set-up before any task
or candidate code (allocator thresholds, failed-capture clean-up, float32 numerics, the warm start).

Each worker is a fresh ``python -m pytest_cudal1.workers.<role> READ_FD WRITE_FD``
process. It answers one request at a time with ``("ok", body)`` or
``("error", {"kind", "type", "message", "traceback"})``. The timed region is ``timed_loop``, the
memory the harness may take ``memory``: both workers run the very same code.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import sys
import traceback
import weakref
from typing import Any, Callable

import torch

from pytest_cudal1 import bulk
from pytest_cudal1.wire import BadFile, Channel, ChannelClosed
from pytest_cudal1.workers.process import PRELOAD_VAR

Handler = Callable[[Any], Any]

# Bound before any candidate code is imported, so a candidate that rebinds the
# module attributes does not change what the harness calls.
_cuda_synchronize = torch.cuda.synchronize


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


# glibc's malloc raises its mmap threshold to the largest mmapped block freed so far (up to 32 MiB) and its
# trim threshold to twice that, so a worker's allocator state depends on its history: the reference's
# float64 trials raised both, the candidate's smaller trials did not, and a candidate whose temporaries
# outgrew its trim threshold had them returned to the OS and page-faulted back on every call (the task's
# own Model, judged against itself on the CPU, came out 0.47-0.77x). Both workers fix both thresholds at
# the state a warmed-up glibc reaches, before any task or candidate code runs.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


def steady_allocator() -> bool:
    """Fix glibc's mmap and trim thresholds (no dynamic adjustment); False where malloc is not glibc's."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def close_failed_captures() -> None:
    """Have a CUDA-graph capture that fails leave torch's allocator and default generator as it found them.

    ``CUDAGraph.capture_begin`` routes the capturing stream's allocations to a pool before the capture starts,
    and only a successful ``capture_end`` stops it. After a failed capture the allocator still counts it as
    underway, and the next pool teardown (``~MemPool``: the timed loop drops a measure's placements) aborts
    the process on ``captures_underway.empty()``. CUDA-L1's L2/73 captures its first call, whose cuDNN
    convolution fails inside the capture in a fresh process; it falls back to eager calls, honestly, and its
    worker crashed so. Installed by ``serve`` before any task or candidate code; the caller still gets the
    capture's error, in every phase alike.
    """
    graph_type = torch.cuda.CUDAGraph
    begin, end = graph_type.capture_begin, graph_type.capture_end
    if getattr(end, "closes_failed_captures", False):
        return
    pools: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def capture_begin(self: Any, pool: Any = None, *args: Any, **kwargs: Any) -> None:
        # Named here: torch tells a graph its own pool only after a successful capture.
        pools[self] = torch.cuda.graph_pool_handle() if pool is None else pool
        try:
            begin(self, pools[self], *args, **kwargs)
        except BaseException:
            _undo_capture(pools.pop(self))
            raise

    def capture_end(self: Any) -> None:
        try:
            end(self)
        except BaseException:
            if self in pools:
                _undo_capture(pools.pop(self))
            raise

    capture_end.closes_failed_captures = True  # type: ignore[attr-defined]
    graph_type.capture_begin, graph_type.capture_end = capture_begin, capture_end


def _undo_capture(pool: Any) -> None:
    """What a successful ``capture_end`` and the graph's reset would have done for ``pool``: end the routing and
    drop the capture's use of the pool (a reset releases only a capture that ended); free the generator."""
    if not torch.cuda.is_initialized():
        return
    device = torch.cuda.current_device()
    try:
        torch._C._cuda_endAllocateToPool(device, pool)
    except RuntimeError:  # not routed any more: nothing to undo
        return
    torch._C._cuda_releasePool(device, pool)
    _free_default_generator()


def float32_numerics() -> None:
    """Float32 work runs in float32: called first by both workers and by builds, before any task or candidate
    code runs and before the candidate worker's baseline of the settings.

    PyTorch's default lets cuDNN use TF32 for convolutions (not for matmuls), so whether a convolution lost
    precision depended on the algorithm cuDNN picked: an exact conv3d -> conv2d rewrite (CUDA-L1's release,
    L1/59) ran in TF32 against a 3-D reference cuDNN ran in float32, and failed. With it off everywhere, a
    candidate that turns it on is seen changing a numeric setting (PRECISION_SETTING_MODIFIED)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


class WarmStart:
    """Start-up work that used to fall inside an item's own time, in two parts a spare worker does at
    different times (``spares.Spares``).

    ``cpu()`` at process start: each library of ``PRELOAD_VAR`` imported if it can be (one that cannot
    is left for the judge and the candidate's own import to name, as without this). It touches no GPU,
    so on a GPU machine it may run while another item is timed. ``device_context()`` when asked: the CUDA
    context, which only starts once no item is being timed. The profiler's CUPTI side is never started
    here: it could leave launch overhead on the timed calls.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.preloaded: list[str] = []
        self.on_device = not device.startswith("cuda")  # nothing to start on the CPU

    def cpu(self) -> None:
        for name in filter(None, os.environ.get(PRELOAD_VAR, "").split(",")):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - missing or broken: named later, when the candidate imports it
                continue
            self.preloaded.append(name)

    def device_context(self) -> None:
        """Create the CUDA context (once)."""
        if self.on_device:
            return
        torch.cuda.init()
        torch.empty(1, device=self.device)  # the context is created on first use, not by init()
        self.on_device = True

    def reply(self) -> dict[str, Any]:
        """The ``ready`` reply: what was done."""
        return {"device": self.device, "cuda_context": self.device.startswith("cuda") and self.on_device,
                "cuda_initialized": torch.cuda.is_initialized(), "preloaded": list(self.preloaded)}


def serve(handlers: dict[str, Handler], map_files: bool = False) -> None:
    """Answer requests until the controller says ``exit`` or closes the pipe. ``map_files``: the candidate's
    worker maps the large buffers it receives (``wire.Channel``), as only trusted processes wrote them.

    A fatal signal (an abort in a C++ extension or in torch) dumps the Python stack into the
    worker's log, so the controller can say where the worker died (``process.crash_site``).
    """
    faulthandler.enable(all_threads=False)
    steady_allocator()
    close_failed_captures()
    channel = Channel(int(sys.argv[1]), int(sys.argv[2]), os.environ.get(bulk.FOLDER_VAR) or None, map_files)
    while True:
        try:
            kind, body = channel.recv()
        except ChannelClosed:
            return
        except BadFile as exc:  # the frame was read whole: answer it and go on
            channel.send("error", {"kind": "bulk", "type": "BadFile", "message": str(exc), "traceback": ""})
            continue
        if kind == "exit":
            return
        try:
            result = handlers[kind](body)
            channel.send("ok", result)  # encoding can fail too (e.g. a meta tensor): report it, stay alive
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, incl. SystemExit
            channel.send("error", describe(exc))


def _free_default_generator() -> None:
    """Give the default CUDA generator a fresh state after a failed capture (``_undo_capture``).

    A capture marks the default generator as capturing and only a successful end unmarks it;
    otherwise its next use fails ("Offset increment outside graph capture encountered
    unexpectedly", torch 2.11), in the harness's code and the model's alike.
    """
    generator = torch.cuda.default_generators[torch.cuda.current_device()]
    fresh = torch.Generator(device="cuda")
    fresh.manual_seed(generator.initial_seed())
    try:
        generator.graphsafe_set_state(fresh)
    except (AttributeError, RuntimeError):  # an older torch: its generator keeps no capture state
        pass


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

