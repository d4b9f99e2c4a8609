"""The untrusted candidate worker: imports one candidate and runs ModelNew on given inputs.

Everything it reports is data the controller checks: outputs against the
reference, times against the controller's own wall clock. It never sees the
reference outputs. ``--compile-only PATH`` imports the module and exits, which
is how candidates are built ahead of judging (compilation happens at import
for ``load_inline`` modules).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any

import torch

from pytest_cudal1.workers import runtime


def import_candidate(path: str, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


class CandidateWorker:
    def __init__(self) -> None:
        self.device = runtime.pick_device()
        self.module: Any = None
        self.model: torch.nn.Module | None = None
        self.timing_base: list[Any] = []
        self.last_output: Any = None
        self.flush = runtime.Flusher(self.device)

    def load(self, body: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.module = import_candidate(body["path"], body["module_name"])
        import_s = time.perf_counter() - t0
        if not isinstance(getattr(self.module, "ModelNew", None), type):
            return {"import_s": import_s, "has_modelnew": False}
        return {"import_s": import_s, "has_modelnew": True}

    def build(self, body: dict[str, Any]) -> dict[str, Any]:
        torch.manual_seed(int(body["seed"]))
        init_inputs = runtime.to_device(list(body["init_inputs"]), "cpu")
        self.model = self.module.ModelNew(*init_inputs).to(self.device).eval()
        return {"device": self.device}

    def _call(self, inputs: list[Any]) -> Any:
        assert self.model is not None
        with torch.no_grad():
            return self.model(*inputs)

    def run(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = runtime.to_device(list(body["inputs"]), self.device)
        t0 = time.perf_counter()
        out = self._call(inputs)
        runtime.sync(self.device)
        return {"outputs": out, "call_ms": (time.perf_counter() - t0) * 1e3}

    def prepare_timing(self, body: dict[str, Any]) -> None:
        self.timing_base = runtime.to_device(list(body["inputs"]), self.device)

    def time(self, body: dict[str, Any]) -> dict[str, Any]:
        sample, self.last_output = runtime.timed_sample(
            self._call, self.timing_base, int(body["seed"]), int(body["calls"]), self.device, self.flush)
        return sample

    def output(self, _body: Any) -> Any:
        return self.last_output

    def peak_memory(self, _body: Any) -> int | None:
        return int(torch.cuda.max_memory_allocated()) if self.device.startswith("cuda") else None


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
        "time": worker.time,
        "output": worker.output,
        "peak_memory": worker.peak_memory,
    })


if __name__ == "__main__":
    main()
