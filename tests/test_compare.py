"""The output comparison policy (pytest_cudal1.compare), on real tensors.

Element i passes when |c - e| <= rtol(dtype) * (|e| + rms(e)) + 2 * max|n - e|,
with e the float64 reference and n the reference in the task's dtype. Honest
float32 arithmetic in another order passes; bf16 arithmetic does not.
"""

from __future__ import annotations

import math

import pytest
import torch

from pytest_cudal1.compare import RTOL, compare
from pytest_cudal1.reasons import Reason
from pytest_cudal1.wire import Unsupported

# A float32 output with bf16-level errors fails; the harness may name that
# failure PRECISION_LOSS (when the code exists) rather than WRONG_OUTPUT.
PRECISION_FAILURES = {Reason.WRONG_OUTPUT, getattr(Reason, "PRECISION_LOSS", Reason.WRONG_OUTPUT)}


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def matmul():
    """A zero-mean float32 matmul: (native float32 result, float64 reference, A, B)."""
    a = torch.randn(64, 512, generator=gen(1))
    b = torch.randn(512, 48, generator=gen(2))
    return a @ b, a.double() @ b.double(), a, b


# ------------------------------------------------------------------ tolerance ---

def test_exact_and_native_outputs_pass(matmul) -> None:
    native, expected, _, _ = matmul
    assert compare(expected.float(), expected, native) is None
    assert compare(native, expected, native) is None


def test_honest_fp32_reordering_passes(matmul) -> None:
    native, expected, a, b = matmul
    # the same products summed in another order (chunks of K, last chunk first), all in float32
    chunks = [a[:, k:k + 64] @ b[k:k + 64] for k in range(0, 512, 64)]
    reordered = torch.zeros_like(native)
    for part in reversed(chunks):
        reordered += part
    assert not torch.equal(reordered, native)  # really a different rounding
    assert compare(reordered, expected, native) is None
    # an elementwise sum over K, a third order
    outer = (a[:, :, None] * b[None, :, :]).sum(dim=1)
    assert compare(outer, expected, native) is None
    # passes on rtol alone: native here is the float64 result rounded once, so the slack is a few ulps
    assert compare(outer, expected, expected.float()) is None


def test_bf16_roundtrip_of_zero_mean_matmul_fails(matmul) -> None:
    native, expected, a, b = matmul
    bf16_inputs = (a.bfloat16().float() @ b.bfloat16().float())
    for cheat in (native.bfloat16().float(), bf16_inputs):
        bad = compare(cheat, expected, native)
        assert bad is not None
        assert bad.reason in PRECISION_FAILURES
        assert bad.evidence["rtol"] == RTOL["float32"]
        assert bad.evidence["n_bad"] > native.numel() // 4


def test_float16_outputs_get_a_looser_rtol() -> None:
    x = torch.randn(32, 32, generator=gen(3))
    native = x.half()
    expected = x.double()
    # 0.5% relative error passes for float16 (rtol 1e-2) ...
    assert compare((x * 1.005).half(), expected, native) is None
    # ... but 5% does not
    bad = compare((x * 1.05).half(), expected, native)
    assert bad is not None and bad.reason is Reason.WRONG_OUTPUT and bad.evidence["rtol"] == RTOL["float16"]


def test_native_error_grants_twice_its_size() -> None:
    e = torch.randn(16, 16, dtype=torch.float64, generator=gen(4))
    delta = 0.01 * torch.where(torch.rand(16, 16, generator=gen(5)) > 0.5, 1.0, -1.0).double()
    native = (e + delta).float()
    assert compare((e + 1.9 * delta).float(), e, native) is None
    bad = compare((e + 2.6 * delta).float(), e, native)
    assert bad is not None and bad.reason in PRECISION_FAILURES
    assert math.isclose(bad.evidence["slack"], 0.02, rel_tol=1e-3)
    # against an exactly rounded native reference there is (almost) no slack, so the same error fails
    bad = compare((e + 1.9 * delta).float(), e, e.float())
    assert bad is not None and bad.reason in PRECISION_FAILURES


def test_near_zero_elements_are_judged_against_the_rms() -> None:
    e = torch.tensor([1.0, -1.0, 1e-12, 2.0], dtype=torch.float64)
    c = torch.tensor([1.0, -1.0, 1e-5, 2.0])  # huge relative error on the tiny element, tiny against rms
    assert compare(c, e, e.float()) is None
    c_bad = torch.tensor([1.0, -1.0, 1e-3, 2.0])
    bad = compare(c_bad, e, e.float())
    assert bad is not None and tuple(bad.evidence["index"]) == (2,)


# -------------------------------------------------------------------- evidence ---

def test_wrong_output_evidence_names_the_worst_element() -> None:
    e = torch.randn(5, 7, dtype=torch.float64, generator=gen(6))
    c = e.float().clone()
    c[1, 2] += 0.5
    c[3, 6] += 3.0
    bad = compare(c, e, e.float())
    assert bad is not None and bad.reason is Reason.WRONG_OUTPUT
    ev = bad.evidence
    assert tuple(ev["index"]) == (3, 6)
    assert math.isclose(ev["got"], float(c[3, 6]), rel_tol=1e-6)
    assert math.isclose(ev["expected"], float(e[3, 6]), rel_tol=1e-12)
    assert math.isclose(ev["max_abs_err"], 3.0, rel_tol=1e-5)
    assert ev["max_rel_err"] > 0.5
    assert ev["n_bad"] == 2 and ev["numel"] == 35
    assert ev["where"] == "output"
    assert "(3, 6)" in bad.message and "2 of 35" in bad.message


def test_integer_outputs_must_be_exact() -> None:
    e = torch.arange(12).reshape(3, 4)
    assert compare(e.clone(), e) is None
    c = e.clone()
    c[2, 1] += 1
    bad = compare(c, e)
    assert bad.reason is Reason.WRONG_OUTPUT
    assert tuple(bad.evidence["index"]) == (2, 1) and bad.evidence["n_bad"] == 1
    assert compare(torch.tensor([True, False]), torch.tensor([True, True])).reason is Reason.WRONG_OUTPUT


# ----------------------------------------------------------- non-finite values ---

def test_nan_at_the_same_positions_passes() -> None:
    e = torch.tensor([1.0, float("nan"), float("inf"), -2.0], dtype=torch.float64)
    assert compare(e.float(), e, e.float()) is None


@pytest.mark.parametrize("got, index, label", [
    ([1.0, 2.0, float("inf"), -2.0], 1, "NaN"),           # reference NaN at 1, candidate finite
    ([float("nan"), float("nan"), float("inf"), -2.0], 0, "NaN"),  # extra NaN at 0
    ([1.0, float("nan"), float("-inf"), -2.0], 2, "+Inf"),  # sign of the Inf differs
    ([1.0, float("nan"), float("inf"), float("inf")], 3, "+Inf"),
])
def test_nonfinite_position_mismatch(got: list[float], index: int, label: str) -> None:
    e = torch.tensor([1.0, float("nan"), float("inf"), -2.0], dtype=torch.float64)
    bad = compare(torch.tensor(got), e, e.float())
    assert bad is not None and bad.reason is Reason.NONFINITE_MISMATCH
    assert tuple(bad.evidence["index"]) == (index,)
    assert label in bad.message


def test_all_nonfinite_reference_with_matching_candidate_passes() -> None:
    e = torch.full((3,), float("nan"), dtype=torch.float64)
    assert compare(torch.full((3,), float("nan")), e, e.float()) is None


# ------------------------------------------------------- shape / dtype / structure ---

def test_shape_mismatch() -> None:
    e = torch.zeros(4, 8, dtype=torch.float64)
    bad = compare(torch.zeros(8, 4), e, e.float())
    assert bad.reason is Reason.SHAPE_MISMATCH
    assert bad.evidence["shape"] == [8, 4] and bad.evidence["expected_shape"] == [4, 8]
    assert compare(torch.zeros(32), e, e.float()).reason is Reason.SHAPE_MISMATCH
    assert compare(torch.zeros(4, 8, 1), e, e.float()).reason is Reason.SHAPE_MISMATCH


def test_dtype_is_checked_against_the_native_reference() -> None:
    e = torch.ones(3, dtype=torch.float64)
    native = torch.ones(3)  # the task works in float32
    bad = compare(torch.ones(3, dtype=torch.float64), e, native)
    assert bad.reason is Reason.DTYPE_MISMATCH
    assert bad.evidence["dtype"] == "torch.float64" and bad.evidence["expected_dtype"] == "torch.float32"
    assert compare(torch.ones(3, dtype=torch.bfloat16), e, native).reason is Reason.DTYPE_MISMATCH
    assert compare(torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int32)).reason is Reason.DTYPE_MISMATCH


def test_device_mismatch_uses_the_wire_device() -> None:
    e = torch.ones(3, dtype=torch.float64)
    native = torch.ones(3)
    native.wire_device = "cuda:0"
    c = torch.ones(3)
    c.wire_device = "cpu"
    bad = compare(c, e, native)
    assert bad.reason is Reason.DEVICE_MISMATCH
    assert (bad.evidence["device"], bad.evidence["expected_device"]) == ("cpu", "cuda")
    c.wire_device = "cuda:1"  # another index of the same device type is fine
    assert compare(c, e, native) is None


@pytest.mark.parametrize("candidate, expected", [
    ((torch.ones(2),), torch.ones(2, dtype=torch.float64)),              # tuple for tensor
    (torch.ones(2), (torch.ones(2, dtype=torch.float64),)),              # tensor for tuple
    ([torch.ones(2)], (torch.ones(2, dtype=torch.float64),)),            # list for tuple
    ((torch.ones(2),), (torch.ones(2, dtype=torch.float64),) * 2),       # too short
    ({"a": torch.ones(2)}, {"b": torch.ones(2, dtype=torch.float64)}),   # other keys
    (None, torch.ones(2, dtype=torch.float64)),
    (3.0, torch.ones(2, dtype=torch.float64)),
    (Unsupported("Marked", "tensor subclass"), torch.ones(2, dtype=torch.float64)),
], ids=["tuple-for-tensor", "tensor-for-tuple", "list-for-tuple", "length", "dict-keys", "none", "float",
        "unsupported"])
def test_structure_mismatch(candidate, expected) -> None:
    bad = compare(candidate, expected)
    assert bad is not None and bad.reason is Reason.STRUCTURE_MISMATCH


def test_nested_outputs_report_where_they_fail() -> None:
    e = (torch.ones(2, dtype=torch.float64), {"h": torch.zeros(3, dtype=torch.float64)})
    native = (torch.ones(2), {"h": torch.zeros(3)})
    good = (torch.ones(2), {"h": torch.zeros(3)})
    assert compare(good, e, native) is None
    bad = compare((torch.ones(2), {"h": torch.tensor([0.0, 5.0, 0.0])}), e, native)
    assert bad.reason is Reason.WRONG_OUTPUT and bad.evidence["where"] == "output[1]['h']"
    bad = compare((torch.ones(2), {"h": torch.zeros(3, dtype=torch.float64)}), e, native)
    assert bad.reason is Reason.DTYPE_MISMATCH and bad.evidence["where"] == "output[1]['h']"
    bad = compare((torch.ones(2), {"h": torch.zeros(4)}), e, native)
    assert bad.reason is Reason.SHAPE_MISMATCH and "output[1]['h']" in bad.message


def test_python_scalars() -> None:
    assert compare(1.0 + 1e-9, 1.0) is None
    assert compare(1.5, 1.0).reason in PRECISION_FAILURES
    assert compare(3, 3) is None
    assert compare(3, 4).reason is Reason.WRONG_OUTPUT
    assert compare(True, 1).reason is Reason.WRONG_OUTPUT  # bool is not int here
    assert compare("a", "a") is None
