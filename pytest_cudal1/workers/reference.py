"""The trusted reference worker: no candidate code ever runs in this process.

It executes the task source in a namespace of its own, builds ``Model`` from
``get_init_inputs()`` under the run's seed, draws inputs from recipes, computes
reference outputs in float64 (and in the task's own dtype, whose error against
float64 calibrates the tolerance), compares the candidate's outputs (relayed by
the controller) against them here, on its device, and times the reference.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import types
from typing import Any

import torch

from pytest_cudal1.compare import REFILL_GAIN, absolute_rounding, compare, relative_rounding, within_bounds
from pytest_cudal1.recipes import Recipe, draw_inputs
from pytest_cudal1.workers import digests, guards, memory, process_state, runtime, timed_loop
from pytest_cudal1.workers.timing_inputs import TimingInputs
from pytest_cudal1.workers.trial_cache import TrialCache, bound_from_env

# Draws of the task's own inputs the reference's rounding is measured on before the first trial.
ROUNDING_DRAWS = 2
# Two calls on the same inputs differing by more than this (relative to the output's largest element) mean
# the task keeps state between calls: far below an RNN step.
HISTORY_CHANGE = 1e-3
ROUNDING_MARGIN = 10  # ... and by more than this many times the reference's own largest rounding


class ReferenceWorker:
    def __init__(self) -> None:
        self.device = runtime.pick_device()
        self.warm = runtime.WarmStart(self.device)
        self.warm.cpu()
        self.module: types.ModuleType | None = None
        self.model: torch.nn.Module | None = None
        self.model64: torch.nn.Module | None = None
        self.loop: timed_loop.TimedLoop | None = None
        self.theirs: TimingInputs | None = None  # the candidate's timed inputs, which this worker refills
        self.retired: list[TimingInputs] = []  # an earlier candidate's, let go when its worker has exited (``trial``)
        self.filled = (0, -1)  # the (seed, turn) of the last refill of this worker's own inputs (``fill``)
        self.last_output: Any = None
        self.last_call = (0, 0)  # (seed, index) of ``last_output``'s call in its timed sample
        self.call_roundings: dict[tuple[int, int], dict[str, float] | None] = {}  # the last sample's, by (seed, call)
        self.timed_outputs: list[Any] = []  # the last timed sample's outputs, for ``digests``
        self.flush: timed_loop.Flusher | None = None  # made with the CUDA context (``to_device``)
        self.idle_sync: float | None = None  # measured by ``load``, or for a load made ahead by ``probe``
        self.seed = 0  # the run's seed, for the calibration that ``to_device`` runs
        self.placed = False  # the model is on the device and the rounding calibrated
        self.ahead = False  # loaded while another item was judged: the idle synchronize is left for ``probe``
        self.trial_inputs: list[Any] = []
        self.expected: Any = None
        self.native: Any = None
        self.rounding = 0.0  # the reference's relative rounding, largest seen (``compare.relative_rounding``)
        self.abs_rounding = 0.0  # and its absolute rounding (``compare.absolute_rounding``)
        self.timed_graph = False
        self.poison_sizes: list[int] = []  # output sizes, poisoned before eager timed samples as in the candidate
        self.init_inputs: list[Any] = []
        self.model_bytes = 0
        # The most one native call needed beyond its inputs: the model and the call's own allocations
        # (CUDA: torch's peak; CPU: its outputs). Twice this is left free for the candidate while timing.
        self.call_peak = 0
        self.cache: TrialCache[_Trial] = TrialCache(bound_from_env())  # computed trials, for the next candidates

    @property
    def rounding_floor(self) -> float:
        """The absolute slack's base for every check (``compare.rounding_slack``): the reference's largest
        absolute rounding, grown by what the timed refills can add."""
        return REFILL_GAIN * self.abs_rounding

    def ready(self, _body: Any) -> dict[str, Any]:
        """Answered once the warm start is done (``runtime.WarmStart``): what it did."""
        return self.warm.reply()

    def load(self, body: dict[str, Any]) -> dict[str, Any]:
        """Run the task source, build ``Model`` and its float64 copy, and (not ``ahead``) ``to_device``.

        ``ahead``: loaded while another item is judged (``ReferencePool.prefetch``), so only the part that
        touches no GPU runs now (the task's source, ``Model`` built on the CPU, its float64 copy). The rest
        waits for ``to_device``, asked for once that item is no longer timed, or for ``probe``.
        """
        module = types.ModuleType("cudal1_reference_task")
        exec(compile(body["source"], body["origin"], "exec"), module.__dict__)  # noqa: S102 - trusted task source
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not callable(getattr(module, name, None)):
                raise TypeError(f"task defines no callable {name}")
        self.module, self.seed, self.ahead = module, int(body["seed"]), bool(body.get("ahead"))
        torch.manual_seed(self.seed)
        init_inputs = list(module.get_init_inputs())
        torch.manual_seed(self.seed)
        self.model = module.Model(*init_inputs).eval()  # built on the CPU, moved by ``to_device``
        self.init_inputs = init_inputs
        self.model_bytes = sum(t.numel() * t.element_size() for t in [*self.model.parameters(), *self.model.buffers()])
        self.model64 = _float64_twin(module, init_inputs, self.seed, self.model)
        if not self.ahead:
            self.to_device(None)
        return {"init_inputs": init_inputs, "device": self.device, "placed": self.placed,
                "cuda_initialized": torch.cuda.is_initialized()}

    def to_device(self, _body: Any) -> dict[str, Any]:
        """The loaded task's device part: the CUDA context, both models moved there, the rounding calibrated."""
        assert self.model is not None
        if self.placed:
            return self.warm.reply()
        self.warm.device_context()
        self.flush = timed_loop.Flusher(self.device)
        if not self.ahead:  # measured now: it may be the first worker, or start while others use the GPU
            self.idle_sync = timed_loop.idle_sync_ms(self.device)
        self.model = self.model.to(self.device)
        if self.model64 is not None:
            self.model64 = self.model64.to(self.device)
        self._calibrate(self.seed)
        if self.device.startswith("cuda"):
            # The calibration's blocks stay cached in this allocator otherwise, which the device does not count as
            # free: ``probe`` then found 6.4 GB-input tasks "needing 51.5 GB of the 33.4 GB free" on an idle H200,
            # and a spare loaded ahead would hold them through the current item.
            torch.cuda.empty_cache()
        self.placed = True
        return self.warm.reply()

    def _calibrate(self, seed: int) -> None:
        """Measure the reference's rounding on a few draws of the task's own inputs before any trial.

        One draw is not a measure of it where the output is rounding noise (a mean over a normalised
        axis): the noise's largest element varies between draws. A task that fails here fails its trial.
        """
        assert self.module is not None
        for k in range(ROUNDING_DRAWS):
            try:
                inputs = draw_inputs(self.module.get_inputs, Recipe(seed=seed ^ (0xCA11 + k)), self.device)
                originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]  # a mutating forward
                native, expected, _ = self._reference(inputs, originals)
            except Exception:  # noqa: BLE001 - named by the trial that meets it
                return
            self.rounding = max(self.rounding, relative_rounding(native, expected))
            self.abs_rounding = max(self.abs_rounding, absolute_rounding(native, expected))

    def _forward(self, model: torch.nn.Module, inputs: list[Any]) -> Any:
        with torch.no_grad():
            out = model(*inputs)
        runtime.sync(self.device)
        return out

    def trial(self, body: dict[str, Any]) -> dict[str, Any]:
        """Draw one correctness trial's inputs and compute the reference outputs; they stay here.

        Returns what the controller decides with: the reference's digest (for replay detection),
        output sizes (to poison), whether the reference itself aliases or mutates inputs, and
        whether it produced NaN/Inf (a drawn family that breaks the task is rejected).
        ``reuse``: a recipe computed before is served from ``self.cache`` (``cached`` says so),
        and one computed now is kept there.
        """
        recipe = Recipe(**body["recipe"])
        reuse = bool(body.get("reuse"))
        self._let_go_retired()
        self._drop_trial()  # the last trial's tensors, before this one's: the reference's peak is one trial
        kept = self.cache.get(recipe) if reuse else None
        done = self._computed(recipe) if kept is None else _moved_trial(kept, self.device)
        if reuse and kept is None and self.cache.fits(done.nbytes):
            host = _moved_trial(done, "cpu") if self.device.startswith("cuda") else done
            self.cache.put(recipe, host, done.nbytes)
        # Running maxima: taking a kept trial's own rounding again leaves them as a recomputation would.
        self.rounding = max(self.rounding, done.rounding)
        self.abs_rounding = max(self.abs_rounding, done.abs_rounding)
        self.trial_inputs, self.expected, self.native = done.originals, done.expected, done.native
        self.poison_sizes = list(done.reply["output_nbytes"])
        return {**done.reply, "rounding": self.rounding, "rounding_floor": self.rounding_floor,
                "cached": kept is not None}

    def _computed(self, recipe: Recipe) -> "_Trial":
        """One trial computed: its inputs drawn, both reference outputs, and the reply's facts."""
        assert self.module is not None and self.model is not None
        guarded = guards.Guarded(draw_inputs(self.module.get_inputs, recipe, self.device))
        native = self._native(guarded.inputs)
        outs = list(guards.tensors(native))
        reply = {"aliases_input": guards.aliases(native, guarded.inputs),
                 "mutates_input": guarded.mutated() is not None, "fingerprint": digests.fingerprint(native),
                 "output_nbytes": [t.numel() * t.element_size() for t in outs],
                 "nonfinite": any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in outs)}
        originals = guarded.originals
        del guarded  # the guarded slots, before the float64 copies are made: the trial's peak is the smaller
        expected, reply["float64"] = self._precise(native, originals)
        done = _Trial(originals, expected, native, relative_rounding(native, expected),
                      absolute_rounding(native, expected), reply)
        if self.device.startswith("cuda"):
            # The guard buffers and float64 temporaries stay cached otherwise: on a 6.4 GB-input task the
            # reference held 104-137 GB through the candidate's warm-up, which then ran out of memory (H200).
            torch.cuda.empty_cache()
        return done

    def _reference(self, inputs: list[Any], originals: list[Any]) -> tuple[Any, Any, bool]:
        """(native output, float64 output, whether float64 ran) on ``inputs`` (float64 from ``originals``)."""
        native = self._native(inputs)
        return (native, *self._precise(native, originals))

    def _native(self, inputs: list[Any]) -> Any:
        """The task's own output on ``inputs``; the most memory such a call took is kept (``call_peak``)."""
        assert self.model is not None
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        before = _allocated(self.device)
        native = self._forward(self.model, inputs)
        call_bytes = (torch.cuda.max_memory_allocated() - before if self.device.startswith("cuda")
                      else sum(t.numel() * t.element_size() for t in guards.tensors(native)))
        self.call_peak = max(self.call_peak, self.model_bytes + call_bytes)
        return native

    def _precise(self, native: Any, originals: list[Any]) -> tuple[Any, bool]:
        """(the float64 output on ``originals``, True), or (``native``, False) where float64 cannot run."""
        if self.model64 is not None:
            try:
                return self._forward(self.model64, [_to64(x) for x in originals]), True
            except Exception:  # noqa: BLE001 - ops without float64 support: compare in native dtype
                pass
        return native, False

    def probe(self, body: dict[str, Any]) -> dict[str, Any]:
        """Can the reference run here, and what does it need? Asked once per loaded task, before any
        candidate of it runs, so nothing a candidate holds can make the reference look too large.

        The need is estimated from the task's input and output sizes, drawn on the meta device (no
        memory): the first trial holds the inputs ``NEED_PER_INPUT_BYTE`` times and the outputs
        ``NEED_PER_OUTPUT_BYTE`` times. When that fits the free memory, the task's own first trial
        runs here, alone; running out of memory in it also means the reference cannot run here.
        The trial's tensors are freed afterwards. A load made ahead left the idle synchronize for here, and
        its device part, where the controller did not ask for it earlier.
        """
        steps = _Steps()
        self.to_device(None)
        steps("to_device")
        if self.idle_sync is None:
            self.idle_sync = timed_loop.idle_sync_ms(self.device)
        steps("idle_sync")
        input_bytes, output_bytes = self._meta_sizes()
        steps("sizing")
        need = NEED_PER_INPUT_BYTE * input_bytes + NEED_PER_OUTPUT_BYTE * output_bytes
        available = memory.free_bytes(self.device)
        facts = {"need_bytes": need, "input_bytes": input_bytes, "output_bytes": output_bytes,
                 "available_bytes": available, "device": self.device, "fits": True, "oom": "",
                 "stateful": False, "history_change": 0.0}
        if available and need > available:
            return {**facts, "fits": False, "call_peak_bytes": 0, "seconds": steps.seconds}
        try:
            self.trial(body)
            steps("trial")
            facts["history_change"] = self._history_change()
            facts["stateful"] = facts["history_change"] > HISTORY_CHANGE
            steps("history")
        except BaseException as exc:  # noqa: BLE001 - only running out of memory is an answer here
            if runtime.classify(exc) != "oom":
                raise
            facts.update(fits=False, oom=f"{type(exc).__name__}: {str(exc)[:600]}")
        finally:
            self._drop_trial()
        steps("drop")
        return {**facts, "call_peak_bytes": self.call_peak, "seconds": steps.seconds}

    def _history_change(self) -> float:
        """How much two calls on the last trial's inputs, one right after the other, differ: the largest
        difference relative to the output's largest element (1.0 where integer outputs differ at all).

        A task that keeps state between calls answers the same inputs differently every time. KernelBench's
        L3/33 and L3/34 carry an RNN's hidden state in ``self.hidden``. No candidate can match such a task
        call by call, not even the task's own Model (0.36 relative error, judged on the CPU): this worker
        makes calls the candidate does not (rounding draws, this probe), and one reference serves several
        candidates.
        The trial's outputs are dropped first, so the probe's peak stays the trial's own.
        """
        inputs, self.native, self.expected = self.trial_inputs, None, None
        outs = []
        for _ in range(2):
            torch.manual_seed(self.seed)  # a forward that draws random numbers draws the same ones both times
            outs.append(list(guards.tensors(self._native([x.clone() if isinstance(x, torch.Tensor) else x
                                                          for x in inputs]))))
        change = 0.0
        for a, b in zip(*outs):
            if a.shape != b.shape or not a.is_floating_point():
                change = max(change, float(a.shape != b.shape or not torch.equal(a, b)))
            elif a.numel():
                diff = float((a - b).abs().max())
                if diff > ROUNDING_MARGIN * self.abs_rounding:  # not a reduction's order (noise outputs: L2/23)
                    change = max(change, diff / (float(a.abs().max()) or 1.0))
        return change

    def _meta_sizes(self) -> tuple[int, int]:
        """Bytes of the task's inputs and of one call's outputs, on the meta device (nothing is allocated);
        outputs as large as the inputs when the model cannot run there, (0, 0) when the inputs cannot."""
        assert self.module is not None
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            try:
                with torch.device("meta"):
                    inputs = list(self.module.get_inputs())
            except Exception:  # noqa: BLE001 - e.g. numpy inside get_inputs: no estimate
                return 0, 0
            input_bytes = sum(t.numel() * t.element_size() for t in guards.tensors(inputs))
            try:
                with torch.device("meta"):
                    model = self.module.Model(*self.init_inputs).eval()
                    outputs = model(*inputs)
                return input_bytes, sum(t.numel() * t.element_size() for t in guards.tensors(outputs))
            except Exception:  # noqa: BLE001 - an op without a meta kernel
                return input_bytes, input_bytes

    def _let_go_retired(self) -> None:
        """The earlier candidates' timed inputs: their workers were reaped before this candidate's trials."""
        for theirs in self.retired:
            theirs.release()
        if self.retired and self.device.startswith("cuda"):
            torch.cuda.ipc_collect()
        self.retired = []

    def _drop_trial(self) -> None:
        """Free the last trial's tensors (its inputs and both reference outputs)."""
        self.trial_inputs, self.expected, self.native = [], None, None
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def memory(self, _body: Any) -> dict[str, int]:
        """What this worker holds now, and its timing buffers (for an OUT_OF_MEMORY message): the candidate's
        timed inputs are among them, made here."""
        held = memory.memory_held(self.loop, self.device)
        held["timing_bytes"] += self.theirs.owned_bytes() if self.theirs is not None else 0
        return held

    def inputs(self, _body: Any) -> list[Any]:
        """The last trial's inputs, for the controller to relay to the candidate."""
        return self.trial_inputs

    def check(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Compare a candidate's outputs (relayed by the controller) here, on the reference's device.

        ``against``: ``trial`` (float64 reference of the last trial) or ``timed`` (the last timed
        call's output in the task's dtype). Both grant the reference's rounding (``compare``).
        """
        outputs = _on_device(body["outputs"], self.device)
        if body["against"] == "trial":
            return _verdict(compare(outputs, self.expected, self.native, rounding=self.rounding,
                                    floor=self.rounding_floor))
        return _verdict(self._compare_timed(outputs, self.last_output, "timed output", *self.last_call))

    def check_elements(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Compare the candidate's elements of every call of the last timed sample (drawn from ``sample_seed``)
        with the reference's at the same positions (``digests.sampled_elements``), under the same rounding
        model: a call that fails under the trials' rounding is compared again under its own (``call_rounding``)."""
        outs, self.timed_outputs = self.timed_outputs, []
        own = digests.sampled_elements(outs, int(body["seed"]), int(body["count"]))
        if within_bounds(body["outputs"], own, self.rounding, self.rounding_floor):
            return None
        per_call = [len(list(guards.tensors(out))) for out in outs]
        theirs = _on_device(body["outputs"], self.device)
        bad = compare(theirs, own, None, "timed elements", rounding=self.rounding, floor=self.rounding_floor)
        if bad is None or len(theirs) != len(own):
            return _verdict(bad)
        start = 0
        for k, n in enumerate(per_call):  # which call failed, under its own rounding
            bad = self._compare_timed(theirs[start:start + n], own[start:start + n], f"timed call {k}, elements",
                                      int(body["sample_seed"]), k)
            if bad is not None:
                return _verdict(bad)
            start += n
        return None

    def _compare_timed(self, theirs: Any, mine: Any, where: str, seed: int, call: int) -> Any:
        """``compare`` of (part of) a timed call's output under the trials' rounding, and where that fails, once more
        under the call's own (``call_rounding``)."""
        bad = compare(theirs, mine, None, where, rounding=self.rounding, floor=self.rounding_floor)
        own = None if bad is None else self.call_rounding({"seed": seed, "call": call})
        return bad if own is None else compare(theirs, mine, None, where, **own)

    def call_rounding(self, body: dict[str, Any]) -> dict[str, float] | None:
        """The rounding a timed call's check grants, taken on that call's own inputs (call ``call`` of the sample
        drawn from ``seed``) as well as the trials': asked for a call that failed under the trials' alone.

        The trials may never draw what these inputs bring out. On an H100, KernelBench L2/9 (a ReLU after a
        subtraction) had every trial's output clipped to zero, so no rounding was measured, and a timed call's one
        positive element was cancellation noise, two float32 steps from an honest candidate's. None where the
        recomputation cannot run here (its memory). Kept for the sample: its digests, elements and whole-output
        audit may each ask for the same call."""
        key = (int(body["seed"]), int(body["call"]))
        if key not in self.call_roundings:
            self.call_roundings[key] = self._measured_rounding(*key)
        return self.call_roundings[key]

    def _measured_rounding(self, seed: int, call: int) -> dict[str, float] | None:
        assert self.loop is not None
        try:
            inputs = self.loop.inputs.values(seed, call)
            native, expected, _ = self._reference(inputs, [x.clone() if isinstance(x, torch.Tensor) else x
                                                           for x in inputs])
        except Exception as exc:  # noqa: BLE001 - out of memory beside the timing buffers: the trials' rounding stands
            if runtime.classify(exc) != "oom":
                raise
            return None
        finally:
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
        return {"rounding": max(self.rounding, relative_rounding(native, expected)),
                "floor": max(self.rounding_floor, absolute_rounding(native, expected))}

    def prepare_timing(self, body: dict[str, Any]) -> dict[str, Any]:
        """Keep the task's own inputs on the device as the base every timed call perturbs.

        The last trial's tensors are freed first: the harness shrinks its own buffers before the
        candidate's timing needs memory."""
        assert self.module is not None
        self._drop_trial()
        torch.manual_seed(int(body["seed"]))
        base = draw_inputs(self.module.get_inputs, None, self.device)
        inputs = TimingInputs(base, self.device)
        self.loop = timed_loop.TimedLoop(self._timed_call, inputs, self.poison_sizes, checked=False)
        self.theirs = inputs.twin()
        return {"input_nbytes": sum(t.numel() * t.element_size() for t in guards.tensors(base))}

    def release_timing(self, _body: Any) -> None:
        """Drop the timing buffers (placements, graph captures) and hand cached device memory back:
        the worker is kept for the task's next candidate, whose trials should not compete with them."""
        if self.theirs is not None:  # its candidate's worker still maps them
            self.retired.append(self.theirs)
        self.loop, self.theirs, self.last_output, self.timed_outputs = None, None, None, []
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def timing_base(self, _body: Any) -> list[Any]:
        """The base of the timed inputs, for the controller to relay to the candidate."""
        assert self.loop is not None
        return self.loop.inputs.base

    def _timed_call(self, inputs: list[Any]) -> Any:
        assert self.model is not None
        with torch.no_grad():
            return self.model(*inputs)

    def capture(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.loop is not None
        return self._shared(self.loop.capture(*timed_loop.sizing(body)), int(body["calls"]))

    def place(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.loop is not None
        return self._shared(self.loop.place(*timed_loop.sizing(body)), int(body["calls"]))

    def _shared(self, placements: int, calls: int) -> dict[str, Any]:
        """Input sets for as many of the candidate's placements, holding what this worker's own hold (the values its
        untimed passes read), and the handles of those the candidate has not mapped yet."""
        assert self.loop is not None and self.theirs is not None
        handles = self.theirs.mirror(self.loop.inputs, placements * calls, 0, 0)
        runtime.sync(self.device)
        self.filled = (0, -1)  # the passes refilled this worker's sets
        return {"placements": placements, "shared": handles}

    def fill(self, body: dict[str, Any]) -> None:
        """Refill the inputs of the ``side`` worker's next sample (of ``turn``): this worker's own, or a copy of them
        in the candidate's shared sets (its capture or placement ``turn`` modulo its own number, ``theirs``).
        Each side's right before its sample, so the candidate cannot read its inputs early; the two sides of a
        pair get the same values, drawn once. Finished before the reply: the sample's request finds them written."""
        assert self.loop is not None and self.theirs is not None
        seed, turn, calls = int(body["seed"]), int(body["turn"]), int(body["calls"])
        first = self.loop.block(turn, calls, bool(body.get("graph"))) * calls
        if self.filled != (seed, turn):
            self.loop.inputs.fixed(seed, calls, first=first)
            self.filled = (seed, turn)
        if body["side"] == "candidate":
            blocks = max(1, min(int(body["theirs"]), len(self.theirs.sets) // calls))
            self.theirs.mirror(self.loop.inputs, calls, first, (turn % blocks) * calls)
        runtime.sync(self.device)

    def set_up(self, body: dict[str, Any]) -> None:
        """Set up the next sample (``TimedLoop.set_up``), its inputs refilled already."""
        assert self.loop is not None
        self.loop.set_up(int(body["turn"]), int(body["calls"]), bool(body.get("graph")))

    def time(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.loop is not None and self.flush is not None
        # The last sample's outputs were checked before this one was asked for: only ``loop.held`` keeps them now,
        # and lets them go when the device is short (``TimedLoop.checked``).
        self.last_output, self.timed_outputs, self.call_roundings = None, [], {}
        sample, outs = timed_loop.timed_sample(self.loop, int(body["turn"]), int(body["calls"]), self.device, self.flush,
                                               self.idle_sync, before=process_state.reset_persisting_l2,
                                               graph=bool(body.get("graph")), hold=bool(body.get("hold", True)))
        self.timed_outputs, self.timed_graph = outs, bool(sample["graph"])
        self.last_output, self.last_call = outs[-1], (self.filled[0], int(body["calls"]) - 1)
        return sample

    def time_idle(self, body: dict[str, Any]) -> dict[str, Any]:
        """A sample of nothing as long as the candidate's, a yardstick for its unreported time (``unreported``), in as
        many regions as its calls had (the ``call`` measure), each after what comes before a timed one."""
        assert self.flush is not None
        flush = self.flush
        return timed_loop.idle_sample(
            float(body["ms"]), bool(body.get("asleep")), int(body.get("regions", 1)),
            lambda: timed_loop.between_calls(process_state.reset_persisting_l2, flush, self.device))

    def digests(self, _body: Any) -> dict[str, Any]:
        """The last sample's output digests, a request of its own as in the candidate worker; the
        candidate's structural checks run here too, so both workers hold the same outputs alive."""
        assert self.loop is not None
        self.loop.inspect(self.timed_outputs, self.timed_graph, aliasing_allowed=True)
        return {"fingerprints": digests.fingerprints(self.timed_outputs), "rounding": self.rounding,
                "rounding_floor": self.rounding_floor}

    def bandwidth(self, _body: Any) -> float | None:
        """Measured device-to-device copy bandwidth in GB/s (bytes read + written), for the roofline floor."""
        if not self.device.startswith("cuda"):
            return None
        src = torch.empty(1 << 28, dtype=torch.float32, device=self.device).random_()
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        return 2 * src.numel() * 4 * 10 / (start.elapsed_time(end) / 1e3) / 1e9


@dataclasses.dataclass
class _Trial:
    """One computed trial: the inputs sent to the candidate, both reference outputs, their rounding."""

    originals: list[Any]
    expected: Any  # the float64 output; ``native`` itself where float64 could not run
    native: Any
    rounding: float  # ``compare.relative_rounding`` of this trial alone
    abs_rounding: float
    reply: dict[str, Any]  # what ``trial`` returns, less the running roundings

    @property
    def nbytes(self) -> int:
        outputs = [self.native] if self.expected is self.native else [self.native, self.expected]
        return sum(t.numel() * t.element_size() for t in guards.tensors([self.originals, *outputs]))


class _Steps:
    """Seconds of each step since the last, for the probe's reply: where a reference's start goes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.last, 4)
        self.last = now


def _moved_trial(done: _Trial, device: str) -> _Trial:
    """``done``'s tensors on ``device`` (kept trials wait on the host, so the candidate's timing has the GPU)."""
    native = _on_device(done.native, device)
    expected = native if done.expected is done.native else _on_device(done.expected, device)
    return dataclasses.replace(done, originals=_on_device(done.originals, device), expected=expected, native=native)


# The first trial holds the inputs five times (as drawn, inside guard buffers, their clone, and a float64
# copy at twice the bytes) and the outputs three times (task dtype, float64): the reference's own need.
NEED_PER_INPUT_BYTE = 5
NEED_PER_OUTPUT_BYTE = 3


def _allocated(device: str) -> int:
    return torch.cuda.memory_allocated() if device.startswith("cuda") else 0


def _on_device(value: Any, device: str) -> Any:
    """Decoded outputs moved to ``device`` for comparison, each keeping the device it was sent from.

    A floating-point output the device has no room for stays on the host: ``compare`` moves it over in blocks.
    Beside a 6.4 GB task's timing buffers and an honest CUDA-graph wrapper, an 80 GB H100 had 5.2 GB free
    when the reference worker moved the wrapper's 6.4 GB timed output over to check it (session 28)."""
    if isinstance(value, torch.Tensor):
        fits = (not device.startswith("cuda") or not value.is_floating_point()
                or memory.room_bytes(device) >= 2 * value.nbytes)
        moved = value.to(device) if fits else value
        moved.wire_device = getattr(value, "wire_device", str(value.device))  # type: ignore[attr-defined]
        return moved
    if isinstance(value, (list, tuple)):
        return type(value)(_on_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _on_device(v, device) for k, v in value.items()}
    return value


def _verdict(bad: Any) -> dict[str, Any] | None:
    return None if bad is None else {"reason": bad.reason.value, "message": bad.message, "evidence": bad.evidence}


def _float64_twin(module: types.ModuleType, init_inputs: list[Any], seed: int, model: torch.nn.Module) -> Any:
    """The task's Model in float64 with the same weights, or None where it cannot be cast.

    Built again from the same seed rather than deep-copied: a copy keeps closures over the original's layers.
    minGPT's block (KernelBench L3/44) defines ``self.mlpf = lambda x: m.c_proj(...)`` over its float32
    layers, so its float64 copy failed and the candidate was compared with the float32 reference. A second
    construction whose weights differ (randomness outside torch's generator) falls back to the copy.
    """
    try:
        torch.manual_seed(seed)
        twin = module.Model(*init_inputs).eval()
        theirs, ours = model.state_dict(), twin.state_dict()
        if theirs.keys() != ours.keys() or not all(torch.equal(theirs[k], ours[k]) for k in theirs):
            twin = copy.deepcopy(model)
        return twin.double()
    except Exception:  # noqa: BLE001 - some modules cannot be cast; compare in the native dtype
        return None


def _to64(x: Any) -> Any:
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def main() -> None:
    runtime.float32_numerics()
    worker = ReferenceWorker()
    runtime.serve({
        "ready": worker.ready,
        "load": worker.load,
        "to_device": worker.to_device,
        "trial": worker.trial,
        "probe": worker.probe,
        "memory": worker.memory,
        "inputs": worker.inputs,
        "check": worker.check,
        "check_elements": worker.check_elements,
        "call_rounding": worker.call_rounding,
        "prepare_timing": worker.prepare_timing,
        "timing_base": worker.timing_base,
        "capture": worker.capture,
        "fill": worker.fill,
        "place": worker.place,
        "set_up": worker.set_up,
        "time": worker.time,
        "time_idle": worker.time_idle,
        "digests": worker.digests,
        "release_timing": worker.release_timing,
        "bandwidth": worker.bandwidth,
    })


if __name__ == "__main__":
    main()
