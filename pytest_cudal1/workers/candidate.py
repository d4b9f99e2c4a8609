"""The untrusted candidate worker: imports one candidate and runs ModelNew on given inputs.

Everything it reports is data the controller checks: outputs against the
reference, times against the controller's own wall clock, and the flags of
``guards`` (raised by harness code bound before the candidate was imported).
It never sees reference outputs. ``--compile-only PATH NAME`` imports the
module and exits: that is how candidates are built ahead of judging
(``load_inline`` compiles at import).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any

import torch

from pytest_cudal1.workers import guards, runtime


def import_candidate(path: str, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def flag(code: str, detail: str) -> dict[str, str]:
    return {"code": code, "detail": detail}


class CandidateWorker:
    def __init__(self) -> None:
        self.device = runtime.pick_device()
        self.flush = runtime.Flusher(self.device)  # also initializes CUDA before the baseline below
        self.idle_sync = 0.0
        self.baseline = guards.settings()
        self.watch = guards.TamperWatch()
        self.module: Any = None
        self.model: torch.nn.Module | None = None
        self.loop: runtime.TimedLoop | None = None
        self.last_output: Any = None
        self.resident = 0  # device bytes the model holds (allocated while it was built)
        self.peak: int | None = None

    def state_flags(self) -> list[dict[str, str]]:
        flags = []
        tampered = self.watch.tampered()
        if tampered:
            flags.append(flag("JUDGE_TAMPERING", tampered))
        changes = guards.changed(self.baseline, guards.settings())
        if changes:
            flags.append(flag("GLOBAL_STATE_MODIFIED", "; ".join(changes[:6])))
        return flags

    def load(self, body: dict[str, Any]) -> dict[str, Any]:
        # Calibrated here, not at start-up: the worker may start while the previous item still runs on the
        # GPU; and before the import, so no candidate code can keep the GPU busy to inflate it.
        self.idle_sync = runtime.idle_sync_ms(self.device)
        t0 = time.perf_counter()
        self.module = import_candidate(body["path"], body["module_name"])
        return {"import_s": time.perf_counter() - t0,
                "has_modelnew": isinstance(getattr(self.module, "ModelNew", None), type),
                "flags": self.state_flags()}

    def build(self, body: dict[str, Any]) -> dict[str, Any]:
        torch.manual_seed(int(body["seed"]))
        init_inputs = list(body["init_inputs"])
        before = self._allocated()
        self.model = self.module.ModelNew(*init_inputs).to(self.device).eval()
        self.resident = self._allocated() - before
        return {"device": self.device, "flags": self.state_flags()}

    def _call(self, inputs: list[Any]) -> Any:
        assert self.model is not None
        with torch.no_grad():
            return self.model(*inputs)

    def run(self, body: dict[str, Any]) -> dict[str, Any]:
        """One correctness call under every guard; its outputs are kept for ``output``."""
        g = guards.Guarded(runtime.to_device(list(body["inputs"]), self.device))
        guards.poison(list(body.get("poison", [])), self.device)
        threads, children = guards.python_threads(), guards.child_pids()
        cpu = not self.device.startswith("cuda")
        guards.perturb_malloc(cpu)
        before = self._allocated()
        if not cpu:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            out = self._call(g.inputs)
        finally:
            guards.perturb_malloc(False)
        flags = []
        lazy = guards.lazy_outputs(out)
        snap = None if lazy else guards.snapshot(out)
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
        if not lazy:
            if self.last_output is not None and guards.storage_ptrs(out) & guards.storage_ptrs(self.last_output):
                flags.append(flag("OUTPUT_REPLAY", "the output buffer of an earlier call was returned again"))
            self.last_output = out
            if guards.aliases(out, g.inputs):
                flags.append(flag("OUTPUT_ALIASES_INPUT", "an output shares storage with an input"))
            for code, why in (("INPUT_MUTATED", g.mutated()), ("OUT_OF_BOUNDS_WRITE", g.overrun())):
                if why:
                    flags.append(flag(code, why))
            poisoned = guards.poisoned_words(out)
            if poisoned:
                flags.append(flag("UNINITIALIZED_OUTPUT", f"{poisoned} output words still hold the poison pattern"))
        flags += self.state_flags()
        return {"call_ms": call_ms, "flags": flags, "fingerprint": None if lazy else guards.fingerprint(out)}

    def prepare_timing(self, body: dict[str, Any]) -> None:
        inputs = runtime.TimingInputs(runtime.to_device(list(body["inputs"]), self.device), self.device)
        self.loop = runtime.TimedLoop(self._call, inputs)

    def capture(self, body: dict[str, Any]) -> dict[str, Any]:
        """Capture the timed loop as CUDA graphs; their outputs are checked like any timed call's."""
        assert self.loop is not None
        placements = self.loop.capture(*runtime.sizing(body))
        return {"flags": self.state_flags(), "placements": placements}

    def place(self, body: dict[str, Any]) -> dict[str, Any]:
        """Set up the eager placements (untimed passes); flags raised meanwhile fail the candidate."""
        assert self.loop is not None
        placements = self.loop.place(*runtime.sizing(body))
        return {"flags": self.state_flags(), "placements": placements}

    def time(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.loop is not None
        sample, outs = runtime.timed_sample(self.loop, int(body["seed"]), int(body["calls"]), self.device,
                                            self.flush, self.idle_sync, before=guards.reset_persisting_l2,
                                            graph=bool(body.get("graph")), hold=bool(body.get("hold", True)))
        flags = []
        lazy = next((why for why in map(guards.lazy_outputs, outs) if why), None)
        if lazy:
            flags.append(flag("LAZY_OUTPUT", lazy))
        else:
            # A graph writes the same buffers on every replay; within one sample the calls still need their own.
            earlier = self.last_output is not None and not sample["graph"]
            seen = guards.storage_ptrs(self.last_output) if earlier else set()
            for o in outs:
                ptrs = guards.storage_ptrs(o)
                if ptrs & seen:
                    flags.append(flag("OUTPUT_REPLAY", "the same output buffer was returned for two different calls"))
                    break
                seen |= ptrs
            sample["fingerprints"] = [guards.fingerprint(o) for o in outs]
        self.last_output = outs[-1]
        sample["flags"] = flags + self.state_flags()
        return sample

    def output(self, _body: Any) -> Any:
        """The last call's outputs: the controller relays them to the reference worker to be checked."""
        return self.last_output

    def _allocated(self) -> int:
        return torch.cuda.memory_allocated() if self.device.startswith("cuda") else 0

    def memory(self, _body: Any) -> dict[str, int]:
        """What this worker holds and, of that, the harness's timing buffers (for an OUT_OF_MEMORY message;
        reported by this untrusted process, so only shown, never decided on)."""
        return runtime.memory_held(self.loop, self.device)

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
    if sys.argv[1] == "--compile-only":
        import_candidate(sys.argv[2], sys.argv[3])
        return
    worker = CandidateWorker()
    runtime.serve({
        "load": worker.load,
        "build": worker.build,
        "run": worker.run,
        "prepare_timing": worker.prepare_timing,
        "capture": worker.capture,
        "place": worker.place,
        "time": worker.time,
        "output": worker.output,
        "peak_memory": worker.peak_memory,
        "memory": worker.memory,
        "profile": worker.profile,
    })


if __name__ == "__main__":
    main()
