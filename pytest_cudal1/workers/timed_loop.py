"""The timed region both workers run (``timed_sample``) and what one sample runs (``TimedLoop``): the same
code measures the reference and the candidate."""

from __future__ import annotations

import collections
import contextlib
import time
from typing import Any, Callable

import torch

from pytest_cudal1.workers import guards, memory, runtime
from pytest_cudal1.workers.timing_inputs import TimingInputs

# Bound before any candidate code is imported, so a candidate that rebinds the
# module attributes does not change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_gpu_sleep = torch.cuda._sleep
_graph_replay = torch.cuda.CUDAGraph.replay
_memory_reserved = torch.cuda.memory_reserved
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
# A candidate's held outputs never go below this many, not even when the device is short of memory (``let_go``):
# a candidate alternating two buffers is still caught. The reference's all go (``TimedLoop.checked``).
HELD_CALLS_SHORT = 2

# Before a CPU sample the worker writes this many bytes with all its threads, in the set-up request (``settle``):
# the CPU's counterpart of the GPU's L2 flush. Without it, on this project's 2-core CPU, a 512x512 relu judged
# against itself came out 0.93-0.95x: a sample second in its pair ran ~10% slower than one first, on either side,
# and the reference's own refill just before its sample left it ~8% ahead of the candidate when first. Writing
# 4 MB changed nothing, 16 MB half, 64 MB all of it (median 0.983x, 0.964-1.026x over 8 runs;
# benchmarks/results/2026-12-07-CPU-session35). Inside the clocked request it cost the candidate 0.3 ms more a
# sample than the reference: not there.
CPU_SETTLE_BYTES = 64 << 20


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


class TimedLoop:
    """What one sample runs: ``calls`` forward calls on fresh inputs, eagerly or as one CUDA graph replay.

    Short kernels are timed as graph replays when both sides can be captured: a replay is
    one launch, so the GPU runs the calls back to back however slowly Python issues them
    (eagerly, a ~15 us kernel is paced by the host's ~15-20 us per call, and the time
    measures the host). Each graph's calls read fixed input sets, refilled in place with
    new values before every replay, so its outputs are still checked per call; samples
    rotate among several captures with buffers of their own. Eager samples
    rotate among placements too (``place``): input sets and a memory pool of their own,
    so outputs and temporaries move with them. The refill is a request of its own to the
    reference worker (``TimingInputs.mirror``): a sample only picks its sets (``prepare``).
    Candidate code runs only while a graph is captured; whatever it did not put into
    the graph (host work, unjoined streams, a cache lookup) is missing from the replay.
    The controller checks each capture's first timed replay and falls back to eager
    calls when one fails (``timing.measure_pairs``).
    """

    def __init__(self, call: Callable[[list[Any]], Any], inputs: TimingInputs, poison: list[int] | None = None,
                 checked: bool = True) -> None:
        self.call = call
        # Whether the outputs are checked for replays (the candidate's). The reference holds its outputs as the
        # candidate does, so the harness's time around the calls is alike, but lets every one go when short.
        self.checked = checked
        self.inputs = inputs
        # Output sizes to poison before each eager sample, as before each trial.
        self.poison = list(poison or [])
        self.held: collections.deque[Any] = collections.deque(maxlen=HELD_CALLS)  # recent eager calls' outputs
        self.settler: torch.Tensor | None = None  # what ``settle`` writes before a CPU sample
        self.graphs: list[tuple[torch.cuda.CUDAGraph, list[Any]]] = []  # (graph, its calls' outputs)
        self.graph_calls = 0
        self.pools: list[Any] = []  # eager placements' memory pools (None on the CPU)
        self.pool_calls = 0
        self.readied: tuple[Callable[..., list[Any]], bool] | None = None  # the next sample (``set_up``)
        self.held_bytes = 0  # device memory the last ``place``/``capture`` took beyond the input sets
        self.pass_bytes = 0  # the outputs of one eager placement's pass (``place``)
        if inputs.device.startswith("cuda"):  # both workers, before either sizes its placements
            memory.hand_back_cached()

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
        self.graphs = []
        most = self._most(most, calls)
        memory.hand_back_cached()
        try:
            reserved = _memory_reserved()
            self.graphs.append(self._capture_one(sets, side))
            per_placement = _memory_reserved() - reserved + calls * self._set_bytes()
            wanted = memory.placements_fitting(per_placement, self.inputs.device, most, reserve, copies)
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

    def _graphed(self, calls: int, graph_wanted: bool) -> bool:
        """Is a sample of ``calls`` calls a replay of the captures (when one is wanted)?"""
        return graph_wanted and bool(self.graphs) and calls == self.graph_calls

    def block(self, turn: int, calls: int, graph_wanted: bool) -> int:
        """Which capture or placement the sample of ``turn`` runs: its input sets start at ``block * calls``."""
        if self._graphed(calls, graph_wanted):
            return turn % len(self.graphs)
        if calls != self.pool_calls:
            raise RuntimeError(f"no eager placements for {calls} calls a sample (the controller asks for them first)")
        return turn % len(self.pools)

    def prepare(self, turn: int, calls: int, graph_wanted: bool) -> tuple[Callable[..., list[Any]], bool]:
        """Pick the sets of the sample of ``turn``, refilled already (outside the timed region); return what the
        region runs (``run(part)``: the calls of that slice, all by default; a replay is all of them) and whether
        it is a graph replay (only if asked for: the controller times both sides alike)."""
        k = self.block(turn, calls, graph_wanted)
        if self._graphed(calls, graph_wanted):
            graph, outs = self.graphs[k]
            self.inputs.select(calls, first=k * calls)
            return (lambda part=slice(None): (_graph_replay(graph), outs)[1]), True
        pool = self.pools[k]
        if pool is not None:
            memory.hand_back_stranded()
        batches = self.inputs.select(calls, first=k * calls)
        self._let_go(calls)
        with self._in(pool):
            guards.poison(self.poison, self.inputs.device)

        def run(part: slice = slice(None)) -> list[Any]:
            # No glibc fill here (trials have it): it would charge a memset to every byte a call allocates.
            with self._in(pool):
                return [self.call(args) for args in batches[part]]
        return run, False

    def set_up(self, turn: int, calls: int, graph_wanted: bool) -> None:
        """Set up the sample of ``turn`` (``prepare``) in a request of its own, once the reference worker has
        refilled its inputs: the clocked request that follows holds the calls and the L2 flush, not the output
        poison of a 16 MB output (~10 ms on the CPU), nor, on the CPU, the ``settle`` write. Nor a read of the
        inputs: inside the clocked request it took 1.15 ms for a 1 MB set the reference worker wrote, 0.21 ms for
        its own (session 34); here, after ``settle``, it made the Triton interpreter's samples 0.1-0.3 ms longer
        around the candidate's than around the reference's (one honest candidate TIMER_MISMATCH)."""
        self.readied = self.prepare(turn, calls, graph_wanted)
        if not self.inputs.device.startswith("cuda"):
            self.settle()

    def settle(self) -> None:
        """Write ``CPU_SETTLE_BYTES`` with all the worker's threads: whatever ran before (the other worker's sample,
        the reference worker's refill, the checks) leaves the caches and cores alike on both sides."""
        if self.settler is None:
            self.settler = torch.zeros(CPU_SETTLE_BYTES // 4)
        self.settler.add_(1)

    def release(self) -> None:
        """Timing is over: the placements' pools, the captures and the held outputs go, and their memory goes
        back to the device (an untimed call after timing, the profiled one, needs its room: an 80 GB card ran
        a 6.4 GB task's CUDA-graph wrapper out of memory in it). The input sets stay."""
        self.graphs, self.pools, self.readied = [], [], None
        self.held.clear()
        if self.inputs.device.startswith("cuda"):
            memory.hand_back_cached()

    def inspect(self, outs: list[Any], graphed: bool, aliasing_allowed: bool) -> list[tuple[str, str]]:
        """Structural checks of a sample's outputs, as trials make them: (code, detail) per problem.

        Both workers run them, so the harness's time around the call, which the controller compares
        between the sides (``unreported.UNREPORTED_MS``), is alike; only the candidate's are weighed.
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

    def _let_go(self, calls: int) -> None:
        """Held outputs let go while the device is short of a call's room (``memory.let_go``): the candidate's
        down to those of ``HELD_CALLS_SHORT`` calls or of one sample; the reference's all, and while there is
        less room than both sides' calls need (the harness shrinks its own buffers first). On an 80 GB H100 the
        reference of a 6.4 GB task ran out of memory holding two outputs it never checks (session 28)."""
        if self.checked:
            memory.let_go(self.held, 2 * sum(self.poison), self.inputs.device, keep=max(HELD_CALLS_SHORT, calls))
        else:
            memory.let_go(self.held, 4 * sum(self.poison), self.inputs.device, keep=0)

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
        most = self._most(most, calls)
        per_set = calls * self._set_bytes()
        if not self.inputs.device.startswith("cuda") or _MemPool is None or _use_mem_pool is None:
            self.pools = [None] * memory.placements_fitting(per_set, self.inputs.device, most, reserve, copies)
            return len(self.pools)
        # The earlier measure's held outputs keep its pools' blocks: let them go first where the first pass needs
        # their room, before the cached blocks are handed back.
        self._let_go(calls)
        memory.hand_back_cached()
        reserved = _memory_reserved()
        pool, self.pass_bytes = self._warmed_pool(calls, 0)
        self.pools.append(pool)
        # The outputs of the last HELD_CALLS calls are still held when a placement's pass comes round again, so
        # its pool grows by them: room beside the placements (the H200 ran a 6.4 GB task's reference out of it).
        wanted = memory.placements_fitting(_memory_reserved() - reserved + per_set, "cuda", most, reserve, copies,
                                           beside=max(HELD_CALLS, calls) * self.pass_bytes // max(calls, 1))
        self.pools += [self._warmed_pool(calls, k)[0] for k in range(1, wanted)]
        self.held_bytes = max(0, _memory_reserved() - reserved)
        return len(self.pools)

    def harness_bytes(self) -> int:
        """What the timing buffers hold: the input sets, the last placements' or captures' memory and the
        held outputs (``inspect``) that did not fit in it (each placement's pass left room for one pass's)."""
        beyond = memory.storage_bytes(list(self.held)) - len(self.pools) * self.pass_bytes
        return self.inputs.owned_bytes() + self.held_bytes + max(0, beyond)

    def _set_bytes(self) -> int:
        """What one more input set takes here: nothing for the candidate, whose sets the reference made."""
        return 0 if self.inputs.adopted else self.inputs.set_bytes()

    def _most(self, most: int, calls: int) -> int:
        """At most as many placements as there are input sets for (the candidate: as many as it was shared)."""
        return min(most, len(self.inputs.sets) // calls) if self.inputs.adopted else most

    def _warmed_pool(self, calls: int, k: int) -> tuple[Any, int]:
        """A placement's memory pool after one pass, and the bytes of that pass's outputs."""
        sets = self.inputs.fixed(k, calls, first=k * calls)  # outside the pool: the sets outlive it
        pool = _MemPool()
        with _use_mem_pool(pool):
            guards.poison(self.poison, self.inputs.device)  # its blocks are part of what a placement takes
            outs = [self.call(args) for args in sets]
        _cuda_synchronize()
        return pool, memory.storage_bytes(outs)


def sizing(body: dict[str, Any]) -> tuple[int, int, int, int]:
    """A ``place``/``capture`` request's (calls, most, reserve, copies), for ``TimedLoop``."""
    return int(body["calls"]), int(body["most"]), int(body.get("reserve", 0)), int(body.get("copies", 1))


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
    runtime.sync(device)
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


def timed_sample(loop: TimedLoop, turn: int, calls: int, device: str, flush: Flusher, idle_sync: float = 0.0,
                 before: Callable[[], None] = lambda: None, graph: bool = False,
                 hold: bool = True) -> tuple[dict[str, Any], list[Any]]:
    """One sample: ``calls`` forward calls on fresh inputs in one measured region (``TimedLoop``; the ``call``
    measure's on a GPU: a region each), as the worker's ``set_up`` request made it ready (else ``turn`` picks the
    capture or placement here); the reference worker refilled its inputs in between.

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
    run's samples (``timing_stats.counted_ms``). Both ends of that tail are read on the host
    clock by a host that never sleeps in between. A graph replay has no escaped work
    (a capture must join every stream it forked, and work launched outside the capture
    is missing from the replay, whose outputs are checked), so its tail is not counted:
    after bandwidth-heavy replays honest tails reached 76 us on the H200 (session 6).
    Without ``hold`` (the ``call`` measure) no spin kernel runs: the GPU is idle at the start
    event, so the region spans the host's launch of the call too, as a user's eager call does;
    each call is a region of its own then, ``before``, the L2 flush and a synchronize ahead of
    each (``between_calls``), and the sample's figures are the regions' means.
    Returns per-call times (events and host clock) and every call's output.
    ``before`` runs outside the region (e.g. resetting the persisting-L2 limit).
    """
    run, graphed = loop.readied or loop.prepare(turn, calls, graph)
    loop.readied = None
    if not device.startswith("cuda"):
        between_calls(before, flush, device)
        t0 = _perf_counter_ns()
        outs = run()
        t1 = _perf_counter_ns()
        return {"event_ms": None, "enqueue_ms": None, "host_ms": (t1 - t0) / 1e6 / calls, "calls": calls,
                "escaped_ms": 0.0, "graph": graphed}, outs
    parts = [slice(None)] if hold or graphed else [slice(i, i + 1) for i in range(calls)]
    outs, totals = [], [0.0, 0.0, 0.0, 0.0]  # event, enqueue, host and escaped ms, summed over the regions
    for part in parts:
        between_calls(before, flush, device)
        region = _region(lambda: run(part), hold, graphed, idle_sync)
        outs += region[0]
        totals = [t + r for t, r in zip(totals, region[1:])]
    event_ms, enqueue_ms, host_ms, escaped = totals
    return {"event_ms": event_ms / calls, "enqueue_ms": enqueue_ms / calls, "host_ms": host_ms / calls,
            "calls": calls, "escaped_ms": escaped, "graph": graphed}, outs


def between_calls(before: Callable[[], None], flush: Flusher, device: str) -> None:
    """What comes before every measured region, outside it: ``before``, the L2 flush, the device idle."""
    before()
    flush()
    runtime.sync(device)


def _region(run: Callable[[], list[Any]], hold: bool, graphed: bool,
            idle_sync: float) -> tuple[list[Any], float, float, float, float]:
    """One measured region on CUDA (``timed_sample``): the outputs, then its event, enqueue and host times and the
    escaped tail, in ms for the whole region."""
    held, start, end = (_Event(enable_timing=True) for _ in range(3))
    t0 = _perf_counter_ns()
    held.record()
    if hold:
        _gpu_sleep(HOLD_CYCLES)
    start.record()
    queued = _perf_counter_ns()
    outs = run()
    end.record()
    enqueue_ms = (_perf_counter_ns() - queued) / 1e6
    _spin_until(end)
    stream_done = _perf_counter_ns()
    runtime.sync("cuda")
    t1 = _perf_counter_ns()
    escaped = 0.0
    if not graphed:  # a replay runs only what was captured, joined into the graph: nothing escapes it
        escaped = max(0.0, (t1 - stream_done) / 1e6 - idle_sync - HONEST_TAIL_MS)
    t1 -= int(held.elapsed_time(start) * 1e6)  # the host clock, less the hold the harness queued
    return outs, start.elapsed_time(end), enqueue_ms, (t1 - t0) / 1e6, escaped


def idle_sample(ms: float, asleep: bool, regions: int = 1,
                between: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """A sample of nothing ``ms`` long, the host spinning on its clock or asleep (``unreported.idle_overheads``): the
    harness's own time around a sample that long. In ``regions`` parts, ``between`` ahead of each, as a ``call``
    measure sample runs its calls (``timed_sample``); only the parts are its time."""
    host_ns = 0
    for _ in range(regions):
        between()
        t0 = _perf_counter_ns()
        if asleep:
            time.sleep(ms / regions / 1e3)
        else:
            end = t0 + int(ms / regions * 1e6)
            while _perf_counter_ns() < end:
                pass
        host_ns += _perf_counter_ns() - t0
    return {"host_ms": host_ns / 1e6, "calls": 1}
