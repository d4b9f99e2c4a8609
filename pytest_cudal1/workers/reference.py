"""The trusted reference worker: no candidate code ever runs in this process.

It executes the task source in a namespace of its own, builds ``Model`` from
``get_init_inputs()`` under the run's seed, draws inputs from recipes, computes
reference outputs in float64 (and in the task's own dtype, whose error against
float64 calibrates the tolerance), and times the reference.
"""

from __future__ import annotations

import copy
import types
from typing import Any

import torch

from pytest_cudal1.recipes import Recipe, draw_inputs
from pytest_cudal1.workers import guards, runtime


class ReferenceWorker:
    def __init__(self) -> None:
        self.device = runtime.pick_device()
        self.module: types.ModuleType | None = None
        self.model: torch.nn.Module | None = None
        self.model64: torch.nn.Module | None = None
        self.timing_base: list[Any] = []
        self.last_output: Any = None
        self.flush = runtime.Flusher(self.device)

    def load(self, body: dict[str, Any]) -> dict[str, Any]:
        module = types.ModuleType("cudal1_reference_task")
        exec(compile(body["source"], body["origin"], "exec"), module.__dict__)  # noqa: S102 - trusted task source
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not callable(getattr(module, name, None)):
                raise TypeError(f"task defines no callable {name}")
        self.module = module
        torch.manual_seed(int(body["seed"]))
        init_inputs = list(module.get_init_inputs())
        torch.manual_seed(int(body["seed"]))
        self.model = module.Model(*init_inputs).to(self.device).eval()
        try:
            self.model64 = copy.deepcopy(self.model).double()
        except Exception:  # noqa: BLE001 - some modules cannot be cast; fall back to native dtype
            self.model64 = None
        return {"init_inputs": init_inputs, "device": self.device}

    def _forward(self, model: torch.nn.Module, inputs: list[Any]) -> Any:
        with torch.no_grad():
            out = model(*inputs)
        runtime.sync(self.device)
        return out

    def trial(self, body: dict[str, Any]) -> dict[str, Any]:
        """Inputs for one correctness trial and the reference outputs for them."""
        assert self.module is not None and self.model is not None
        recipe = Recipe(**body["recipe"])
        inputs = draw_inputs(self.module.get_inputs, recipe)
        guarded = guards.Guarded(runtime.to_device(inputs, self.device))
        native = self._forward(self.model, guarded.inputs)
        on_dev = guarded.originals
        expected, precise = native, False
        if self.model64 is not None:
            try:
                expected = self._forward(self.model64, [_to64(x) for x in on_dev])
                precise = True
            except Exception:  # noqa: BLE001 - ops without float64 support: compare in native dtype
                expected = native
        return {"inputs": inputs, "expected": expected, "native": native, "float64": precise,
                "aliases_input": guards.aliases(native, guarded.inputs), "mutates_input": guarded.mutated() is not None}

    def prepare_timing(self, body: dict[str, Any]) -> dict[str, Any]:
        """Keep the task's own inputs on the device as the base every timed call perturbs."""
        assert self.module is not None
        torch.manual_seed(int(body["seed"]))
        self.timing_base = runtime.to_device(list(self.module.get_inputs()), self.device)
        return {"inputs": [x.cpu() if isinstance(x, torch.Tensor) else x for x in self.timing_base]}

    def time(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        model = self.model

        def call(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return model(*inputs)

        sample, outs = runtime.timed_sample(
            call, self.timing_base, int(body["seed"]), int(body["calls"]), self.device, self.flush,
            before=guards.reset_persisting_l2)
        sample["fingerprints"] = [guards.fingerprint(o) for o in outs]
        self.last_output = outs[-1]
        return sample

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

    def output(self, _body: Any) -> Any:
        return self.last_output


def _to64(x: Any) -> Any:
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def main() -> None:
    worker = ReferenceWorker()
    runtime.serve({
        "load": worker.load,
        "trial": worker.trial,
        "prepare_timing": worker.prepare_timing,
        "time": worker.time,
        "output": worker.output,
        "bandwidth": worker.bandwidth,
    })


if __name__ == "__main__":
    main()
