"""The inputs timed calls read: preallocated sets, refilled with fresh values that keep the task's structure."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import torch

from pytest_cudal1.workers import arena, guards


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
    checked call's and their guard bytes are checked after every sample. The reference
    worker refills its own sets and copies them into the candidate's (``twin``, ``mirror``:
    memory the candidate's worker maps, ``adopt``), so the reference's output for a call
    checks the candidate's, and ``values`` draws a call's inputs again from its seed.
    """

    def __init__(self, base: list[Any], device: str) -> None:
        self.base = base
        self.device = device
        self.sets: list[list[Any]] = []  # per set: a guards.Slot per tensor input, other inputs as they are
        self.in_use: list[guards.Slot] = []  # the slots the last ``select`` handed out
        # The sets' memory (``arena.Arena``), one per batch of sets, and the sets in it; ``shared``: another
        # process maps them (``twin``).
        self.arenas: list[tuple[arena.Arena, int]] = []
        self.shared = False
        self.adopted = False  # the sets are another process's, which refills them (``adopt``)
        # A sorted integer input is structure (offsets, say): shuffling it would break the task's preconditions.
        self.sorted = [isinstance(x, torch.Tensor) and not x.is_floating_point() and _is_sorted(x) for x in base]
        self.structure = [_structure(x) for x in base]

    def twin(self) -> TimingInputs:
        """Sets for another process of the same inputs, in memory it can map (``mirror``, ``adopt``)."""
        twin = copy.copy(self)
        twin.sets, twin.in_use, twin.arenas, twin.shared, twin.adopted = [], [], [], True, False
        return twin

    def fixed(self, seed: int, calls: int, first: int = 0) -> list[list[Any]]:
        """Sets ``first`` to ``first + calls - 1``, refilled in place (a placement's sets; a graph reads them).
        Adopted sets are not refilled here: the process that owns them does (``mirror``)."""
        self._allocate(first + calls)
        if not self.adopted:
            self._refill(self.sets[first:first + calls], seed)
        return self.select(calls, first)

    def select(self, calls: int, first: int = 0) -> list[list[Any]]:
        """Sets ``first`` to ``first + calls - 1`` as they are: fresh views for the calls."""
        self._allocate(first + calls)
        chosen = self.sets[first:first + calls]
        self.in_use = [x for inputs in chosen for x in inputs if isinstance(x, guards.Slot)]
        return [[x.view() if isinstance(x, guards.Slot) else x for x in inputs] for inputs in chosen]

    def set_bytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.base if isinstance(x, torch.Tensor))

    def owned_bytes(self) -> int:
        """The sets' bytes this process holds (none of adopted ones: the owner counts them)."""
        return 0 if self.adopted else len(self.sets) * self.set_bytes()

    def _allocate(self, n: int) -> None:
        """Sets up to ``n``, the new ones in one batch of memory."""
        new = n - len(self.sets)
        if new <= 0:
            return
        if self.adopted:
            raise RuntimeError(f"{n} input sets asked for, {len(self.sets)} shared by the reference worker")
        tensors = [x for x in self.base if _slotted(x)]
        batch = arena.Arena([guards.size_of(x) for x in tensors] * new, self.device, self.shared, guards.GUARD_BYTE)
        buffers = iter(batch.buffers)
        for _ in range(new):
            self.sets.append([guards.Slot(x, next(buffers)) if _slotted(x) else x for x in self.base])
        self.arenas.append((batch, new))

    def mirror(self, source: TimingInputs, calls: int, first: int, into: int) -> list[dict[str, Any]]:
        """Sets ``into`` to ``into + calls - 1`` get what ``source``'s sets ``first`` on hold (the reference's
        refill, copied into the candidate's shared sets); returns the handles of sets made meanwhile."""
        made = len(self.arenas)
        self._allocate(into + calls)
        chosen = zip(source.sets[first:first + calls], self.sets[into:into + calls])
        pairs = [(y.target, x.target) for mine, theirs in chosen for x, y in zip(mine, theirs) if isinstance(x, guards.Slot)]
        if pairs:  # one launch for a sample's hundreds of inputs on CUDA
            torch._foreach_copy_([y for y, _ in pairs], [x for _, x in pairs])
        return [{**batch.handle(), "sets": n} for batch, n in self.arenas[made:]]

    def release(self) -> None:
        """The shared sets' memory goes once the process that mapped it has exited (``arena.Arena.release``)."""
        for batch, _ in self.arenas:
            batch.release()
        self.sets, self.in_use, self.arenas = [], [], []

    def adopt(self, handles: list[dict[str, Any]]) -> None:
        """Take the sets another process shared (``mirror``): they are refilled there, never here. Sets of this
        process's own, from before any were shared, go (a worker driven without the reference's refills)."""
        if handles and not self.adopted:
            self.sets, self.arenas, self.adopted = [], [], True
            # The inputs' values stay with the process that refills them; here only their shapes and types count
            # (kept, a 6.4 GB task's took the room its candidate's calls needed on an 80 GB card).
            self.base = [torch.empty_like(x, device="meta") if _slotted(x) else x for x in self.base]
        for handle in handles:
            buffers = iter(arena.open_shared(handle, self.device))
            for _ in range(int(handle["sets"])):
                self.sets.append([guards.Slot(x, next(buffers)) if _slotted(x) else x
                                  for x in self.base])

    def values(self, seed: int, i: int) -> list[Any]:
        """Call ``i``'s inputs of a sample drawn from ``seed`` (what ``fixed`` put in its set ``first + i``),
        in tensors of their own."""
        inputs = [torch.empty_like(x) if _slotted(x) else x for x in self.base]
        self._fill([x if _slotted(x) else None for x in inputs], seed, i)
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


def _slotted(x: Any) -> bool:
    """Does input ``x`` live in a slot (a tensor with elements), or is it passed as it is?"""
    return isinstance(x, torch.Tensor) and bool(x.numel())


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
