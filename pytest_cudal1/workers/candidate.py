"""The untrusted candidate worker: imports one candidate and runs ModelNew on given inputs.

Everything it reports is data the controller checks: outputs against the
reference, times against the controller's own wall clock, and the flags of
``guards`` (raised by harness code bound before the candidate was imported).
It never sees reference outputs. ``--compile-only PATH NAME [TASK]`` imports the
module, constructs ``ModelNew`` from the task's init inputs, and exits: that is
how candidates are built ahead of judging (``load_inline`` compiles at import or
in ``__init__``).
"""

from __future__ import annotations

import collections
import importlib.util
import os
import sys
import time
from typing import Any

import torch

from pytest_cudal1.workers import (build_locks, digests, extension_failures, guards, memory, process_state, runtime, tamper,
                                   timed_loop)
from pytest_cudal1.workers.timing_inputs import TimingInputs


def import_candidate(path: str, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# Correctness calls on CUDA: the caller's stream is held this long (~10 ms at 2 GHz) while the host writes the
# inputs and queues the call, so no side stream finishes before the harness's copy of the outputs can see it.
RACE_HOLD_CYCLES = 20_000_000
# Work still running on other streams this long after the caller's stream finished is an escaped stream: a
# single synchronize, not a run's median, so more than the timing's 0.05 ms allowance for an honest one.
STREAM_PENDING_MS = 0.2
BUILD_SEED = 0  # the build's model is thrown away; only what it compiled is kept


def compile_only(path: str, module_name: str, task_path: str | None) -> None:
    """A build: import the candidate and, given the task, construct its ModelNew as judging will.

    The task (trusted) runs first, before any candidate code, only to produce its init inputs:
    the data the candidate is constructed from when judged anyway.
    """
    init_inputs = None
    if task_path is not None:
        task: dict[str, Any] = {"__name__": "cudal1_build_task"}
        with open(task_path, encoding="utf-8") as f:
            exec(compile(f.read(), task_path, "exec"), task)  # noqa: S102 - trusted task source
        torch.manual_seed(BUILD_SEED)
        init_inputs = list(task["get_init_inputs"]())
    model_new = getattr(import_candidate(path, module_name), "ModelNew", None)
    if init_inputs is None or not isinstance(model_new, type):
        return  # judging names a missing ModelNew
    torch.manual_seed(BUILD_SEED)
    try:
        model_new(*init_inputs)
    except BaseException:
        from pytest_cudal1.builds import CONSTRUCTION_FAILED

        print(CONSTRUCTION_FAILED, file=sys.stderr, flush=True)
        raise


def flag(code: str, detail: str) -> dict[str, str]:
    return {"code": code, "detail": detail}


class CandidateWorker:
    def __init__(self) -> None:
        self.device = runtime.pick_device()
        # Before the baseline below: what importing a library changes is not the candidate's doing.
        self.warm = runtime.WarmStart(self.device)
        self.warm.cpu()
        self.flush = timed_loop.Flusher(self.device) if self.warm.on_device else None
        self.idle_sync = 0.0
        self.baseline = process_state.settings()
        self.watch = tamper.TamperWatch()
        self.module: Any = None
        self.model: torch.nn.Module | None = None
        self.loop: timed_loop.TimedLoop | None = None
        self.last_output: Any = None
        self.held: collections.deque[Any] = collections.deque(maxlen=timed_loop.HELD_CALLS)  # recent trials' outputs
        self.poison_sizes: list[int] = []  # the reference's output sizes, poisoned before each call
        self.allowed: set[str] = set()  # flags the reference earned too (it aliases or mutates its inputs)
        self.timed_outputs: list[Any] = []  # every call's outputs of the last timed sample
        self.timed_graph = False
        self.resident = 0  # device bytes the model holds (allocated while it was built)
        self.peak: int | None = None

    def state_flags(self) -> list[dict[str, Any]]:
        flags = []
        tampered = self.watch.tampered()
        if tampered:
            flags.append(flag("JUDGE_TAMPERING", tampered))
        return flags + process_state.state_changes(self.baseline, process_state.settings())

    def ready(self, body: Any) -> dict[str, Any]:
        """Answered once the warm start is done (``runtime.WarmStart``): what it did. ``{"device": true}``:
        its device part too, which the controller asks for once no item is being timed."""
        if body and body.get("device"):
            self._on_device()
        return self.warm.reply()

    def _on_device(self) -> None:
        """The CUDA context (once), before any candidate code: the settings' baseline is taken again after it,
        since creating it changes the environment (torch sets ``CUDA_MODULE_LOADING``) on its own."""
        if self.warm.on_device:
            return
        if self.module is not None:
            raise RuntimeError("the device must be started before the candidate is imported")
        self.warm.device_context()
        self.flush = timed_loop.Flusher(self.device)
        self.baseline = process_state.settings()
        self.watch = tamper.TamperWatch()  # again: the baseline bound libcudart's handle (``process_state._cudart``)

    def load(self, body: dict[str, Any]) -> dict[str, Any]:
        # The candidate's cache folders and its working folder: a worker started before its candidate was known
        # (``Spares.prefetch_any``) learns them here, before any candidate code runs.
        os.environ.update({str(k): str(v) for k, v in (body.get("env") or {}).items()})
        if body.get("cwd"):
            os.chdir(str(body["cwd"]))
        self._on_device()  # where the controller did not ask for it earlier
        # Calibrated here, not at start-up: the worker may start while the previous item still runs on the
        # GPU; and before the import, so no candidate code can keep the GPU busy to inflate it.
        self.idle_sync = timed_loop.idle_sync_ms(self.device)
        t0 = time.perf_counter()
        self.module = import_candidate(body["path"], body["module_name"])
        return {"import_s": time.perf_counter() - t0,
                "has_modelnew": isinstance(getattr(self.module, "ModelNew", None), type),
                "flags": self.state_flags(), "extension_failures": list(extension_failures.FAILED)}

    def build(self, body: dict[str, Any]) -> dict[str, Any]:
        torch.manual_seed(int(body["seed"]))
        init_inputs = list(body["init_inputs"])
        before = self._allocated()
        self.model = self.module.ModelNew(*init_inputs).to(self.device).eval()
        self.resident = self._allocated() - before
        return {"device": self.device, "flags": self.state_flags(),
                "extension_failures": list(extension_failures.FAILED)}

    def warm_up(self, body: dict[str, Any]) -> dict[str, Any]:
        """The first call, its values unchecked (``judge._warm_up``): lazy compilation happens here, under the
        compile timeout. Its output is an earlier call's for the replay checks (buffer and digest). Its
        inputs and allocations look like a trial's (guarded views, poisoned blocks, filled fresh memory), so
        a candidate that notes how its first call looks learns nothing that tells later calls apart."""
        g = guards.Guarded(runtime.to_device(list(body["inputs"]), self.device))
        guards.poison(list(body.get("poison", [])), self.device)
        t0 = time.perf_counter()
        with guards.filled_malloc(not self.device.startswith("cuda")):
            out = self._call(g.inputs)
        runtime.sync(self.device)
        call_ms = (time.perf_counter() - t0) * 1e3
        lazy = guards.lazy_outputs(out)
        if not lazy:
            self.last_output = out
            self.held.append(out)
        return {"call_ms": call_ms, "flags": self.state_flags(), "fingerprint": None if lazy else digests.fingerprint(out)}

    def _call(self, inputs: list[Any]) -> Any:
        assert self.model is not None
        with torch.no_grad():
            return self.model(*inputs)

    def run(self, body: dict[str, Any]) -> dict[str, Any]:
        """One correctness call under every guard; its outputs are kept for ``output``.

        On CUDA the caller's stream is held (``RACE_HOLD_CYCLES``) before the inputs are written and
        the call is queued: a side stream that does not wait for the caller's stream runs during the
        hold, reading inputs not yet written, and the harness's writes queued behind the hold (inputs,
        poisoned blocks) land on its output afterwards (``_raced`` names that STREAM_ESCAPE); one that
        waits starts together with the harness's after-return copy of the outputs; and work still
        running elsewhere once the caller's stream has finished is named by the device-wide
        synchronize that follows (``STREAM_PENDING_MS``).
        """
        self.poison_sizes = list(body.get("poison", []))
        # An output replayed from an earlier call is still named by its digest (``judge.replayed``), and a buffer
        # returned twice in a row by the one output always kept.
        memory.let_go(self.held, 2 * sum(self.poison_sizes), self.device, keep=1)
        g = self._place(body, writes_held=True)
        threads, children = guards.python_threads(), guards.child_pids()
        cpu = not self.device.startswith("cuda")
        before = self._allocated()
        if not cpu:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with guards.filled_malloc(cpu):
            out = self._call(g.inputs)
        flags = []
        lazy = guards.lazy_outputs(out)
        snap = None if lazy else guards.snapshot(out)
        pending = timed_loop.stream_tail_ms(self.device) - self.idle_sync if not cpu else 0.0
        runtime.sync(self.device)
        call_ms = (time.perf_counter() - t0) * 1e3
        if not cpu:
            inputs = sum(t.numel() * t.element_size() for t in guards.tensors(g.inputs))
            peak = self.resident + inputs + torch.cuda.max_memory_allocated() - before
            self.peak = max(self.peak or 0, peak)
        left = guards.leftovers(threads, children)
        if lazy:
            flags.append(flag("LAZY_OUTPUT", lazy))
        elif left:
            flags.append(flag("DEFERRED_WORK", left))
        elif not guards.settled(snap, out, threads):
            code = "STREAM_ESCAPE" if self.device.startswith("cuda") else "DEFERRED_WORK"
            flags.append(flag(code, "the output read right after return differs from the output after a device-wide sync"))
        elif pending > STREAM_PENDING_MS:  # one slow synchronize: the trial repeats the call (``trials.run_call``)
            flags.append({**flag("STREAM_ESCAPE", f"work on another stream ran {pending:.3g} ms past the end of "
                                 "everything queued on the caller's stream (the call and the copy of its outputs)"),
                          "statistical": True})
        if not lazy:
            replayed = guards.reused([out], self.held)
            if replayed:
                flags.append(flag("OUTPUT_REPLAY", replayed))
            self.last_output = out
            self.held.append(out)
            if guards.aliases(out, g.inputs):
                flags.append(flag("OUTPUT_ALIASES_INPUT", "an output shares storage with an input"))
            for code, why in (("INPUT_MUTATED", g.mutated()), ("OUT_OF_BOUNDS_WRITE", g.overrun())):
                if why:
                    flags.append(flag(code, why))
            poisoned = guards.poisoned_words(out)
            if poisoned and self._raced(body):
                flags.append(flag("STREAM_ESCAPE", f"{poisoned} output words still held the poison pattern after the "
                                  "call; re-run on the same inputs, the output was complete with the harness's writes "
                                  "(inputs, poisoned blocks) finished before the call and poisoned again with them "
                                  "queued behind the hold: it was written on a stream that does not wait for the "
                                  "caller's stream, and the harness's queued writes landed on it afterwards"))
            elif poisoned:
                flags.append(flag("UNINITIALIZED_OUTPUT", f"{poisoned} output words still hold the poison pattern"))
        flags += self.state_flags()
        return {"call_ms": call_ms, "flags": flags, "fingerprint": None if lazy else digests.fingerprint(out)}

    def _place(self, body: dict[str, Any], writes_held: bool) -> guards.Guarded:
        """A correctness call's inputs (in guarded slots) and poisoned blocks, then the hold the call queues behind.

        ``writes_held``: the writes are queued on the caller's stream behind the hold, as in every trial;
        otherwise they are written and synchronised before it (``_raced``'s diagnostic).
        """
        staged = runtime.to_device(list(body["inputs"]), self.device)  # a host copy waits for its stream: before
        if writes_held:
            timed_loop.hold(self.device, RACE_HOLD_CYCLES)
        g = guards.Guarded(staged)
        # Freed before the poison, which then takes their blocks too: freed after it, a staged input's block
        # (lower in memory) was what an output allocated next got, holding input values, not the poison.
        del staged
        guards.poison(self.poison_sizes, self.device)
        if not writes_held:
            runtime.sync(self.device)
            timed_loop.hold(self.device, RACE_HOLD_CYCLES)
        return g

    def _rerun(self, body: dict[str, Any], writes_held: bool) -> Any:
        """The call again on ``body``'s inputs, placed as ``_place`` says; its outputs once the device is idle."""
        g = self._place(body, writes_held)
        out = self._call(g.inputs)
        runtime.sync(self.device)
        return out

    def _raced(self, body: dict[str, Any]) -> bool:
        """Is a poisoned CUDA output a race with the caller's stream rather than an unwritten one?

        Re-runs the same inputs twice: with the harness's writes finished before the call (a kernel
        on an unordered stream then writes after them and its output is complete) and queued behind
        the hold again, as in the trial (poisoned again). Only the order of the harness's writes differs
        between the two, so work ordered behind the caller's stream (an unwritten output too) comes out
        the same in both. Run only once the output was found poisoned: the verdict is a rejection
        either way, so the re-runs tell the candidate nothing it could use.
        """
        if not self.device.startswith("cuda"):
            return False
        try:
            written_first = self._rerun(body, writes_held=False)  # kept: its blocks stay taken while the next runs
            held_again = self._rerun(body, writes_held=True)
        except BaseException:  # noqa: BLE001 - a diagnostic: whatever it raises leaves the verdict as it was
            return False
        complete = [not guards.lazy_outputs(out) and guards.poisoned_words(out) == 0
                    for out in (written_first, held_again)]
        return complete == [True, False]

    def prepare_timing(self, body: dict[str, Any]) -> None:
        # The trials' outputs were held to catch a replayed buffer among trials; timing checks its own calls.
        # Kept, a 6.4 GB task's four took the room its reference needed while timed (H200: OUT_OF_MEMORY).
        self.held.clear()
        self.last_output = None
        inputs = TimingInputs(runtime.to_device(list(body["inputs"]), self.device), self.device)
        self.loop = timed_loop.TimedLoop(self._call, inputs, self.poison_sizes)
        self.allowed = set(body.get("allowed", []))

    def capture(self, body: dict[str, Any]) -> dict[str, Any]:
        """Capture the timed loop as CUDA graphs; their outputs are checked like any timed call's."""
        assert self.loop is not None
        placements = self.loop.capture(*timed_loop.sizing(body))
        return {"flags": self.state_flags(), "placements": placements}

    def place(self, body: dict[str, Any]) -> dict[str, Any]:
        """Set up the eager placements (untimed passes); flags raised meanwhile fail the candidate."""
        assert self.loop is not None
        placements = self.loop.place(*timed_loop.sizing(body))
        return {"flags": self.state_flags(), "placements": placements}

    def time(self, body: dict[str, Any]) -> dict[str, Any]:
        """One timed sample; its outputs are checked by ``digests``, a request of its own, so the harness's
        checks stay out of the controller's wall clock around this one (``timing`` compares the two)."""
        assert self.loop is not None and self.flush is not None
        sample, self.timed_outputs = timed_loop.timed_sample(self.loop, int(body["seed"]), int(body["calls"]),
                                                             self.device, self.flush, self.idle_sync,
                                                             before=process_state.reset_persisting_l2,
                                                             graph=bool(body.get("graph")),
                                                             hold=bool(body.get("hold", True)))
        self.timed_graph = bool(sample["graph"])
        return sample

    def digests(self, _body: Any) -> dict[str, Any]:
        """The last sample's checks: flags and every call's output digest."""
        assert self.loop is not None
        outs, reply = self.timed_outputs, {}
        flags = []
        lazy = next((why for why in map(guards.lazy_outputs, outs) if why), None)
        if lazy:
            flags.append(flag("LAZY_OUTPUT", lazy))
        else:
            aliasing_allowed = "OUTPUT_ALIASES_INPUT" in self.allowed
            flags += [flag(code, detail) for code, detail in self.loop.inspect(outs, self.timed_graph, aliasing_allowed)]
            reply["fingerprints"] = digests.fingerprints(outs)
        self.last_output = outs[-1]
        reply["flags"] = flags + self.state_flags()
        return reply

    def elements(self, body: dict[str, Any]) -> list[torch.Tensor]:
        """Elements of every call of the last sample, at positions the controller drew after it ran."""
        picked = digests.sampled_elements(self.timed_outputs, int(body["seed"]), int(body["count"]))
        self.timed_outputs = []
        return picked

    def output(self, _body: Any) -> Any:
        """The last call's outputs: the controller relays them to the reference worker to be checked."""
        return self.last_output

    def _allocated(self) -> int:
        return torch.cuda.memory_allocated() if self.device.startswith("cuda") else 0

    def memory(self, _body: Any) -> dict[str, int]:
        """What this worker holds and, of that, the harness's timing buffers (for an OUT_OF_MEMORY message;
        reported by this untrusted process, so only shown, never decided on)."""
        return memory.memory_held(self.loop, self.device)

    def peak_memory(self, _body: Any) -> int | None:
        """The most device memory one correctness call needed: the model, its inputs and what the call
        allocated at its peak (torch's allocator only). Not taken during timing, whose input sets,
        memory pools and graph captures are the harness's."""
        return self.peak

    def profile(self, _body: Any) -> list[str]:
        """Names of the GPU kernels one call launches, on every stream (torch profiler)."""
        if not self.device.startswith("cuda"):
            return []
        from torch.profiler import ProfilerActivity, profile

        assert self.loop is not None
        inputs = self.loop.inputs.fixed(1, 1)[0]
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            self._call(inputs)
            runtime.sync(self.device)
        names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
        return sorted(set(names))


def main() -> None:
    runtime.float32_numerics()
    build_locks.install()
    extension_failures.install()
    if sys.argv[1] == "--compile-only":
        compile_only(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
        return
    worker = CandidateWorker()
    runtime.serve({
        "ready": worker.ready,
        "load": worker.load,
        "build": worker.build,
        "warm_up": worker.warm_up,
        "run": worker.run,
        "prepare_timing": worker.prepare_timing,
        "capture": worker.capture,
        "place": worker.place,
        "time": worker.time,
        "digests": worker.digests,
        "output": worker.output,
        "elements": worker.elements,
        "peak_memory": worker.peak_memory,
        "memory": worker.memory,
        "profile": worker.profile,
    }, map_files=True)


if __name__ == "__main__":
    main()
