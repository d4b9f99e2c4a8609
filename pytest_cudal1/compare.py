"""Output comparison: structure, shape, dtype, device, NaN/Inf positions, then values.

Tolerance (documented in README "Correctness"): element i of a floating output
passes when

    |c_i - e_i| <= rtol(dtype) * (|e_i| + rms(e)) + 2 * max|n - e|

where ``e`` is the reference computed in float64, ``n`` the reference in the
task's own dtype and ``rms(e)`` the root mean square of the finite reference
values. The ``rms`` term keeps elements near zero (cancellation) from demanding
impossible relative accuracy; the ``max|n - e|`` term grants a candidate twice
the rounding error the reference itself makes in the task's dtype (deep
reductions; both workers run float32 in float32, cuDNN's TF32 off). ``rtol`` is 1e-4 for
float32 (hundreds of ulps: reordered sums pass, while bf16 or TF32 arithmetic,
errors near 4e-3 and 5e-4 of rms on zero-mean inputs, fails), 1e-2 for float16,
2e-2 for bfloat16, 1e-9 for float64. Integer and boolean outputs must be exact.
NaN and ±Inf must sit at exactly the reference's positions. A float32 output
that fails with errors no larger than 3e-2 of scale is named PRECISION_LOSS
(the band of bf16/fp16/TF32 arithmetic); larger errors are WRONG_OUTPUT.

The rounding model, one for every check (trials, timed calls' elements and
digests): the reference's rounding is measured relative to the rms of its
task-dtype output (``relative_rounding``), as the largest over several draws
(the reference worker's calibration draws and every trial), and a check grants
twice it times the rms of the output at hand (``rounding_slack``), or twice this
draw's own ``max|n - e|`` if larger; three times where the comparand is the
reference in its own dtype (timed calls), which carries one rounding itself. One draw alone is not enough where the
output is rounding noise around an exact value (a mean over a normalised axis):
there the noise's largest element varies from draw to draw, and an honest
rewrite that is not bit-identical makes noise of its own.
"""

from __future__ import annotations

from typing import Any

from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import Verdict
from pytest_cudal1.wire import Unsupported

RTOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2, "float64": 1e-9}
DEFAULT_RTOL = 1e-4
PRECISION_LOSS_BAND = 3e-2
ROUNDING_FACTOR = 2.0  # a candidate may round twice as much as the reference does
ROUNDING_BLOCK = 1 << 22  # elements per block of the rounding measure and the comparison (``_blocks``)


# Timed inputs are the task's scaled by up to 1.5 per element (``timing_inputs.TimingInputs``): a bilinear op's
# absolute rounding grows by up to this much over what the trials measured.
REFILL_GAIN = 1.5 ** 2


def rounding_slack(scale: float, rounding: float, against_native: bool = False, floor: float = 0.0) -> float:
    """The absolute slack a check grants: ``ROUNDING_FACTOR`` times the reference's relative rounding times
    the scale (rms) of the output at hand; once more against the reference in its own dtype (timed calls),
    which carries that rounding itself. So a candidate that passes its trials passes its timed calls.

    ``floor``: the reference's absolute rounding (``absolute_rounding``), for outputs whose error is set by
    the inputs' magnitudes rather than the output's (a sum with cancellation: the rms of a near-zero sum
    says nothing about its rounding)."""
    return (ROUNDING_FACTOR + against_native) * max(rounding * scale, floor)


def relative_rounding(native: Any, expected: Any) -> float:
    """The reference's own rounding on one draw: max|n - e| over the rms of ``n`` (largest over tensors)."""
    return _rounding(native, expected, relative=True)


def absolute_rounding(native: Any, expected: Any) -> float:
    """The reference's own rounding on one draw, absolute: max|n - e| over finite elements (largest over tensors)."""
    return _rounding(native, expected, relative=False)


def _rounding(native: Any, expected: Any, relative: bool) -> float:
    """In blocks of ``ROUNDING_BLOCK`` elements: a masked copy of a 1.6e9-element output (and its int64
    index array, 25.6 GB for a 2-D one) ran the reference out of memory on the H200."""
    import torch

    if isinstance(native, torch.Tensor) and isinstance(expected, torch.Tensor):
        if not native.is_floating_point() or native.shape != expected.shape:
            return 0.0
        err = torch.zeros((), dtype=torch.float64, device=native.device)
        squares, count = err.clone(), err.clone()
        for _, (a, b) in _blocks(native.device, native, expected):
            finite = torch.isfinite(a) & torch.isfinite(b)
            err = torch.maximum(err, torch.where(finite, (a - b).abs(), 0.0).max())
            squares += torch.where(finite, a * a, 0.0).sum()
            count += finite.sum()
        if not bool(count > 0):
            return 0.0
        if not relative:
            return float(err)
        scale = float((squares / count).sqrt())
        return float(err) / scale if scale > 0 else 0.0
    if isinstance(native, (list, tuple)) and isinstance(expected, (list, tuple)):
        return max((_rounding(n, e, relative) for n, e in zip(native, expected)), default=0.0)
    return 0.0


def compare(candidate: Any, expected: Any, native: Any = None, where: str = "output",
            rounding: float = 0.0, floor: float = 0.0) -> Verdict | None:
    """None when ``candidate`` matches; otherwise the failing Verdict with evidence.

    ``rounding``: the reference's relative rounding (``relative_rounding``, the largest seen), ``floor`` its
    absolute rounding (``rounding_slack``); timed-call checks compare against the reference in its own
    dtype (``native`` None) and rely on them alone.
    """
    import torch

    if isinstance(candidate, Unsupported):
        return Verdict(Reason.STRUCTURE_MISMATCH, f"{where} is a {candidate.type_name} ({candidate.why or 'not a plain value'})",
                       {"where": where, "type": candidate.type_name})
    if isinstance(expected, torch.Tensor):
        if not isinstance(candidate, torch.Tensor):
            return _structure(where, expected, candidate)
        return _compare_tensor(candidate, expected, native if isinstance(native, torch.Tensor) else None, where,
                               rounding=rounding, floor=floor)
    if isinstance(expected, (list, tuple)):
        if type(candidate) is not type(expected) or len(candidate) != len(expected):
            return _structure(where, expected, candidate)
        nat = native if isinstance(native, (list, tuple)) and len(native) == len(expected) else [None] * len(expected)
        for i, (c, e, n) in enumerate(zip(candidate, expected, nat)):
            bad = compare(c, e, n, f"{where}[{i}]", rounding, floor)
            if bad:
                return bad
        return None
    if isinstance(expected, dict):
        if not isinstance(candidate, dict) or set(candidate) != set(expected):
            return _structure(where, expected, candidate)
        for k in expected:
            bad = compare(candidate[k], expected[k], native.get(k) if isinstance(native, dict) else None,
                          f"{where}[{k!r}]", rounding, floor)
            if bad:
                return bad
        return None
    if isinstance(expected, float) and isinstance(candidate, (int, float)) and not isinstance(candidate, bool):
        return _compare_tensor(torch.tensor(float(candidate)), torch.tensor(expected, dtype=torch.float64), None, where,
                               check_meta=False)
    if candidate != expected or type(candidate) is not type(expected):
        return Verdict(Reason.WRONG_OUTPUT, f"{where}: {candidate!r} != {expected!r}", {"where": where})
    return None


def within_bounds(candidate: list[Any], expected: list[Any], rounding: float, floor: float) -> bool:
    """Whether every floating tensor of ``candidate`` passes ``compare`` against ``expected`` (the reference in its
    own dtype, as timed calls are checked), judged for all of them in one pass: a few kernels and one wait for a
    sample's sampled elements, where ``compare`` takes some forty kernels and several waits per tensor (most of the
    element checks' time on an H100). False where any fails or does not qualify (non-floating, or a shape, dtype
    or device apart): ``compare`` then finds and names it. Elements that come within a billionth of their bound
    are left to ``compare`` too, so this never passes what it would fail."""
    import torch

    if not expected or not isinstance(candidate, list) or len(candidate) != len(expected):
        return False
    for c, e in zip(candidate, expected):
        if not (isinstance(c, torch.Tensor) and isinstance(e, torch.Tensor) and e.is_floating_point()
                and c.shape == e.shape and c.dtype == e.dtype == expected[0].dtype
                and _device_type(c) == _device_type(e) and e.device == expected[0].device):
            return False
    device = expected[0].device
    sizes = [e.numel() for e in expected]
    got = torch.cat([c.reshape(-1) for c in candidate]).to(device=device, dtype=torch.float64)
    want = torch.cat([e.reshape(-1) for e in expected]).to(torch.float64)
    segment = torch.repeat_interleave(torch.arange(len(sizes), device=device), torch.tensor(sizes, device=device))
    finite = torch.isfinite(want)
    squares = torch.zeros(len(sizes), dtype=torch.float64, device=device).index_add_(
        0, segment, torch.where(finite, want * want, 0.0))
    counts = torch.zeros(len(sizes), dtype=torch.float64, device=device).index_add_(0, segment, finite.double())
    rms = (squares / counts.clamp(min=1)).sqrt()
    slack = (ROUNDING_FACTOR + 1) * torch.clamp(rounding * rms, min=floor)  # ``rounding_slack``, against native
    rtol = RTOL.get(str(expected[0].dtype).removeprefix("torch."), DEFAULT_RTOL)
    bound = rtol * (want.abs() + rms[segment]) + slack[segment]
    err = torch.where(finite, (got - want).abs(), 0.0)
    same_kind = ((torch.isnan(got) == torch.isnan(want)) & (torch.isposinf(got) == torch.isposinf(want))
                 & (torch.isneginf(got) == torch.isneginf(want)))
    return bool((same_kind & (err <= bound * (1 - 1e-9))).all())


def _structure(where: str, expected: Any, candidate: Any) -> Verdict:
    return Verdict(Reason.STRUCTURE_MISMATCH, f"{where}: expected {_kind(expected)}, got {_kind(candidate)}",
                   {"where": where, "expected": _kind(expected), "got": _kind(candidate)})


def _kind(v: Any) -> str:
    import torch

    if isinstance(v, torch.Tensor):
        return f"Tensor{list(v.shape)}"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__} of {len(v)}"
    return type(v).__name__


def _device_type(t: Any) -> str:
    return str(getattr(t, "wire_device", t.device)).split(":")[0]


def _compare_tensor(c: Any, e: Any, n: Any, where: str, check_meta: bool = True,
                    rounding: float = 0.0, floor: float = 0.0) -> Verdict | None:
    import torch

    ev: dict[str, Any] = {"where": where}
    if tuple(c.shape) != tuple(e.shape):
        return Verdict(Reason.SHAPE_MISMATCH, f"{where}: shape {list(c.shape)}, expected {list(e.shape)}",
                       {**ev, "shape": list(c.shape), "expected_shape": list(e.shape)})
    want_dtype = (n if n is not None else e).dtype
    if check_meta and c.dtype != want_dtype:
        return Verdict(Reason.DTYPE_MISMATCH, f"{where}: dtype {c.dtype}, expected {want_dtype}",
                       {**ev, "dtype": str(c.dtype), "expected_dtype": str(want_dtype)})
    ref_dev = _device_type(n if n is not None else e)
    if check_meta and _device_type(c) != ref_dev:
        return Verdict(Reason.DEVICE_MISMATCH, f"{where}: on {_device_type(c)}, expected {ref_dev}",
                       {**ev, "device": _device_type(c), "expected_device": ref_dev})
    if not (e.is_floating_point() or e.is_complex()):
        same = torch.eq(c, e)
        if bool(same.all()):
            return None
        idx = _unravel(int((~same).reshape(-1).nonzero()[0]), e.shape)
        return Verdict(Reason.WRONG_OUTPUT, f"{where}: {int((~same).sum())} of {e.numel()} elements differ; first at {idx}",
                       {**ev, "index": idx, "got": c[idx].item(), "expected": e[idx].item(), "n_bad": int((~same).sum())})
    return _compare_floats(c, e, n, where, want_dtype, rounding, floor)


def _blocks(device: Any, *tensors: Any) -> Any:
    """(start, each tensor's block as float64 on ``device``) over the flattened tensors, ``ROUNDING_BLOCK``
    elements at a time: no full-size float64 copy or masked copy of a large output is ever made."""
    import torch

    flat = [t.detach().reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), ROUNDING_BLOCK):
        yield start, [f[start:start + ROUNDING_BLOCK].to(device=device, dtype=torch.float64) for f in flat]


def _first(counts: list[Any], firsts: list[Any], starts: list[int]) -> tuple[int, int]:
    """(how many, flat index of the first) from per-block counts and first positions."""
    import torch

    total = torch.stack(counts)
    block = int((total > 0).int().argmax())
    return int(total.sum()), starts[block] + int(firsts[block])


def _compare_floats(c: Any, e: Any, n: Any, where: str, want_dtype: Any, rounding: float,
                    floor: float) -> Verdict | None:
    """Floating-point outputs, in two passes over blocks: non-finite positions and the scales (the rms of the
    expected output, the reference's own error), then each element against its bound."""
    import torch

    ev: dict[str, Any] = {"where": where}
    if not e.numel():
        return None
    native = n if n is not None and n.shape == e.shape else None  # its own rounding widens the slack
    names = (("NaN", torch.isnan), ("+Inf", torch.isposinf), ("-Inf", torch.isneginf))
    differ: dict[str, tuple[list[Any], list[Any]]] = {name: ([], []) for name, _ in names}
    starts: list[int] = []
    zero = torch.zeros((), dtype=torch.float64, device=e.device)
    finite_count, squares, native_squares, native_err = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    for start, (cb, eb, *nb) in _blocks(e.device, c, e, *([native] if native is not None else [])):
        starts.append(start)
        for name, fn in names:
            diff = fn(cb) != fn(eb)
            differ[name][0].append(diff.sum())
            differ[name][1].append(diff.int().argmax())
        finite = torch.isfinite(eb)
        finite_count += finite.sum()
        squares += torch.where(finite, eb * eb, 0.0).sum()
        if nb:
            native_squares += torch.where(finite, nb[0] * nb[0], 0.0).sum()
            native_err = torch.maximum(native_err, torch.where(finite, (nb[0] - eb).abs(), 0.0).max())
    for name, _ in names:
        count, flat = _first(*differ[name], starts)
        if count:
            idx = _unravel(flat, e.shape)
            got, want = float(c[idx]), float(e[idx])
            return Verdict(Reason.NONFINITE_MISMATCH,
                           f"{where}: {name} positions differ at {count} elements; first at {idx} "
                           f"(got {got}, expected {want})",
                           {**ev, "index": idx, "got": got, "expected": want, "n_bad": count})
    count = int(finite_count)
    if not count:
        return None
    rms = float((squares / count).sqrt())
    rtol = RTOL.get(str(want_dtype).removeprefix("torch."), DEFAULT_RTOL)
    if native is None:
        slack = rounding_slack(rms, rounding, against_native=n is None, floor=floor)
    else:
        slack = max(rounding_slack(float((native_squares / count).sqrt()), rounding, floor=floor),
                    ROUNDING_FACTOR * float(native_err))
    n_bad, max_abs, max_rel, worst, worst_at = zero.clone(), zero.clone(), zero.clone(), [], []
    for _, (cb, eb) in _blocks(e.device, c, e):
        finite = torch.isfinite(eb)
        err = torch.where(finite, (cb - eb).abs(), 0.0)
        scale = eb.abs() + rms
        bound = rtol * scale + slack
        n_bad += (err > bound).sum()
        max_abs = torch.maximum(max_abs, err.max())
        max_rel = torch.maximum(max_rel, torch.where(finite, err / scale, 0.0).max())
        ratio = torch.where(finite, err / bound, 0.0)
        worst.append(ratio.max())
        worst_at.append(ratio.argmax())
    if not int(n_bad):
        return None
    block = int(torch.stack(worst).argmax())
    idx = _unravel(starts[block] + int(worst_at[block]), e.shape)
    evidence = {
        **ev, "index": idx, "got": float(c[idx]), "expected": float(e[idx]),
        "max_abs_err": float(max_abs), "max_rel_err": float(max_rel),
        "n_bad": int(n_bad), "numel": e.numel(), "rtol": rtol, "rms": rms, "slack": slack,
    }
    # Errors between float32 tolerance and a few bf16 ulps: the signature of reduced-precision math.
    reason = Reason.PRECISION_LOSS if want_dtype == torch.float32 and evidence["max_rel_err"] <= PRECISION_LOSS_BAND else Reason.WRONG_OUTPUT
    return Verdict(reason,
                   f"{where}: {evidence['n_bad']} of {e.numel()} elements beyond tolerance; worst at {idx}: "
                   f"got {evidence['got']:.6g}, expected {evidence['expected']:.6g} "
                   f"(max abs err {evidence['max_abs_err']:.3g}, max rel err {evidence['max_rel_err']:.3g}, rtol {rtol:g})",
                   evidence)


def _unravel(flat: int, shape: Any) -> tuple[int, ...]:
    idx = []
    for dim in reversed(tuple(shape)):
        idx.append(flat % dim)
        flat //= dim
    return tuple(reversed(idx))
