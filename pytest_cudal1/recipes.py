"""Input recipes: small descriptions of a trial's inputs that hypothesis draws.

Hypothesis draws a ``Recipe`` (seed, distribution family, scale), not tensors
element by element; the reference worker turns the recipe into tensors with the
task's own ``get_inputs()`` for shapes, dtypes and non-float inputs. Families:

- ``task``: the task's own distribution, untouched (always one of the trials);
- ``normal``: zero-mean normal times ``scale`` — exposes cancellation, so
  silent bf16/fp16/TF32 arithmetic shows up against the float64 reference;
- ``wide``: normal times ``scale`` times a per-element magnitude spread over
  four decades, with negatives — exposes range and scaling bugs.

A recipe that makes the reference itself produce NaN/Inf (e.g. ``log`` of a
negative input) is rejected for that task rather than held against the candidate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

FAMILIES = ("task", "normal", "wide")
SCALES = (1.0, 0.01, 100.0)


@dataclasses.dataclass(frozen=True)
class Recipe:
    seed: int
    family: str = "task"
    scale: float = 1.0

    def __str__(self) -> str:
        return f"Recipe(seed={self.seed}, family={self.family!r}, scale={self.scale})"


def recipe_strategy() -> Any:
    """The hypothesis strategy the judge draws correctness trials from."""
    from hypothesis import strategies as st

    return st.builds(
        Recipe,
        seed=st.integers(min_value=0, max_value=2**31 - 1),
        family=st.sampled_from(FAMILIES),
        scale=st.sampled_from(SCALES),
    )


def draw_inputs(get_inputs: Callable[[], Any], recipe: Recipe | None, device: str) -> list[Any]:
    """Run in the reference worker: the task's inputs on ``device``, re-drawn per the recipe's family.

    ``get_inputs`` runs under ``torch.device(device)`` so that its factory calls
    draw straight on the GPU (hundreds of MB per trial would otherwise be drawn
    on the CPU); a task whose ``get_inputs`` cannot do that is drawn on the CPU
    and moved. ``recipe`` None: the task's inputs under the current seed.
    """
    import torch

    if recipe is not None:
        torch.manual_seed(recipe.seed)
    state = torch.random.get_rng_state()
    try:
        with torch.device(device):
            inputs = list(get_inputs())
    except Exception:  # noqa: BLE001 - e.g. numpy inside get_inputs: draw on the CPU, then move
        torch.random.set_rng_state(state)
        inputs = list(get_inputs())
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    if recipe is None or recipe.family == "task":
        return inputs
    gen = torch.Generator(device=device).manual_seed(recipe.seed ^ 0x5EED)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            y = torch.randn(x.shape, generator=gen, dtype=torch.float64, device=device) * recipe.scale
            if recipe.family == "wide":
                y = y * torch.pow(10.0, torch.rand(x.shape, generator=gen, dtype=torch.float64, device=device) * 4 - 2)
            out.append(y.to(x.dtype))
        else:
            out.append(x)
    return out
