"""Value digests of outputs, compared between the workers: every timed call's, and sampled elements.

Computed alike in both workers, so the controller compares the candidate's digest of a call with the
reference's for the same inputs (``timing.fingerprints_match``) and with earlier ones (replayed values).
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_cudal1.workers.guards import DIGEST_SEED, tensors

DIGEST_PROJECTIONS = 16
PROJECTION_WIDTH = 4096
DIGEST_BLOCK_ROWS = 1024  # rows of a digest's block: 4M elements
_projection_weights: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}


def fingerprint(out: Any) -> list[list[float]]:
    """Per output tensor: numel, sum, sum of |x|, sum of squares (float64, NaN-skipping), the count of
    non-finite elements, the dtype's rtol (0 for exact dtypes), and ``DIGEST_PROJECTIONS`` projections
    on fixed random weights (``_projections``).

    Cheap enough for every timed call: the controller compares each call's digest with the reference's
    for the same inputs (``timing.fingerprints_match``), and with earlier calls' digests to spot replayed
    values. The sums do not see order and average rounding away; the projections see both: an unsorted
    sort moves them by the size of the output, and bf16 arithmetic by its error's norm, which the
    rounding model's tolerance for them (an L2 bound) is far below.
    """
    return fingerprints([out])[0]


def fingerprints(outs: list[Any]) -> list[list[list[float]]]:
    """``fingerprint`` of every call's output, read back in one device-to-host copy per device.

    Each tensor's digest is computed by the same kernels as on its own (bit-identical: the replay
    check keys trials and timed calls by them); only the copies are gathered, so the host queues every
    call's digest without waiting for the GPU between tensors."""
    from pytest_cudal1.compare import DEFAULT_RTOL, RTOL

    calls: list[list[tuple[float, float, torch.device, int]]] = []  # per tensor: numel, rtol, device, row there
    rows: dict[torch.device, list[torch.Tensor]] = {}
    for out in outs:
        calls.append([])
        for t in tensors(out):
            rtol = RTOL.get(str(t.dtype).removeprefix("torch."), DEFAULT_RTOL) if t.is_floating_point() else 0.0
            on_device = rows.setdefault(t.device, [])
            calls[-1].append((float(t.numel()), rtol, t.device, len(on_device)))
            on_device.append(_digest(t))
    read = {device: torch.stack(digests).tolist() for device, digests in rows.items()}
    return [[[numel, *read[device][row][:4], rtol, *read[device][row][4:]] for numel, rtol, device, row in call]
            for call in calls]


def _digest(t: torch.Tensor) -> torch.Tensor:
    """One tensor's sums, non-finite count and projections (float64, on its device), ``DIGEST_BLOCK_ROWS``
    rows at a time: no full-size float64 copy of a large output (25.6 GB of temporaries for a 6.4 GB one)."""
    flat = t.detach().reshape(-1)
    n = flat.numel()
    u, v = _weights(flat.device, -(-n // PROJECTION_WIDTH))
    total = torch.zeros(4 + DIGEST_PROJECTIONS, dtype=torch.float64, device=flat.device)
    step = DIGEST_BLOCK_ROWS * PROJECTION_WIDTH
    for start in range(0, n, step):
        d = flat[start:start + step].to(torch.float64)
        sums = torch.stack([d.nansum(), d.abs().nansum(), (d * d).nansum(), (~torch.isfinite(d)).sum().double()])
        first = start // PROJECTION_WIDTH
        total += torch.cat([sums, _projections(d, u[first:first + DIGEST_BLOCK_ROWS], v)])
    return total


def _weights(device: torch.device, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed random weights U (one per row) and V (one per column) of an output of ``rows`` rows."""
    key = (str(device), rows)
    if key not in _projection_weights:
        gen = torch.Generator().manual_seed(DIGEST_SEED)
        v = torch.randn(PROJECTION_WIDTH, generator=gen, dtype=torch.float64)
        u = torch.randn(rows, 1, generator=gen, dtype=torch.float64)
        _projection_weights[key] = (u.to(device), v.to(device))
    return _projection_weights[key]


def _projections(d: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """sum_i w_i d_i over the finite d_i of each of ``DIGEST_PROJECTIONS`` classes of positions (i mod
    the count), for fixed random weights w_i = U[row] V[col] with the output laid out in rows of
    ``PROJECTION_WIDTH``: uncorrelated unit-variance weights from two small vectors, in a few elementwise
    passes (no BLAS: on a busy CPU its thread barriers cost milliseconds a call)."""
    rows = -(-d.numel() // PROJECTION_WIDTH)
    x = torch.nn.functional.pad(d, (0, rows * PROJECTION_WIDTH - d.numel())).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    per_class = (x.view(rows, PROJECTION_WIDTH) * v).view(rows, -1, DIGEST_PROJECTIONS).sum(1)
    return (per_class * u).sum(0)


def sampled_elements(outs: list[Any], seed: int, count: int) -> list[torch.Tensor]:
    """Up to ``count`` elements of every output tensor of every call, at positions drawn from ``seed``.

    The controller draws ``seed`` after the calls returned, so a candidate cannot know which elements
    of which call will be compared in full; both workers gather the same positions.
    """
    gen = torch.Generator().manual_seed(seed)
    picked = []
    for out in outs:
        for t in tensors(out):
            flat = t.detach().reshape(-1)
            n = flat.numel()
            idx = torch.arange(n) if n <= count else torch.randint(0, n, (count,), generator=gen)
            picked.append(flat[idx.to(flat.device)].clone())
    return picked
