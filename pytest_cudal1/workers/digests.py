"""Value digests of outputs, compared between the workers: every timed call's, and sampled elements.

Computed alike in both workers, so the controller compares the candidate's digest of a call with the
reference's for the same inputs (``call_checks.fingerprints_match``) and with earlier ones (replayed values).
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_cudal1.workers.guards import DIGEST_SEED, DIGEST_WORDS, bit_weights, tensors

DIGEST_PROJECTIONS = 16
PROJECTION_WIDTH = 4096
DIGEST_BLOCK_ROWS = 1024  # rows of a digest's block: 4M elements
ROW_BYTES = 4 * DIGEST_WORDS  # tensors up to this size are digested in batches of rows (``fingerprints``)
BATCH_ELEMENTS = DIGEST_BLOCK_ROWS * PROJECTION_WIDTH  # the most elements of one batch: 32 MB as float64
BATCHED_DEVICES = ("cuda",)  # where a sample's small outputs are digested in batches (a CPU digests each alone)
_projection_weights: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}
_hash_weight_cache: dict[str, torch.Tensor] = {}


def fingerprint(out: Any) -> list[list[float]]:
    """Per output tensor: numel, sum, sum of |x|, sum of squares (float64, NaN-skipping), the count of
    non-finite elements, the dtype's rtol (0 for exact dtypes), ``DIGEST_PROJECTIONS`` projections
    on fixed random weights (``_projections``), and last an exact hash of its bits (an int, ``_row_hashes``).

    Cheap enough for every timed call: the controller compares each call's digest with the reference's
    for the same inputs (``call_checks.fingerprints_match``), and keys calls by the hash to spot replayed
    values (``call_checks.digest_key``). The sums do not see order and average rounding away; the projections see
    both: an unsorted sort moves them by the size of the output, and bf16 arithmetic by its error's norm, which
    the rounding model's tolerance for them (an L2 bound) is far below.
    """
    return fingerprints([out])[0]


def fingerprints(outs: list[Any]) -> list[list[list[Any]]]:
    """``fingerprint`` of every call's output, read back in one device-to-host copy per device and kind.

    On a GPU, tensors of one device, dtype and size up to ``ROW_BYTES`` are digested together, a batch of rows
    per kernel (``_digest_rows``): a sample's checks cost a few launches, not a few per call, which on an H100 was
    most of the timing phase. (A CPU digests each alone: its cache holds one small output, not a batch of them.)
    The float figures of a tensor depend on its batch up to summation order; its hash does not (integer sums
    are exact), so a value returned again hashes alike in trials and timed calls."""
    from pytest_cudal1.compare import DEFAULT_RTOL, RTOL

    flat = [list(tensors(out)) for out in outs]
    groups: dict[tuple[Any, ...], list[torch.Tensor]] = {}
    for ts in flat:
        for t in ts:
            batched = t.device.type in BATCHED_DEVICES and t.numel() * t.element_size() <= ROW_BYTES
            groups.setdefault((t.device, t.dtype, t.numel()) if batched else ("alone", id(t)), []).append(t)
    rows: dict[torch.device, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # per device: (figures, hashes) parts
    where: dict[int, tuple[torch.device, int]] = {}  # id(tensor) -> (device, its row there)
    taken: dict[torch.device, int] = {}  # rows so far, per device
    for key, members in groups.items():
        device = members[0].device
        on_device = rows.setdefault(device, [])
        per_batch = max(1, BATCH_ELEMENTS // max(1, members[0].numel())) if key[0] != "alone" else 1
        for i in range(0, len(members), per_batch):
            batch = members[i:i + per_batch]
            where.update((id(t), (device, taken.get(device, 0) + j)) for j, t in enumerate(batch))
            taken[device] = taken.get(device, 0) + len(batch)
            if key[0] == "alone":
                on_device.append((_digest(batch[0])[None], _row_hashes(batch[0].detach().reshape(1, -1))))
            else:
                x = torch.stack([t.detach().reshape(-1) for t in batch])
                on_device.append((_digest_rows(x), _row_hashes(x)))
    read = {device: (torch.cat([f for f, _ in parts]).tolist(), torch.cat([h for _, h in parts]).tolist())
            for device, parts in rows.items()}
    result = []
    for ts in flat:
        call = []
        for t in ts:
            device, row = where[id(t)]
            figures, hashes = read[device][0][row], read[device][1][row]
            rtol = RTOL.get(str(t.dtype).removeprefix("torch."), DEFAULT_RTOL) if t.is_floating_point() else 0.0
            call.append([float(t.numel()), *figures[:4], rtol, *figures[4:], hashes])
        result.append(call)
    return result


def _digest_rows(x: torch.Tensor) -> torch.Tensor:
    """Each row's figures (``_figures``): rows of one batch."""
    return _figures(x.to(torch.float64), *_weights(x.device, -(-x.shape[1] // PROJECTION_WIDTH)))


def _figures(d: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Per row of ``d`` (float64): its sums, non-finite count and projections (``_projections``)."""
    sums = torch.stack([d.nansum(1), d.abs().nansum(1), (d * d).nansum(1), (~torch.isfinite(d)).sum(1).double()], 1)
    return torch.cat([sums, _projections(d, u, v)], 1)


def _row_hashes(x: torch.Tensor) -> torch.Tensor:
    """Each row's bits as 32-bit words (the tail bytes a word of their own), block by block (``DIGEST_WORDS``): two
    sums of the words times fixed random odd weights, both wrapping in 32 bits, make a block's 64-bit value, and
    the blocks a polynomial hash (int64, wrapping). Any change of bits changes it but by chance, and integer sums
    give the same whatever the batch or order. No copy of a large row."""
    raw = x.view(torch.uint8)
    n = raw.shape[1]
    whole, pad = n // 4 * 4, (4 - n % 4) % 4
    if raw.shape[0] > 1 and pad:  # a batch's rows (small tensors) start on whole words
        raw = torch.nn.functional.pad(raw, (0, pad))
    words = raw.reshape(-1)[:whole].view(torch.int32)[None] if raw.shape[0] == 1 else raw[:, :whole].view(torch.int32)
    tail = torch.nn.functional.pad(raw[:, whole:n], (0, pad)).view(torch.int32)
    w = _hash_weights(x.device)
    total = torch.zeros(x.shape[0], dtype=torch.int64, device=x.device)
    for block in [*(words[:, i:i + DIGEST_WORDS] for i in range(0, words.shape[1], DIGEST_WORDS)), tail]:
        sums = (block[:, None, :] * w[:, :block.shape[1]]).sum(2, dtype=torch.int32).to(torch.int64)
        total = total * 1_000_003 + (sums[:, 0] << 32) + (sums[:, 1] & 0xFFFFFFFF)
    return total


def _hash_weights(device: torch.device) -> torch.Tensor:
    """The bit digest's weights (``guards.bit_weights``) as odd int32s, 2 x ``DIGEST_WORDS``."""
    key = str(device)
    if key not in _hash_weight_cache:
        _hash_weight_cache[key] = bit_weights(device).to(torch.int32) | 1
    return _hash_weight_cache[key]


def _digest(t: torch.Tensor) -> torch.Tensor:
    """One large tensor's figures (``_digest_rows``), ``DIGEST_BLOCK_ROWS`` rows at a time: no full-size float64
    copy of a large output (25.6 GB of temporaries for a 6.4 GB one)."""
    flat = t.detach().reshape(-1)
    n = flat.numel()
    u, v = _weights(flat.device, -(-n // PROJECTION_WIDTH))
    total = torch.zeros(4 + DIGEST_PROJECTIONS, dtype=torch.float64, device=flat.device)
    step = DIGEST_BLOCK_ROWS * PROJECTION_WIDTH
    for start in range(0, n, step):
        first = start // PROJECTION_WIDTH
        total += _figures(flat[start:start + step].to(torch.float64)[None], u[first:first + DIGEST_BLOCK_ROWS], v)[0]
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
    """Per row of ``d`` (a batch of flattened outputs, or a block of one): sum_i w_i d_i over the finite d_i of each
    of ``DIGEST_PROJECTIONS`` classes of positions (i mod the count), for fixed random weights w_i = U[row] V[col]
    with the output laid out in rows of ``PROJECTION_WIDTH``: uncorrelated unit-variance weights from two small
    vectors, in a few elementwise passes (no BLAS: on a busy CPU its thread barriers cost milliseconds a call)."""
    batch, n = d.shape
    rows = -(-n // PROJECTION_WIDTH)
    x = torch.nn.functional.pad(d, (0, rows * PROJECTION_WIDTH - n)).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    classes = (batch, rows, PROJECTION_WIDTH // DIGEST_PROJECTIONS, DIGEST_PROJECTIONS)
    per_class = (x.view(batch, rows, PROJECTION_WIDTH) * v).view(classes).sum(2)
    return (per_class * u[:rows]).sum(1)


def sampled_elements(outs: list[Any], seed: int, count: int) -> list[torch.Tensor]:
    """Up to ``count`` elements of every output tensor of every call, at positions drawn from ``seed``.

    The controller draws ``seed`` after the calls returned, so a candidate cannot know which elements
    of which call will be compared in full; both workers gather the same positions. The positions go to each
    device in one copy, and each tensor's are gathered by one kernel.
    """
    gen = torch.Generator().manual_seed(seed)
    flats = [t.detach().reshape(-1) for out in outs for t in tensors(out)]
    positions = [torch.arange(f.numel()) if f.numel() <= count else torch.randint(0, f.numel(), (count,), generator=gen)
                 for f in flats]
    moved = {}
    for device in {f.device for f in flats}:
        mine = [p for f, p in zip(flats, positions) if f.device == device]
        moved[device] = iter(torch.cat(mine).to(device).split([p.numel() for p in mine]))
    return [f[next(moved[f.device])] for f in flats]
