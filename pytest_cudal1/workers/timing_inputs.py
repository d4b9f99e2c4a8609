"""The inputs timed calls read: preallocated sets, refilled with fresh values that keep the task's structure."""

from __future__ import annotations

import math
import random
from typing import Any

import torch

from pytest_cudal1.workers import guards


class TimingInputs:
    """Input sets the timed calls rotate through, refilled with fresh values before every use.

    The sets are allocated once per worker, so every sample reads the same kind of
    memory and the caching allocator cannot flatter or penalize one run over another;
    every call still gets new values from a per-call seed, so a cache keyed on pointers,
    ids, versions, shapes or contents returns stale values and fails the digest check:
    each float input is scaled elementwise by ``0.5 + U[0,1)`` in a way that keeps what the
    task's generator guaranteed of it (``_structure``: a symmetric matrix stays symmetric and
    positive definite, rows that sum to one still do, zeros stay zeros), and each integer or
    boolean input gets the base's own elements at shuffled positions (``_shuffle_into``). Every input
    lives in a ``guards.Slot``, as trial inputs do, so a timed call's inputs look like a
    checked call's and their guard bytes are checked after every sample. Both workers
    derive the same values from the same seed, so the reference's output for a call
    checks the candidate's.
    """

    def __init__(self, base: list[Any], device: str) -> None:
        self.base = base
        self.device = device
        self.sets: list[list[Any]] = []  # per set: a guards.Slot per tensor input, other inputs as they are
        self.in_use: list[guards.Slot] = []  # the slots the last refill handed out
        # A sorted integer input is structure (offsets, say): shuffling it would break the task's preconditions.
        self.sorted = [isinstance(x, torch.Tensor) and not x.is_floating_point() and _is_sorted(x) for x in base]
        self.structure = [_structure(x) for x in base]

    def fixed(self, seed: int, calls: int, first: int = 0) -> list[list[Any]]:
        """Sets ``first`` to ``first + calls - 1``, refilled in place (a placement's sets; a graph reads them)."""
        self._allocate(first + calls)
        chosen = self.sets[first:first + calls]
        self._refill(chosen, seed)
        self.in_use = [x for inputs in chosen for x in inputs if isinstance(x, guards.Slot)]
        return [[x.view() if isinstance(x, guards.Slot) else x for x in inputs] for inputs in chosen]

    def set_bytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.base if isinstance(x, torch.Tensor))

    def _allocate(self, n: int) -> None:
        while len(self.sets) < n:
            self.sets.append([guards.Slot(x) if isinstance(x, torch.Tensor) and x.numel() else x for x in self.base])

    def values(self, seed: int, i: int) -> list[Any]:
        """Call ``i``'s inputs of a sample drawn from ``seed`` (what ``fixed`` put in its set ``first + i``),
        in tensors of their own."""
        inputs = [torch.empty_like(x) if isinstance(x, torch.Tensor) and x.numel() else x for x in self.base]
        self._fill([x if isinstance(x, torch.Tensor) and x.numel() else None for x in inputs], seed, i)
        return inputs

    def _refill(self, chosen: list[list[Any]], seed: int) -> None:
        for i, inputs in enumerate(chosen):
            self._fill([x.target if isinstance(x, guards.Slot) else None for x in inputs], seed, i)

    def _fill(self, targets: list[Any], seed: int, i: int) -> None:
        """Each tensor of ``targets`` (None: an input that is not refilled) gets call ``i``'s values."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed * 1009 + i)
        for x, target, keep, structure in zip(self.base, targets, self.sorted, self.structure):
            if target is None:
                continue
            if x.is_floating_point():
                _rescale_into(x, target, structure, gen)
            elif keep:
                target.copy_(x)
            else:
                _shuffle_into(x, target, random.Random(seed * 1009 + i))


def _structure(x: Any) -> str:
    """What a timed refill of the float input ``x`` must keep: ``symmetric`` (square matrices equal to their
    transpose up to rounding: symmetric and positive definite inputs), ``simplex`` (non-negative rows that
    sum to one: probabilities) or ``free``. Zeros (a triangular input) survive every refill.

    Up to rounding: ``A @ A.T`` is bit-symmetric with some BLAS builds and not with others (float64, 16x16,
    MKL on this AVX2 CPU: 1.8e-15 apart), and the task means it symmetric either way. The bound, sqrt(eps)
    of the largest element, is far above rounding and far below any matrix drawn without symmetry."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 or not x.numel():
        return "free"
    if x.shape[-1] == x.shape[-2] and _symmetric(x):
        return "symmetric"
    sums = x.sum(-1, dtype=torch.float64)
    if bool((x >= 0).all()) and bool(torch.allclose(sums, torch.ones_like(sums), rtol=0, atol=1e-3)):
        return "simplex"
    return "free"


def _symmetric(x: torch.Tensor, block: int = 1 << 22) -> bool:
    """Are the square matrices ``x`` equal to their transpose within sqrt(eps) of the largest element?

    Compared ``block`` elements at a time (whole matrices, or rows of one large one): a large input costs
    no second copy, and an input that is not symmetric is told by its first block."""
    n = x.shape[-1]
    m = x.reshape(-1, n, n)
    bound = torch.finfo(x.dtype).eps ** 0.5 * max(float(x.max()), -float(x.min()))
    if not math.isfinite(bound):  # NaN or inf: no structure to keep
        return False
    per, rows = max(1, block // (n * n)), max(1, block // n)
    for j in range(0, m.shape[0], per):
        sub = m[j:j + per]
        for i in range(0, n, rows):
            if float((sub[:, i:i + rows] - sub.transpose(1, 2)[:, i:i + rows]).abs().max()) > bound:
                return False
    return True


def _rescale_into(x: torch.Tensor, target: torch.Tensor, structure: str, gen: torch.Generator) -> None:
    """``target`` = ``x`` scaled by fresh factors in [0.5, 1.5) that keep ``structure``.

    A symmetric matrix is scaled as ``D x D`` (``D`` diagonal and positive), a congruence: it stays
    symmetric, and positive definite if it was. Simplex rows are renormalised after scaling.
    """
    if structure == "symmetric":
        v = torch.rand(x.shape[:-1], generator=gen, device=x.device, dtype=x.dtype) + 0.5
        torch.mul(x, v.unsqueeze(-1) * v.unsqueeze(-2), out=target)
        return
    target.uniform_(0.5, 1.5, generator=gen)  # in place: a 6.4 GB input's temporaries took its task's headroom
    target.mul_(x)
    if structure == "simplex":
        target.div_(target.sum(-1, keepdim=True))


# Positions shuffled per chunk of this many elements: the index tensor stays small for a 1e9-element mask.
SHUFFLE_CHUNK = 1 << 24


def _shuffle_into(base: torch.Tensor, target: torch.Tensor, rng: random.Random) -> None:
    """``target`` gets the elements of the integer or boolean ``base`` at positions i -> (a*i + b) mod n.

    A permutation keeps every precondition a task's generator can give such inputs short of
    their order (the range, each value's count, uniqueness: class labels, masks, index sets),
    which redrawing within [min, max] would not (a set of unique indices would get duplicates).
    An affine map with ``gcd(a, n) = 1`` is a permutation that needs no n-element index tensor.
    """
    n = base.numel()
    a = rng.randrange(1, max(n, 2))
    while math.gcd(a, n) != 1:
        a = rng.randrange(1, n)
    b = rng.randrange(n)
    src, dst = base.reshape(-1), target.view(-1)
    for start in range(0, n, SHUFFLE_CHUNK):
        pos = torch.arange(start, min(n, start + SHUFFLE_CHUNK), device=base.device, dtype=torch.int64)
        dst[start:start + pos.numel()] = src[(pos * a + b) % n]


def _is_sorted(x: torch.Tensor) -> bool:
    flat = x.reshape(-1)
    return flat.numel() > 1 and bool((flat[1:] >= flat[:-1]).all()) and bool(flat[-1] != flat[0])
