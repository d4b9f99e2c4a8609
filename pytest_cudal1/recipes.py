"""Input recipes: small descriptions of a trial's inputs that hypothesis draws.

Hypothesis draws a ``Recipe`` (seed, distribution family, scale, and for the
mixed family its regions and outliers), not tensors element by element. The
reference worker turns the recipe into tensors by running the task's own
``get_inputs()`` while torch's random factories (``randn``, ``rand``,
``normal``, ``randint``, ``Tensor.uniform_``...) return the family's values in
the shape, dtype and device asked for. Whatever the task does with them
afterwards (``tril``, ``softmax``, ``abs``, ``A @ A.T``, integer labels in
``[low, high)``) still applies, so every family keeps the task's preconditions:
a kernel that relies on them (one that skips a zero triangle) is judged on
inputs the task can produce. Families:

- ``task``: the task's own distribution, untouched (always one of the trials);
- ``normal``: zero-mean normal times ``scale`` — exposes cancellation, so
  silent bf16/fp16/TF32 arithmetic shows up against the float64 reference;
- ``wide``: normal times ``scale`` times a per-element magnitude spread over
  four decades, with negatives — exposes range and scaling bugs;
- ``mixed``: the task's own values with ``regions`` contiguous stretches
  drawn from ``normal``/``wide`` and ``outliers`` per mille of sparse elements
  of either sign and of magnitudes from 1e-3 to 1e3 (integer draws: the ends
  of their range) — a candidate that looks at a few elements, or a row, and
  skips work when they look like the task's distribution is caught elsewhere.
  Hypothesis shrinks a failing mixed recipe to the fewest regions and outliers.

Integer draws keep the task's values (from the family's seed) except for the
mixed family's outliers. A ``get_inputs`` that draws nothing through torch
(numpy, constants) gets its own inputs under every family: what it guarantees
cannot be known, so nothing is changed.

A recipe that makes the reference itself produce NaN/Inf (e.g. ``log`` of a
negative input) is rejected for that task rather than held against the candidate.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

FAMILIES = ("task", "normal", "wide", "mixed")
SCALES = (1.0, 0.01, 100.0)
REGION_FAMILIES = ("normal", "wide")

# torch functions whose values a family replaces: (name, index of a "like" tensor argument or None).
FLOAT_FACTORIES = ("randn", "rand", "normal", "randn_like", "rand_like")
INT_FACTORIES = ("randint", "randint_like")
FLOAT_METHODS = ("normal_", "uniform_", "exponential_", "cauchy_", "log_normal_")
INT_METHODS = ("random_",)


@dataclasses.dataclass(frozen=True)
class Recipe:
    seed: int
    family: str = "task"
    scale: float = 1.0
    regions: int = 0  # mixed: stretches drawn from another family
    outliers: int = 0  # mixed: sparse outliers, per mille of each draw (at least one each)

    def __str__(self) -> str:
        mixed = f", regions={self.regions}, outliers={self.outliers}" if self.family == "mixed" else ""
        return f"Recipe(seed={self.seed}, family={self.family!r}, scale={self.scale}{mixed})"


def recipe_strategy() -> Any:
    """The hypothesis strategy the judge draws correctness trials from: plain families, or mixed ones
    (half the draws) with their regions and outliers, which hypothesis shrinks toward none."""
    from hypothesis import strategies as st

    seed = st.integers(min_value=0, max_value=2**31 - 1)
    scale = st.sampled_from(SCALES)
    plain = st.builds(Recipe, seed=seed, family=st.sampled_from(FAMILIES[:3]), scale=scale)
    mixed = st.builds(Recipe, seed=seed, family=st.just("mixed"), scale=scale,
                      regions=st.integers(min_value=0, max_value=3), outliers=st.integers(min_value=0, max_value=8))
    return st.one_of(plain, mixed)


def draw_inputs(get_inputs: Callable[[], Any], recipe: Recipe | None, device: str) -> list[Any]:
    """Run in the reference worker: the task's inputs on ``device``, drawn per the recipe's family.

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
        with torch.device(device), _family_factories(recipe):
            inputs = list(get_inputs())
    except Exception:  # noqa: BLE001 - e.g. numpy inside get_inputs: draw on the CPU, then move
        torch.random.set_rng_state(state)
        with _family_factories(recipe):
            inputs = list(get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


class _Family:
    """Turns one factory's task values into the recipe family's values (same shape, dtype, device)."""

    def __init__(self, recipe: Recipe, real: dict[str, Callable[..., Any]]) -> None:
        self.recipe = recipe
        self.real = real  # torch's own factories: the family draws through them, not through the patched ones
        self.gens: dict[str, Any] = {}

    def gen(self, device: Any) -> Any:
        import torch

        key = str(device)
        if key not in self.gens:
            self.gens[key] = torch.Generator(device=device).manual_seed(self.recipe.seed ^ 0x5EED)
        return self.gens[key]

    def floats(self, t: Any, family: str | None = None) -> Any:
        """Values of ``family`` (the recipe's by default) in ``t``'s place."""
        import torch

        family = family or self.recipe.family
        if family == "task":
            return t
        if family == "mixed":
            return self._mixed(t)
        g = self.gen(t.device)
        y = self.real["randn"](t.shape, generator=g, dtype=torch.float64, device=t.device) * self.recipe.scale
        if family == "wide":
            spread = self.real["rand"](t.shape, generator=g, dtype=torch.float64, device=t.device)
            y = y * torch.pow(10.0, spread * 4 - 2)
        return y.to(t.dtype)

    def _mixed(self, t: Any) -> Any:
        import torch

        g, flat, n = self.gen(t.device), t.detach().clone().reshape(-1), t.numel()
        if n == 0:
            return t
        for k in range(self.recipe.regions):
            start, length = self._ints(0, n, g), self._ints(1, max(2, n // 4 + 1), g)
            stretch = flat[start:start + length]
            stretch.copy_(self.floats(stretch, REGION_FAMILIES[k % len(REGION_FAMILIES)]))
        if self.recipe.outliers:
            where = self._positions(n, g, t.device)
            sign = self.real["randint"](0, 2, where.shape, generator=g, device=t.device) * 2 - 1
            decades = self.real["rand"](where.shape, generator=g, dtype=torch.float64, device=t.device)
            magnitude = torch.pow(10.0, decades * 6 - 3)
            flat[where] = (sign * magnitude * self.recipe.scale).to(t.dtype)
        return flat.reshape(t.shape)

    def ints(self, t: Any, low: int, high: int) -> Any:
        """Integer draws keep the task's range; the mixed family's outliers sit at its ends."""
        import torch

        if self.recipe.family != "mixed" or not self.recipe.outliers or t.numel() == 0 or high <= low:
            return t
        g, flat = self.gen(t.device), t.detach().clone().reshape(-1)
        where = self._positions(t.numel(), g, t.device)
        ends = torch.tensor([low, high - 1], dtype=t.dtype, device=t.device)
        flat[where] = ends[self.real["randint"](0, 2, where.shape, generator=g, device=t.device)]
        return flat.reshape(t.shape)

    def _positions(self, n: int, g: Any, device: Any) -> Any:
        count = max(1, n * self.recipe.outliers // 1000)
        return self.real["randint"](0, n, (count,), generator=g, device=device)

    def _ints(self, low: int, high: int, g: Any) -> int:
        return int(self.real["randint"](low, high, (1,), generator=g, device=g.device))


def _int_range(args: tuple[Any, ...], kwargs: dict[str, Any], like: bool) -> tuple[int, int]:
    """[low, high) of a ``randint``/``randint_like`` call (``randint(high, size)``, ``randint(low, high, size)``)."""
    rest = args[1:] if like else args
    bounds = [a for a in rest if isinstance(a, int) and not isinstance(a, bool)][:2]
    if "high" in kwargs:
        return int(kwargs.get("low", bounds[0] if bounds else 0)), int(kwargs["high"])
    if len(bounds) == 2 and (like or len(rest) >= 3):
        return bounds[0], bounds[1]
    return int(kwargs.get("low", 0)), bounds[0] if bounds else 1


@contextlib.contextmanager
def _family_factories(recipe: Recipe | None) -> Iterator[None]:
    """While ``get_inputs`` runs: torch's random factories return the family's values (see module doc).

    Each real factory still runs first, so the task's random stream advances as it expects and the
    result carries the shape, dtype, device and ``requires_grad`` the task asked for.
    """
    import torch

    if recipe is None or recipe.family == "task":
        yield
        return
    fam = _Family(recipe, {name: getattr(torch, name) for name in ("randn", "rand", "randint")})

    def replaced(real: Callable[..., Any], values: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any],
                 in_place: bool) -> Callable[..., Any]:
        def factory(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)
            if not isinstance(out, torch.Tensor):
                return out
            new = values(out, args, kwargs)
            if new is out:
                return out
            if in_place or kwargs.get("out") is not None:
                with torch.no_grad():
                    out.copy_(new)
                return out
            return new.requires_grad_(out.requires_grad) if out.is_floating_point() else new
        return factory

    def floats(out: Any, _a: tuple[Any, ...], _k: dict[str, Any]) -> Any:
        return fam.floats(out.detach()) if out.is_floating_point() else out

    def ints(like: bool) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
        return lambda out, a, k: fam.ints(out, *_int_range(a, k, like))

    def random_(out: Any, a: tuple[Any, ...], k: dict[str, Any]) -> Any:  # Tensor.random_(self, [from,] to)
        if out.is_floating_point() or not (len(a) > 1 or "to" in k):
            return out
        low, high = (a[1], a[2]) if len(a) > 2 else (k.get("from", 0), a[1] if len(a) > 1 else k["to"])
        return fam.ints(out, int(low), int(high))

    patches: list[tuple[Any, str, Any]] = []
    for name in FLOAT_FACTORIES:
        patches.append((torch, name, replaced(getattr(torch, name), floats, False)))
    for name in INT_FACTORIES:
        patches.append((torch, name, replaced(getattr(torch, name), ints(name.endswith("_like")), False)))
    for name in FLOAT_METHODS:
        patches.append((torch.Tensor, name, replaced(getattr(torch.Tensor, name), floats, True)))
    for name in INT_METHODS:
        patches.append((torch.Tensor, name, replaced(getattr(torch.Tensor, name), random_, True)))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, fn in patches:
            setattr(owner, name, fn)
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
