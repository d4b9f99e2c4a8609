"""Red-team cases for issue 14's checks (items 3, 7, 8, 12), judged by the real plugin on the CPU.

- Every timed call's output is checked (item 3): candidates that are honest only on the trials and
  on the last call of each multi-call timed sample.
- Shortcuts on the part of the input a candidate inspects (item 7): a peek at a few elements.
- Families that keep the task's preconditions (item 8): honest kernels that rely on what
  ``get_inputs`` guarantees (triangular, symmetric, class labels in range) must pass.
- Outputs that are rounding noise (item 12): honest rewrites of an L2/23-shaped task that are not
  bit-identical to the reference must pass; so must an exact rewrite that sums in another order (CUDA-L1's
  L1/59: a (k, k, 1) conv3d as a conv2d).
"""

from __future__ import annotations

import re

import pytest

from .cheatkit import Case, explain, groups_from, lookup, planted, verdict_of

OK = "OK"
TRIL, SYM, CE, GN, SORT, CLAMP, CONV = ("31_TrilMatmul", "32_SymMatmul", "33_CrossEntropy", "35_Conv3dGroupNormMean",
                                        "36_Sort", "37_ClampRand", "38_Conv3dFlatKernel")

CASES: list[Case] = [
    planted(SORT, "sort_honest", OK, group="timed-calls"),
    planted(SORT, "sort_unsorted_between", "WRONG_OUTPUT", group="timed-calls",
            why="unsorted on every timed call but a sample's last: same sums, wrong order"),
    planted(SORT, "sort_bf16_between", "WRONG_OUTPUT", "PRECISION_LOSS", group="timed-calls",
            why="bf16-rounded on every timed call but a sample's last"),
    planted(CLAMP, "clamp_honest", OK, group="peek"),
    planted(CLAMP, "clamp_peek_skip", "WRONG_OUTPUT", group="peek",
            why="skips the clamp when its first 32 elements look like rand's"),
    planted(TRIL, "tril_skip_blocks", OK, group="preconditions", why="never reads the zero triangles"),
    planted(CE, "ce_gather", OK, group="preconditions", why="labels in range"),
    planted(GN, "gn_mean_manual", OK, group="rounding-noise", why="group norm written out: noise of its own"),
    planted(GN, "gn_mean_exact", OK, group="rounding-noise", why="the exact value the noise is around"),
    planted(CONV, "conv2d_fold_depth", OK, group="rounding-noise", why="exact rewrite, another summation order"),
]

SYMMETRIC = planted(SYM, "sym_transposed", OK, group="preconditions", why="A.T for A: symmetric inputs")
# More trials for the peek group: the second trial is always mixed, and half the generated recipes are.
GROUPS = groups_from([*CASES, SYMMETRIC], extra={"peek": ("--cudal1-trials=6",)})


def _params(cases: list[Case]) -> list[object]:
    return [pytest.param(c, id=c.id, marks=pytest.mark.judge_group(GROUPS[c.group])) for c in cases]


@pytest.mark.parametrize("case", _params(CASES))
def test_verdict(case: Case, judged) -> None:
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    assert verdict_of(rec)[0] in case.expect, explain(rec, case.expect)


@pytest.mark.parametrize("case", _params([SYMMETRIC]))
def test_symmetric_inputs_stay_symmetric_in_every_trial(case: Case, judged) -> None:
    """A kernel that relies on symmetric inputs is correct on every trial and every timed call: the timed
    refill keeps a symmetric input symmetric (``timing_inputs._rescale_into``)."""
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    reason, _ = verdict_of(rec)
    assert reason == OK, explain(rec, OK)


@pytest.mark.parametrize("case", _params([c for c in CASES if c.name.endswith("_between")]))
def test_wrong_timed_calls_are_caught_while_timing(case: Case, judged) -> None:
    """The between-calls cheats pass every trial: only the timed-call checks can name them."""
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    evidence = (rec.get("verdict") or {}).get("evidence") or {}
    assert "pair" in evidence, explain(rec, case.expect) + f"\n  evidence: {evidence}"


@pytest.mark.parametrize("case", _params([c for c in CASES if c.name == "clamp_peek_skip"]))
def test_peek_failure_is_shrunk_to_a_small_mixed_recipe(case: Case, judged) -> None:
    """The failing recipe in the verdict is a mixed one, shrunk to at most one region and few outliers."""
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    recipe = str(((rec.get("verdict") or {}).get("evidence") or {}).get("recipe"))
    found = re.search(r"family='mixed', scale=[^,]+, regions=(\d+), outliers=(\d+)", recipe)
    assert found, explain(rec, case.expect) + f"\n  recipe: {recipe}"
    regions, outliers = map(int, found.groups())
    assert regions + outliers <= 2, f"not shrunk: {recipe}"
