"""The built-in policy: PyTorch-level rewrites of a task, no model needed.

Re-reading the CUDA-L1 release shows most of its speedups are PyTorch-level
(CUDA graphs, torch.compile, channels_last), so these are the baseline any
learned policy must beat, and the optimizer's first exemplars. Each rewrite is
an ordinary candidate file: the task source unchanged (so the file is
self-contained and ``ModelNew`` inherits ``Model``'s constructor and weights),
then one subclass per step, the last named ``ModelNew``. Steps stack
innermost first (layout, then compilation, then graph capture); later rounds
combine the steps of the best rewrites measured so far.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path
from typing import Mapping, Sequence

from kernelbench.loaders import Task
from policy.judging import candidate_folder

MARKER = "# cudal1-builtin:"
_CONV = re.compile(r"\bConv(?:Transpose)?[123]d\b|\bconv(?:_transpose)?[123]d\b")

_CHANNELS_LAST = '''
    """channels_last: weights and 4-D inputs in NHWC, which cuDNN's fastest convolutions want; outputs contiguous."""

    def forward(self, *inputs):
        if not self.__dict__.get("_cudal1_channels_last"):
            self.to(memory_format=torch.channels_last)
            self.__dict__["_cudal1_channels_last"] = True
        inputs = [x.contiguous(memory_format=torch.channels_last) if isinstance(x, torch.Tensor) and x.dim() == 4
                  else x for x in inputs]
        return _cudal1_map_tensors(lambda t: t.contiguous(), super().forward(*inputs))
'''
_COMPILE = '''
    """torch.compile(mode={mode!r}) of the forward below, compiled at the first call.{clone_doc}"""

    def forward(self, *inputs):
        compiled = self.__dict__.get("_cudal1_compiled_{key}")
        if compiled is None:  # kept out of the module's attributes so it is no submodule
            compiled = self.__dict__["_cudal1_compiled_{key}"] = torch.compile(super().forward{mode_arg})
        return {result}
'''
_CUDA_GRAPH = '''
    """CUDA graph: on CUDA, the first call captures the forward below into a graph over static input buffers;
    each call copies its inputs in, replays and returns clones of the outputs (a new input signature
    recaptures). On the CPU there are no graphs: this step runs eagerly."""

    def forward(self, *inputs):
        if not any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs):
            return super().forward(*inputs)  # CPU fallback: eager
        key = tuple((tuple(x.shape), x.dtype, x.stride(), x.device) if isinstance(x, torch.Tensor) else x
                    for x in inputs)
        state = self.__dict__.get("_cudal1_graph")
        if state is None or state[0] != key:
            static = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            with torch.no_grad():
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):  # warm-up (lazy library init) outside the capture
                    for _ in range(3):
                        super().forward(*static)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = super().forward(*static)
            state = self.__dict__["_cudal1_graph"] = (key, graph, static, out)
        _, graph, static, out = state
        for buffer, x in zip(static, inputs):
            if isinstance(buffer, torch.Tensor):
                buffer.copy_(x)
        graph.replay()
        return _cudal1_map_tensors(torch.clone, out)
'''


def _compile_body(mode: str | None, clone: bool = False) -> str:
    key = (mode or "default").replace("-", "_")
    call = "compiled(*inputs)"
    return _COMPILE.format(
        mode=mode or "default", key=key, mode_arg=f", mode={mode!r}" if mode else "",
        clone_doc=" Outputs are cloned: a replayed graph reuses its output buffers." if clone else "",
        result=f"_cudal1_map_tensors(torch.clone, {call})" if clone else call,
    )


# name -> (layer: lower runs closer to Model, class body); one step per layer in a rewrite.
STEPS: dict[str, tuple[int, str]] = {
    "channels_last": (0, _CHANNELS_LAST),
    "compile_default": (1, _compile_body(None)),
    "compile_max_autotune": (1, _compile_body("max-autotune-no-cudagraphs")),
    "compile_reduce_overhead": (2, _compile_body("reduce-overhead", clone=True)),
    "cuda_graph": (2, _CUDA_GRAPH),  # reduce-overhead captures graphs itself: never both
}


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One built-in candidate: its steps, innermost first."""

    steps: tuple[str, ...]

    @property
    def name(self) -> str:
        return "builtin_" + "__".join(self.steps)


def has_conv(task: Task) -> bool:
    return bool(_CONV.search(task.source))


def rewrite_of(steps: Sequence[str]) -> Rewrite | None:
    """The steps as a rewrite in layer order, or None if two share a layer."""
    layers = [STEPS[s][0] for s in steps]
    if len(set(layers)) != len(layers):
        return None
    return Rewrite(tuple(sorted(steps, key=lambda s: STEPS[s][0])))


def first_round(task: Task) -> list[Rewrite]:
    """Every single step that applies to the task (channels_last only where it convolves)."""
    return [Rewrite((s,)) for s in STEPS if s != "channels_last" or has_conv(task)]


def next_round(measured: Mapping[Rewrite, float | None], top: int = 3) -> list[Rewrite]:
    """Combinations (unions of steps) of the ``top`` fastest rewrites that passed, not measured yet."""
    best = sorted((r for r, s in measured.items() if s is not None), key=lambda r: -measured[r])[:top]
    found: list[Rewrite] = []
    for a, b in itertools.combinations(best, 2):
        combined = rewrite_of(sorted(set(a.steps) | set(b.steps)))
        if combined is not None and combined not in measured and combined not in found:
            found.append(combined)
    return found


def steps_of(source: str) -> tuple[str, ...] | None:
    """The steps a built-in candidate was made of (from its first line), or None for other code."""
    first = source.split("\n", 1)[0]
    if not first.startswith(MARKER):
        return None
    steps = tuple(first[len(MARKER):].split())
    return steps if steps and all(s in STEPS for s in steps) else None


def render(task: Task, rewrite: Rewrite) -> str:
    """The candidate module's source for ``rewrite`` of ``task``."""
    classes, base = [], "Model"
    for i, step in enumerate(rewrite.steps):
        name = "ModelNew" if i == len(rewrite.steps) - 1 else f"_CudaL1_{step}"
        classes.append(f"class {name}({base}):{STEPS[step][1]}")
        base = name
    return (
        f"{MARKER} {' '.join(rewrite.steps)}\n"
        f"# Built-in rewrite of {task.id} by policy.builtin: the task source, unchanged, then the rewrite.\n"
        f"{task.source.rstrip()}\n\n\n"
        "# ---- policy.builtin rewrite ----\n"
        "import torch\nimport torch.utils._pytree as _cudal1_pytree\n\n\n"
        "def _cudal1_map_tensors(fn, value):\n"
        "    return _cudal1_pytree.tree_map(lambda v: fn(v) if isinstance(v, torch.Tensor) else v, value)\n\n\n"
        + "\n\n".join(classes)
    )


def write_candidates(task: Task, rewrites: Sequence[Rewrite], root: str | Path) -> list[Path]:
    """Write each rewrite as ``root/level<L>/<task name>/<rewrite name>.py``, the judge's candidate layout."""
    folder = candidate_folder(Path(root), task)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rewrite in rewrites:
        path = folder / f"{rewrite.name}.py"
        path.write_text(render(task, rewrite), encoding="utf-8")
        paths.append(path)
    return paths
