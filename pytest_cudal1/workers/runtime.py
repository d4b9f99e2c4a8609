"""What both workers run: the request loop, error classification, and the timed region.

Each worker is a fresh ``python -m pytest_cudal1.workers.<role> READ_FD WRITE_FD``
process. It answers one request at a time with ``("ok", body)`` or
``("error", {"kind", "type", "message", "traceback"})``. The timed region lives
here so that reference and candidate are measured by the very same code.
"""

from __future__ import annotations

import collections
import contextlib
import faulthandler
import importlib
import os
import sys
import time
import traceback
import weakref
from typing import Any, Callable

import torch

from pytest_cudal1 import bulk
from pytest_cudal1.wire import BadFile, Channel, ChannelClosed
from pytest_cudal1.workers import guards
from pytest_cudal1.workers.process import PRELOAD_VAR
from pytest_cudal1.workers.timing_inputs import TimingInputs

Handler = Callable[[Any], Any]

# Bound before any candidate code is imported, so a candidate that rebinds the
# module attributes does not change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_gpu_sleep = torch.cuda._sleep
_graph_replay = torch.cuda.CUDAGraph.replay
_memory_reserved = torch.cuda.memory_reserved
_memory_allocated = torch.cuda.memory_allocated
_empty_cache = torch.cuda.empty_cache
_mem_get_info = torch.cuda.mem_get_info
_MemPool = getattr(torch.cuda, "MemPool", None)  # torch >= 2.7
_use_mem_pool = getattr(torch.cuda, "use_mem_pool", None)

# A spin kernel queued before the start event (~1 ms at 2 GHz): the GPU waits while the host queues the
# first launches, so the region starts at the first kernel, not at the host's Python overhead. At ~100 us
# the host sometimes had not queued an eager matmul when the hold ran out (H200 session 7: 10 runs of a
# 2.7 ms matmul spread 2.3% at 100 us, 0.1% at 1 ms). Host work done under the hold is not hidden by
# it: a sample counts at least the host's time to queue its calls (``enqueue_ms``).
HOLD_CYCLES = 2_000_000

# Outputs of at least this many calls (and of every call of the last sample) stay held, and none may share
# storage with a new output: a candidate alternating two or three output buffers overwrites what it returned.
HELD_CALLS = 4
# Timed calls' held outputs never go below this many, not even when the device is short of memory (``let_go``):
# a candidate alternating two buffers is still caught.
HELD_CALLS_SHORT = 2

# Cached free device memory beyond this, outside the placements' pools, is handed back before an eager sample.
STRANDED_CACHE_BYTES = 1 << 30

# Buffer placements (``TimedLoop``; how many at most is the controller's ``TimingConfig.placements``) may
# take this share of the free memory.
PLACEMENT_MEMORY_SHARE = 0.25


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


# ------------------------------------------------------------------ timing ---

class Flusher:
    """Evicts the L2 between samples by writing a buffer of twice its size (CUDA only)."""

    def __init__(self, device: str) -> None:
        self.buffer = None
        if device.startswith("cuda"):
            l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20))
            self.buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)
            # Its own generator: the default one is left unusable by a failed graph capture (H200, torch 2.11:
            # "Offset increment outside graph capture encountered unexpectedly").
            self.generator = torch.Generator(device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.random_(generator=self.generator)


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


class TimedLoop:
    """What one sample runs: ``calls`` forward calls on fresh inputs, eagerly or as one CUDA graph replay.

    Short kernels are timed as graph replays when both sides can be captured: a replay is
    one launch, so the GPU runs the calls back to back however slowly Python issues them
    (eagerly, a ~15 us kernel is paced by the host's ~15-20 us per call, and the time
    measures the host). Each graph's calls read fixed input sets, refilled in place with
    new values before every replay, so its outputs are still checked per call; samples
    rotate among several captures with buffers of their own. Eager samples
    rotate among placements too (``place``): input sets and a memory pool of their own,
    so outputs and temporaries move with them.
    Candidate code runs only while a graph is captured; whatever it did not put into
    the graph (host work, unjoined streams, a cache lookup) is missing from the replay.
    The controller checks a replay of each capture before timing and falls back to eager
    calls when one fails (``timing._capture``).
    """

    def __init__(self, call: Callable[[list[Any]], Any], inputs: TimingInputs, poison: list[int] | None = None) -> None:
        self.call = call
        self.inputs = inputs
        # Output sizes to poison before each eager sample, as before each trial.
        self.poison = list(poison or [])
        self.held: collections.deque[Any] = collections.deque(maxlen=HELD_CALLS)  # recent eager calls' outputs
        self.graphs: list[tuple[torch.cuda.CUDAGraph, list[Any]]] = []  # (graph, its calls' outputs)
        self.graph_calls = 0
        self.pools: list[Any] = []  # eager placements' memory pools (None on the CPU)
        self.pool_calls = 0
        self.turn = 0
        self.held_bytes = 0  # device memory the last ``place``/``capture`` took beyond the input sets
        self.pass_bytes = 0  # the outputs of one eager placement's pass (``place``)
        if inputs.device.startswith("cuda"):  # both workers, before either sizes its placements
            _hand_back_cached()

    def capture(self, calls: int, most: int, reserve: int = 0, copies: int = 1) -> int:
        """Capture ``calls`` calls as graphs, after one eager pass on a side stream; returns how many.

        Captured on a stream of their own, with the stream restored even when a capture fails,
        so the worker can go on to time the calls eagerly. As many captures as ``most`` and the
        device's free memory allow (``placements_fitting``), each on input sets of its own.
        """
        sets = self.inputs.fixed(0, calls)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        # Lazy initialization and autotuning happen here, outside the capture; a call that waits for the
        # GPU (``.item()``, ``bool(tensor)``) raises here instead of breaking the capture.
        torch.cuda.set_sync_debug_mode("error")
        try:
            with torch.cuda.stream(side):
                for args in sets:
                    self.call(args)
        except RuntimeError as exc:
            if "synchronizing" not in str(exc):
                raise
            raise RuntimeError(f"its calls synchronize with the host ({str(exc)[:120]})") from None
        finally:
            torch.cuda.set_sync_debug_mode("default")
        _cuda_synchronize()
        self.graphs, self.turn = [], 0
        _hand_back_cached()
        try:
            reserved = _memory_reserved()
            self.graphs.append(self._capture_one(sets, side))
            per_placement = _memory_reserved() - reserved + calls * self.inputs.set_bytes()
            wanted = placements_fitting(per_placement, self.inputs.device, most, reserve, copies)
            for k in range(1, wanted):
                self.graphs.append(self._capture_one(self.inputs.fixed(0, calls, first=k * calls), side))
            self.held_bytes = max(0, _memory_reserved() - reserved)
        except BaseException:
            self.graphs = []
            raise
        for graph, _ in self.graphs:
            _graph_replay(graph)  # the first replay uploads the graph: keep it out of the first sample
        _cuda_synchronize()
        self.graph_calls = calls
        return len(self.graphs)

    def _capture_one(self, sets: list[list[Any]], side: torch.cuda.Stream) -> tuple[torch.cuda.CUDAGraph, list[Any]]:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(side):
            graph.capture_begin()
            try:
                outs = [self.call(args) for args in sets]
            except BaseException:
                try:  # ends the (invalidated) capture, and ``close_failed_captures`` what it left; its error says less
                    graph.capture_end()
                except RuntimeError:
                    pass
                graph.reset()
                raise
            graph.capture_end()
        return graph, outs

    def prepare(self, seed: int, calls: int, graph_wanted: bool) -> tuple[Callable[[], list[Any]], bool]:
        """Refill the inputs for one sample (outside the timed region); return what the region runs
        and whether it is a graph replay (only if asked for: the controller times both sides alike)."""
        if graph_wanted and self.graphs and calls == self.graph_calls:
            k = self.turn % len(self.graphs)
            self.turn += 1
            graph, outs = self.graphs[k]
            self.inputs.fixed(seed, calls, first=k * calls)
            return (lambda: (_graph_replay(graph), outs)[1]), True
        if calls != self.pool_calls:
            raise RuntimeError(f"no eager placements for {calls} calls a sample (the controller asks for them first)")
        k = self.turn % len(self.pools)
        self.turn += 1
        pool = self.pools[k]
        if pool is not None:
            _hand_back_stranded()
        batches = self.inputs.fixed(seed, calls, first=k * calls)
        let_go(self.held, 2 * sum(self.poison), self.inputs.device, keep=max(HELD_CALLS_SHORT, calls))
        with self._in(pool):
            guards.poison(self.poison, self.inputs.device)

        def run() -> list[Any]:
            # No glibc fill here (trials have it): it would charge a memset to every byte a call allocates.
            with self._in(pool):
                return [self.call(args) for args in batches]
        return run, False

    def inspect(self, outs: list[Any], graphed: bool, aliasing_allowed: bool) -> list[tuple[str, str]]:
        """Structural checks of a sample's outputs, as trials make them: (code, detail) per problem.

        Both workers run them, so the harness's time around the call, which the controller compares
        between the sides (``timing.UNREPORTED_MS``), is alike; only the candidate's are weighed.
        """
        problems = []
        slots = self.inputs.in_use
        inputs = {s.buffer.untyped_storage().data_ptr() for s in slots}
        if graphed:  # a graph writes the same buffers on every replay; within one sample the calls need their own
            self.held.clear()
        replayed = guards.reused(outs, self.held, inputs if aliasing_allowed else None)
        if replayed:
            problems.append(("OUTPUT_REPLAY", f"in a timed call: {replayed}"))
        if not aliasing_allowed and inputs & set().union(*map(guards.storage_ptrs, outs)):
            problems.append(("OUTPUT_ALIASES_INPUT", "a timed call's output shares storage with an input"))
        overrun = guards.overrun(slots)
        if overrun:
            problems.append(("OUT_OF_BOUNDS_WRITE", f"in a timed call: {overrun}"))
        if not graphed:
            self.held = collections.deque(self.held, maxlen=max(HELD_CALLS, len(outs)))
            self.held.extend(outs)
        return problems

    @staticmethod
    def _in(pool: Any) -> Any:
        """Allocations go to an eager placement's memory pool (None: the default allocator)."""
        return _use_mem_pool(pool) if pool is not None else contextlib.nullcontext()

    def place(self, calls: int, most: int, reserve: int = 0, copies: int = 1) -> int:
        """Set up eager samples of ``calls`` calls among placements; returns how many.

        Each placement has input sets and a memory pool of its own (outputs and temporaries).

        On CUDA one untimed pass in a first pool shows what a placement takes; as many more
        as fit (``placements_fitting``) get a pass each, so no timed sample waits for
        ``cudaMalloc``. On the CPU only the input sets rotate.
        """
        # Earlier captures go first: their buffers are not timed any more (the ``call`` measure places after them).
        self.graphs, self.pools, self.pool_calls, self.held_bytes, self.pass_bytes = [], [], calls, 0, 0
        per_set = calls * self.inputs.set_bytes()
        if not self.inputs.device.startswith("cuda") or _MemPool is None or _use_mem_pool is None:
            self.pools = [None] * placements_fitting(per_set, self.inputs.device, most, reserve, copies)
            return len(self.pools)
        # The earlier measure's held outputs keep its pools' blocks: let them go first where the first pass needs
        # their room, before the cached blocks are handed back.
        let_go(self.held, 2 * sum(self.poison), self.inputs.device, keep=max(HELD_CALLS_SHORT, calls))
        _hand_back_cached()
        reserved = _memory_reserved()
        pool, self.pass_bytes = self._warmed_pool(calls, 0)
        self.pools.append(pool)
        # The outputs of the last HELD_CALLS calls are still held when a placement's pass comes round again, so
        # its pool grows by them: room beside the placements (the H200 ran a 6.4 GB task's reference out of it).
        wanted = placements_fitting(_memory_reserved() - reserved + per_set, "cuda", most, reserve, copies,
                                    beside=max(HELD_CALLS, calls) * self.pass_bytes // max(calls, 1))
        self.pools += [self._warmed_pool(calls, k)[0] for k in range(1, wanted)]
        self.held_bytes = max(0, _memory_reserved() - reserved)
        return len(self.pools)

    def harness_bytes(self) -> int:
        """What the timing buffers hold: the input sets, the last placements' or captures' memory and the
        held outputs (``inspect``) that did not fit in it (each placement's pass left room for one pass's)."""
        beyond = _storage_bytes(list(self.held)) - len(self.pools) * self.pass_bytes
        return len(self.inputs.sets) * self.inputs.set_bytes() + self.held_bytes + max(0, beyond)

    def _warmed_pool(self, calls: int, k: int) -> tuple[Any, int]:
        """A placement's memory pool after one pass, and the bytes of that pass's outputs."""
        sets = self.inputs.fixed(k, calls, first=k * calls)  # outside the pool: the sets outlive it
        pool = _MemPool()
        with _use_mem_pool(pool):
            guards.poison(self.poison, self.inputs.device)  # its blocks are part of what a placement takes
            outs = [self.call(args) for args in sets]
        _cuda_synchronize()
        return pool, _storage_bytes(outs)


def _storage_bytes(outs: list[Any]) -> int:
    """Bytes of the distinct storages the plain tensors of ``outs`` view (a lazy one is named by the checks)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in guards.tensors(outs) if type(t) is torch.Tensor}
    return sum(storages.values())


def _hand_back_cached() -> None:
    """Return this process's cached, unused device blocks (the trials' tensors) before sizing the timing buffers:
    free memory counts none of them, and on the H200 the reference ran out of memory beside a 6.4 GB task's
    graph wrapper while its own allocator held 17.9 GB and the candidate's worker 72 GB beyond timing buffers."""
    _cuda_synchronize()
    _empty_cache()


def _hand_back_stranded() -> None:
    """Cached blocks outside a placement's pool are of no use to the calls inside it, and torch's allocator frees
    no cached block to retry an allocation while a pool is in use (that counts as a capture underway): on the
    H200 the reference of a 6.4 GB task ran out of memory inside its placement beside five cached 6.4 GB blocks
    (its timed inputs' refill temporaries). Checked before every eager sample, outside the timed region."""
    if _memory_reserved() - _memory_allocated() > STRANDED_CACHE_BYTES:
        _empty_cache()


def let_go(held: collections.deque[Any], need: int, device: str, keep: int) -> None:
    """Held outputs let go, oldest first, down to ``keep``, while the device's room (``room_bytes``) would not
    hold ``need`` bytes (a call's output twice over: it and its temporaries). The held outputs of a 6.4 GB task
    (four of them hold 25.6 GB) are the harness's, not the candidate's: with all of them held, an 80 GB H100 had
    no room left beside an honest CUDA-graph wrapper, in its trials and then in its timed samples (sessions 26
    and 27). Only on CUDA: host memory is not what a held output competes for there."""
    if not device.startswith("cuda"):
        return
    while len(held) > keep and room_bytes(device) < need:
        held.popleft()


def room_bytes(device: str) -> int:
    """What a new allocation can have: ``free_bytes`` plus, on CUDA, the allocator's cached blocks not in use
    (read through the functions bound before candidate code ran, which a candidate cannot rebind)."""
    cached = _memory_reserved() - _memory_allocated() if device.startswith("cuda") else 0
    return free_bytes(device) + cached


def free_bytes(device: str) -> int:
    """Free device memory (CUDA) or available host memory (CPU), in bytes; 0 when unknown."""
    if device.startswith("cuda"):
        return int(_mem_get_info()[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as f:  # MemAvailable counts reclaimable page cache
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def placements_fitting(per_placement: int, device: str, most: int, reserve: int = 0, copies: int = 1,
                       beside: int = 0) -> int:
    """How many buffer placements of ``per_placement`` bytes (up to ``most``) the free memory allows.

    At most ``PLACEMENT_MEMORY_SHARE`` of the free memory, and never so many that less than ``reserve``
    bytes stay free once ``copies`` workers have each placed as many (the reference places first, for
    itself and the candidate after it). ``reserve`` is the candidate's headroom: the harness shrinks its
    own buffers, down to one placement, before it squeezes the candidate (an honest CUDA-graph wrapper
    keeps a static copy of its inputs, and got OUT_OF_MEMORY beside eight placements on each side).
    ``beside``: what each worker holds outside its placements while timed (held outputs, ``TimedLoop.place``).
    """
    free = free_bytes(device)
    room = min(PLACEMENT_MEMORY_SHARE * free, (free - reserve) / max(copies, 1) - beside)
    return max(1, min(most, int(room / max(per_placement, 1))))


def sizing(body: dict[str, Any]) -> tuple[int, int, int, int]:
    """A ``place``/``capture`` request's (calls, most, reserve, copies), for ``TimedLoop``."""
    return int(body["calls"]), int(body["most"]), int(body.get("reserve", 0)), int(body.get("copies", 1))


def memory_held(loop: TimedLoop | None, device: str) -> dict[str, int]:
    """What this worker holds: its device memory (CUDA: reserved by torch's allocator; CPU: resident
    set) and, of that, the timing buffers. For an OUT_OF_MEMORY verdict's message."""
    if device.startswith("cuda"):
        held = int(_memory_reserved())
    else:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                held = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            held = 0
    return {"held_bytes": held, "timing_bytes": loop.harness_bytes() if loop is not None else 0}


def _spin_until(event: Any) -> None:
    """Poll ``event`` until the GPU has passed it: the host notices at once (no sleep, no wake-up)."""
    while not event.query():
        pass


def stream_tail_ms(device: str) -> float:
    """How long a device-wide synchronize takes once the current stream has passed all queued on it, on the
    host clock: an idle one's cost (the tail of an honest sample), plus any work still running on other streams."""
    done = _Event()
    done.record()
    _spin_until(done)
    t0 = _perf_counter_ns()
    sync(device)
    return (_perf_counter_ns() - t0) / 1e6


def hold(device: str, cycles: int = HOLD_CYCLES) -> None:
    """Queue a spin kernel on the current stream (CUDA only): what is queued behind it waits."""
    if device.startswith("cuda"):
        _gpu_sleep(cycles)


def idle_sync_ms(device: str, n: int = 21) -> float:
    """The upper quartile of this process's idle synchronize (``stream_tail_ms``), 0 on the CPU.

    Measured before any candidate code is imported, so a candidate cannot inflate the
    allowance that ``timed_sample`` grants a sample's tail.
    """
    if not device.startswith("cuda"):
        return 0.0
    costs = sorted(stream_tail_ms(device) for _ in range(n))
    return costs[(3 * n) // 4]


# An eager sample's tail may exceed the idle synchronize measured at start-up by this much before it counts as
# work left running. After honest work a synchronize costs more than after none: on the H200 (session 6 probe,
# ``x + 1`` replayed on 32-256 MB buffers) the run medians of that excess were 11-48 us, and they moved
# whole runs by up to 3% when counted. Work hidden on another stream can escape the count by this much.
HONEST_TAIL_MS = 0.05


def timed_sample(loop: TimedLoop, seed: int, calls: int, device: str, flush: Flusher, idle_sync: float = 0.0,
                 before: Callable[[], None] = lambda: None, graph: bool = False,
                 hold: bool = True) -> tuple[dict[str, Any], list[Any]]:
    """One sample: ``calls`` forward calls on fresh inputs inside one measured region (``TimedLoop``).

    On CUDA: a spin kernel (the hold), start event, the calls, end event on the current
    stream. The hold keeps the GPU busy while the host queues the first launch, so host
    launch latency stays out of the time (the profiler's view of the same kernels); the
    host's time from the start event to the end event's launch is ``enqueue_ms``, which
    the controller counts when it is longer than the events' (host-bound calls, or host
    work done while the GPU held).
    Then the host polls the end event until the current stream has passed it and
    synchronizes the whole device: work left on any other stream makes that synchronize
    wait. Its cost past an idle synchronize (``idle_sync``, measured before the candidate
    loaded, plus ``HONEST_TAIL_MS``) is ``escaped_ms``, which the controller adds to the
    run's samples (``timing.counted_ms``). Both ends of that tail are read on the host
    clock by a host that never sleeps in between. A graph replay has no escaped work
    (a capture must join every stream it forked, and work launched outside the capture
    is missing from the replay, whose outputs are checked), so its tail is not counted:
    after bandwidth-heavy replays honest tails reached 76 us on the H200 (session 6).
    Without ``hold`` (the ``call`` measure) no spin kernel runs: the GPU is idle at the start
    event, so the region spans the host's launch of the calls too, as a user's eager call does.
    Returns per-call times (events and host clock) and every call's output.
    ``before`` runs outside the region (e.g. resetting the persisting-L2 limit).
    """
    run, graphed = loop.prepare(seed, calls, graph)
    before()
    flush()
    sync(device)
    escaped = 0.0
    if device.startswith("cuda"):
        held, start, end = (_Event(enable_timing=True) for _ in range(3))
        t0 = _perf_counter_ns()
        held.record()
        if hold:
            _gpu_sleep(HOLD_CYCLES)
        start.record()
        queued = _perf_counter_ns()
        outs = run()
        end.record()
        enqueue_ms = (_perf_counter_ns() - queued) / 1e6 / calls
        _spin_until(end)
        stream_done = _perf_counter_ns()
        sync(device)
        t1 = _perf_counter_ns()
        if not graphed:  # a replay runs only what was captured, joined into the graph: nothing escapes it
            escaped = max(0.0, (t1 - stream_done) / 1e6 - idle_sync - HONEST_TAIL_MS)
        event_ms = start.elapsed_time(end) / calls
        t1 -= int(held.elapsed_time(start) * 1e6)  # the host clock, less the hold the harness queued
    else:
        t0 = _perf_counter_ns()
        outs = run()
        t1 = _perf_counter_ns()
        event_ms = enqueue_ms = None
    return {"event_ms": event_ms, "enqueue_ms": enqueue_ms, "host_ms": (t1 - t0) / 1e6 / calls, "calls": calls,
            "escaped_ms": escaped, "graph": graphed}, outs


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

