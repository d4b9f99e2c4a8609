"""What every timed call's output must pass, judged in the controller from what both workers report: its digest
against the reference's for the same inputs (``fingerprints_match``), no values of an earlier call made on other
inputs (keyed by ``digest_key``), and a random subset of its elements compared in full in the reference worker."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any

from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import Verdict
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from pytest_cudal1.timing import WallClock


# The projections' tolerance, in multiples of the norm of an error at the per-element bound. Each
# projection covers one class of positions, so their squares sum to about the error's squared L2 norm:
# spread over the classes it passes 16 times that norm squared with odds ~1e-30, held in one class with
# odds ~6e-5; honest errors sit far inside the bound, while bf16 rounding of a float32 output is about
# 80 times it (squared).
DIGEST_SIGMAS = 4.0
# Float64 summation's own rounding, relative to the sums' scale.
DIGEST_EXACT = 1e-12
# Elements per output tensor of every timed call compared in full (all of a smaller tensor).
SAMPLED_ELEMENTS = 256


def fingerprints_match(cand: list[list[float]], ref: list[list[float]], rounding: float = 0.0,
                       floor: float = 0.0) -> bool:
    """Per-tensor digests (``digests.fingerprint``) agree within what the comparison's tolerance allows.

    With ``b_i = rtol (|e_i| + rms) + slack`` the per-element bound of ``compare`` (``slack`` from the
    reference's relative ``rounding`` and absolute ``floor``), a candidate within it everywhere moves the sums by at most
    ``sum b_i`` and the sum of squares by at most ``sum b_i (2|e_i| + b_i)``; the random projections
    (one per class of positions) move by about the error's L2 norm in all, so they must stay within
    ``DIGEST_SIGMAS`` times ``||b||``.
    Numel, non-finite count and the dtype's rtol must be equal. All from the reference's digest alone.
    """
    from pytest_cudal1.compare import rounding_slack

    if len(cand) != len(ref):
        return False
    for c, r in zip(cand, ref):
        if len(c) != len(r) or c[0] != r[0] or c[4] != r[4] or c[5] != r[5]:
            return False
        n, total, a, q, _, rtol = r[:6]
        if n == 0:
            continue
        rms = math.sqrt(q / n)
        slack = rounding_slack(rms, rounding, against_native=True, floor=floor) if rtol else 0.0
        b1 = rtol * (a + n * rms) + n * slack  # >= sum b_i
        b_abs_e = rtol * (q + rms * a) + slack * a  # = sum b_i |e_i|; b2 below = sum b_i^2
        b2 = rtol ** 2 * (q + 2 * rms * a + n * rms ** 2) + 2 * rtol * slack * (a + n * rms) + n * slack ** 2
        exact = DIGEST_EXACT * (a + n * rms) + 1e-300
        if abs(c[1] - total) > b1 + exact or abs(c[2] - a) > b1 + exact:
            return False
        if abs(c[3] - q) > 2 * b_abs_e + b2 + DIGEST_EXACT * q + 1e-300:
            return False
        moved = sum((x - y) ** 2 for x, y in zip(c[6:-1], r[6:-1]))  # the projections; last, the hash
        if moved > DIGEST_SIGMAS ** 2 * b2 + (exact * math.sqrt(n)) ** 2:
            return False
    return True


def well_formed(fp: Any, like: list[list[Any]]) -> bool:
    """A digest sent by the candidate's worker has the reference's layout (per tensor, as many numbers) and only
    numbers, with an integer hash: what ``fingerprints_match`` and ``digest_key`` read, checked before they do."""
    return (isinstance(fp, list) and len(fp) == len(like)
            and all(isinstance(c, list) and len(c) == len(r) and len(c) > 6 and isinstance(c[-1], int)
                    and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in c)
                    for c, r in zip(fp, like)))


def digest_key(fp: list[list[Any]]) -> tuple[Any, ...]:
    """One output's exact values, as a key: each tensor's numel and the hash of its bits (the digest's last)."""
    return tuple(x for t in fp for x in (t[0], t[-1]))


class CallChecks:
    """Checks over every timed call: worker flags, digests against the reference's, replayed values, and
    a random subset of every call's elements compared in full in the reference worker."""

    def __init__(self, seen: dict[tuple[Any, ...], list[list[Any]]], reference: WorkerProcess,
                 candidate: WorkerProcess, rng: random.Random, timeout: float, clock: WallClock) -> None:
        self.seen = seen  # candidate output's key -> the reference's digest then, starting with the correctness trials
        self.reference, self.candidate, self.rng, self.timeout = reference, candidate, rng, timeout
        self.clock = clock

    def __call__(self, pair: int, cand: dict[str, Any], ref: dict[str, Any], seed: int) -> Verdict | None:
        """Verdict on one sample (drawn from ``seed``) of both sides, or None."""
        for f in cand.get("flags", []):
            return Verdict(Reason(f["code"]), f"timed call: {f['detail']}", {"pair": pair})
        if "fingerprints" not in cand:
            return Verdict(Reason.PROTOCOL_VIOLATION, "timed sample without output digests", {"pair": pair})
        if len(cand["fingerprints"]) != len(ref["fingerprints"]):
            return Verdict(Reason.PROTOCOL_VIOLATION, f"timed sample with {len(cand['fingerprints'])} output digests "
                           f"for {len(ref['fingerprints'])} calls", {"pair": pair})
        rounding = {"rounding": float(ref.get("rounding") or 0.0), "floor": float(ref.get("rounding_floor") or 0.0)}
        for k, (cfp, rfp) in enumerate(zip(cand["fingerprints"], ref["fingerprints"])):
            if not well_formed(cfp, rfp):
                return Verdict(Reason.PROTOCOL_VIOLATION, f"timed call {k} of pair {pair}: a malformed output digest",
                               {"pair": pair, "call": k})
            earlier = self.seen.setdefault(digest_key(cfp), rfp)
            if fingerprints_match(cfp, rfp, **rounding):
                continue
            own = self._own(seed, k, rounding)
            if fingerprints_match(cfp, rfp, **own):
                continue
            if digest_key(earlier) != digest_key(rfp):
                return Verdict(Reason.OUTPUT_REPLAY, f"timed call {k} of pair {pair} returned the values of an earlier "
                               "call made on different inputs", {"pair": pair, "call": k})
            return Verdict(Reason.WRONG_OUTPUT, f"timed call {k} of pair {pair}: output digest differs from the "
                           f"reference's on the same inputs", {"pair": pair, "call": k, "digest": cfp, "expected": rfp,
                                                               "rounding": own})
        return self._elements(pair, seed)

    def _own(self, seed: int, call: int, trials: dict[str, float]) -> dict[str, float]:
        """The rounding call ``call`` of the sample drawn from ``seed`` is granted on its own inputs as well as the
        trials' (``ReferenceWorker.call_rounding``): asked only for a call that fails under the trials'."""
        return self.reference.request("call_rounding", {"seed": seed, "call": call}, self.timeout * 4) or trials

    def _elements(self, pair: int, seed: int) -> Verdict | None:
        """Elements at positions drawn now, after the calls returned, from every call of the sample."""
        body = {"seed": self.rng.getrandbits(31), "count": SAMPLED_ELEMENTS}
        picked = self.candidate.request("elements", body, self.timeout, raw=True)
        try:
            bad = self.reference.request("check_elements", {**body, "sample_seed": seed, "outputs": picked},
                                         self.timeout * 4)
        except WorkerFailure as exc:
            raise WorkerFailure(Reason.REFERENCE_ERROR, f"checking the candidate's sampled elements failed in the "
                                f"reference worker: {exc.message}", exc.evidence) from None
        self.clock.lap("element_checks")
        if bad is None:
            return None
        return Verdict(Reason(bad["reason"]), f"pair {pair}, elements of every timed call compared in full: "
                       f"{bad['message']}", {**bad["evidence"], "pair": pair})
