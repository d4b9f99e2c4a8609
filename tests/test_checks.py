"""Issue 14's checks at unit level (CPU): families that keep the task's preconditions, the mixed family,
the order- and precision-sensitive digest of timed calls, sampled elements, and the rounding model.

The judged end-to-end cases (real workers, real plugin runs) are in ``tests/cheats/test_checks_cpu.py``.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
from hypothesis import find

from pytest_cudal1 import compare as compare_module
from pytest_cudal1.compare import absolute_rounding, compare, relative_rounding, within_bounds
from pytest_cudal1.reasons import Reason
from pytest_cudal1.recipes import FAMILIES, SCALES, Recipe, draw_inputs, recipe_strategy
from pytest_cudal1.call_checks import digest_key, fingerprints_match
from pytest_cudal1.workers.digests import fingerprint, fingerprints, sampled_elements
from pytest_cudal1.workers.guards import reused

TASKS = Path(__file__).resolve().parent / "cheats" / "cases" / "tasks" / "level1"
RECIPES = [Recipe(seed=s, family=f, scale=c, regions=2 if f == "mixed" else 0, outliers=8 if f == "mixed" else 0)
           for s, (f, c) in enumerate((f, c) for f in FAMILIES for c in SCALES)]


def task_inputs(stem: str):
    return runpy.run_path(str(TASKS / f"{stem}.py"))["get_inputs"]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------ preconditions (item 8) ---

@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_triangular_inputs_stay_triangular(recipe: Recipe) -> None:
    """KernelBench L1/15: ``tril(rand)``; a family used to be applied after ``tril``."""
    for x in draw_inputs(task_inputs("31_TrilMatmul"), recipe, "cpu"):
        assert torch.equal(x, torch.tril(x)), f"{recipe}: not lower triangular"


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_symmetric_inputs_stay_symmetric(recipe: Recipe) -> None:
    """KernelBench L1/13: ``(A + A.T) / 2``."""
    for x in draw_inputs(task_inputs("32_SymMatmul"), recipe, "cpu"):
        assert torch.equal(x, x.T), f"{recipe}: not symmetric"


def _spd_inputs():
    a = torch.randn(16, 16)
    return [a @ a.T + 16 * torch.eye(16)]


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_positive_definite_inputs_stay_positive_definite(recipe: Recipe) -> None:
    (x,) = draw_inputs(_spd_inputs, recipe, "cpu")
    assert torch.equal(x, x.T) and bool((torch.linalg.eigvalsh(x.double()) > 0).all()), f"{recipe}: not SPD"


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_probabilities_stay_probabilities(recipe: Recipe) -> None:
    """KernelBench L1/98: ``(rand * rand(())).softmax(-1)``, a scalar draw included."""
    for x in draw_inputs(task_inputs("34_KLDiv"), recipe, "cpu"):
        assert bool((x >= 0).all()) and torch.allclose(x.sum(-1), torch.ones(x.shape[0]), atol=1e-5), str(recipe)


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_class_indices_stay_in_range(recipe: Recipe) -> None:
    """KernelBench L1/95: ``randint(0, num_classes, (batch,))`` labels beside float logits."""
    logits, labels = draw_inputs(task_inputs("33_CrossEntropy"), recipe, "cpu")
    assert labels.dtype == torch.int64 and labels.shape == (256,)
    assert int(labels.min()) >= 0 and int(labels.max()) < logits.shape[1], str(recipe)


def _integer_inputs():
    return [torch.randint(3, 11, (4096,)), torch.randint(7, (4096,)), torch.randint_like(torch.empty(4096), -5, 5),
            torch.empty(4096, dtype=torch.int32).random_(2, 9), torch.rand(4096)]


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_integer_draws_stay_in_the_tasks_range(recipe: Recipe) -> None:
    a, b, c, d, _ = draw_inputs(_integer_inputs, recipe, "cpu")
    for x, low, high in ((a, 3, 11), (b, 0, 7), (c, -5, 5), (d, 2, 9)):
        assert int(x.min()) >= low and int(x.max()) < high, f"{recipe}: {x.dtype} outside [{low}, {high})"


def test_mixed_outliers_reach_both_ends_of_an_integer_range() -> None:
    a, *_ = draw_inputs(_integer_inputs, Recipe(seed=5, family="mixed", outliers=8), "cpu")
    assert {3, 10} <= set(a.tolist())


def test_the_task_family_is_the_tasks_own_draw() -> None:
    torch.manual_seed(9)
    own = task_inputs("31_TrilMatmul")()
    drawn = draw_inputs(task_inputs("31_TrilMatmul"), Recipe(seed=9), "cpu")
    assert all(torch.equal(x, y) for x, y in zip(own, drawn))


def test_torch_factories_are_restored_after_a_draw() -> None:
    before = (torch.randn, torch.rand, torch.randint, torch.Tensor.uniform_, torch.Tensor.random_)
    draw_inputs(_integer_inputs, Recipe(seed=1, family="wide"), "cpu")
    with pytest.raises(ZeroDivisionError):
        draw_inputs(lambda: [torch.randn(3), 1 / 0], Recipe(seed=1, family="normal"), "cpu")
    assert before == (torch.randn, torch.rand, torch.randint, torch.Tensor.uniform_, torch.Tensor.random_)


# ------------------------------------------------------------------ mixed family (item 7) ---

def test_mixed_inputs_are_mostly_the_tasks_with_other_regions_and_sparse_outliers() -> None:
    """A peek at a few elements sees the task's distribution; elsewhere other families and outliers sit."""
    (x,) = draw_inputs(task_inputs("37_ClampRand"), Recipe(seed=2, family="mixed", regions=1, outliers=2), "cpu")
    task_like = ((x >= 0) & (x < 1)).float().mean()
    assert 0.5 < float(task_like) < 1.0
    (y,) = draw_inputs(task_inputs("37_ClampRand"), Recipe(seed=2, family="mixed", outliers=1), "cpu")
    off = ~((y >= 0) & (y < 1))
    assert 1 <= int(off.sum()) <= y.numel() // 1000 + 1, "outliers: about one per mille"
    assert float(y.abs().max()) > 1.0 or float(y.min()) < 0.0


def test_hypothesis_shrinks_a_mixed_recipe_toward_fewest_regions_and_outliers() -> None:
    minimal = find(recipe_strategy(), lambda r: r.family == "mixed" and r.regions + r.outliers > 0)
    assert minimal.regions + minimal.outliers == 1 and minimal.scale == SCALES[0] and minimal.seed == 0


# ------------------------------------------------------------- timed-call digest (item 3) ---

def test_digest_sees_order() -> None:
    """An unsorted 'sort' has the sorted output's sums; the projections tell them apart."""
    x = torch.randn(8, 256, generator=gen(1))
    right, wrong = torch.sort(x, dim=-1).values, x.clone()
    assert fingerprint(right)[0][:4] == pytest.approx(fingerprint(wrong)[0][:4], rel=1e-12)
    assert not fingerprints_match(fingerprint(wrong), fingerprint(right))


@pytest.mark.parametrize("n", [2048, 1 << 18])
def test_digest_sees_bf16_arithmetic_but_not_reordered_float32(n: int) -> None:
    e = torch.randn(n, dtype=torch.float64, generator=gen(2))
    native = e.float()
    assert not fingerprints_match(fingerprint(native.bfloat16().float()), fingerprint(native))
    reordered = (e * (1 + 2e-7 * torch.randn(n, dtype=torch.float64, generator=gen(3)))).float()
    assert fingerprints_match(fingerprint(reordered), fingerprint(native))


def test_digest_grants_the_references_rounding() -> None:
    """Rounding noise around zero (L2/23's shape): an exact zero matches within the reference's rounding."""
    noise = 1e-8 * torch.randn(128, generator=gen(4))
    exact = torch.zeros(128)
    assert not fingerprints_match(fingerprint(exact), fingerprint(noise))
    assert fingerprints_match(fingerprint(exact), fingerprint(noise), rounding=3.0)


def test_digest_of_integer_outputs_is_exact() -> None:
    x = torch.arange(1000)
    y = x.clone()
    y[7] += 1
    assert fingerprints_match(fingerprint(x.clone()), fingerprint(x))
    assert not fingerprints_match(fingerprint(y), fingerprint(x), rounding=1.0)


def test_sampled_elements_are_the_same_positions_on_both_sides() -> None:
    outs = [torch.randn(64, 64, generator=gen(k)) for k in range(3)] + [torch.arange(10)]
    copy = [o.clone() for o in outs]
    a, b = sampled_elements(outs, 77, 256), sampled_elements(copy, 77, 256)
    assert [t.shape for t in a] == [(256,)] * 3 + [(10,)]
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], sampled_elements(outs, 78, 256)[0])


# ------------------------------------------------------------------- rounding model (item 12) ---

def test_rounding_is_relative_to_the_outputs_rms() -> None:
    e = torch.randn(100, dtype=torch.float64, generator=gen(5))
    n = e + 1e-3 * torch.sign(e)
    assert relative_rounding(n, e) == pytest.approx(1e-3 / float(n.square().mean().sqrt()), rel=1e-9)
    assert relative_rounding(100 * n, 100 * e) == pytest.approx(relative_rounding(n, e), rel=1e-9)


def test_rounding_measured_elsewhere_widens_a_quiet_draw() -> None:
    """A draw whose own rounding happens to be small still gets the rounding seen on other draws."""
    e = torch.zeros(16, dtype=torch.float64)
    native = 1e-9 * torch.ones(16)  # this draw's noise
    candidate = torch.full((16,), -4e-9)  # noise of its own, four times the draw's
    assert compare(candidate, e, native) is not None
    assert compare(candidate, e, native, rounding=3.0) is None  # 2 * 3.0 * rms(native) = 6e-9


def test_a_trial_grants_the_absolute_rounding_seen_on_other_draws() -> None:
    """An output that is rounding noise around zero: this draw's own noise is quiet (rms 1e-9), while other
    draws' absolute rounding was 2e-8. A trial grants that floor as the timed calls do; the CI run of
    d3f0271 rejected an honest group norm written out (L1/35 red-team task) whose noise was 4.8e-8."""
    e = torch.zeros(16, dtype=torch.float64)
    native = 1e-9 * torch.ones(16)
    candidate = torch.full((16,), 3e-8)  # within 2 * 2e-8, thirty times this draw's noise
    assert compare(candidate, e, native, rounding=1.0) is not None
    assert compare(candidate, e, native, rounding=1.0, floor=2e-8) is None
    assert compare(torch.full((16,), 5e-8), e, native, rounding=1.0, floor=2e-8) is not None


def test_timed_checks_allow_for_the_rounding_the_native_reference_carries() -> None:
    native = 1e-9 * torch.ones(16)
    candidate = torch.full((16,), -4e-9)  # 5e-9 from the native reference: within 3 * 2.0 * 1e-9, not 2 *
    assert compare(candidate, native, None, rounding=2.0) is None
    assert compare(candidate, native, None, rounding=1.0) is not None


def sample_outputs(device: str) -> list:
    """One timed sample's outputs as candidates return them: tensors, tuples of mixed dtypes, an empty
    tensor, a non-tensor beside a tensor, a scalar."""
    g = gen(7)
    x = torch.randn(3, 257, generator=g)
    return [t.to(device) if isinstance(t, torch.Tensor) else t for t in (
        x, (x.double() * 2, torch.arange(5)), torch.empty(0), x[:, :3].half()) ] + [
        [x.sum().to(device), 3.5], torch.tensor(float("nan")).to(device)]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_samples_digests_read_back_together_are_each_calls_own(device: str) -> None:
    """The digests request digests a sample's outputs in batches and reads them back in one copy: each call's are
    what its output alone gives, in call order, the figures up to summation order and the hash of its bits
    exactly (the replay check keys trials and timed calls by it)."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    outs = sample_outputs(device)
    together = fingerprints(outs)
    alone = [fingerprint(o) for o in outs]
    assert [[t[-1] for t in fp] for fp in together] == [[t[-1] for t in fp] for fp in alone]
    assert all(isinstance(t[-1], int) for fp in together for t in fp)
    assert [[t[:-1] for t in fp] for fp in together] == [[pytest.approx(t[:-1], rel=1e-12, abs=1e-12) for t in fp]
                                                         for fp in alone]
    many = [torch.randn(100, 37, generator=gen(k)).to(device) for k in range(9)]
    keys = {digest_key(fp) for fp in fingerprints(many + [many[4].clone()])}
    assert len(keys) == 9  # a copy of a value hashes as the value; every other value apart
    assert [len(fp) for fp in together] == [1, 2, 1, 1, 1, 1]
    assert together[1][1][0] == 5.0 and together[2][0][:4] == [0.0, 0.0, 0.0, 0.0]
    assert fingerprints([]) == [] and fingerprints([None]) == [[]]


def test_outputs_digested_in_batches_digest_as_each_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's batched digests, run on the CPU: rows of one batch (sizes that are not whole words, bool, half,
    empty, several batches of one size) give each tensor's own figures up to summation order and its exact hash,
    and a value returned again in another batch keys alike."""
    from pytest_cudal1.workers import digests

    alone = sample_outputs("cpu") + [torch.randn(7, generator=gen(k)).half() for k in range(3)] + \
        [torch.randn(5, generator=gen(9)) > 0, torch.randn(5, generator=gen(10)) > 0, torch.empty(0), torch.empty(0)]
    expected = fingerprints(alone)
    monkeypatch.setattr(digests, "BATCHED_DEVICES", ("cpu",))
    monkeypatch.setattr(digests, "BATCH_ELEMENTS", 16)  # several batches of a size
    together = fingerprints(alone)
    assert [[t[-1] for t in fp] for fp in together] == [[t[-1] for t in fp] for fp in expected]
    assert [[t[:-1] for t in fp] for fp in together] == [[pytest.approx(t[:-1], rel=1e-12, abs=1e-12) for t in fp]
                                                         for fp in expected]
    wide = [torch.randn(33, generator=gen(k)) for k in range(5)]
    assert digest_key(fingerprints(wide)[3]) == digest_key(fingerprints([wide[3].clone()])[0])


@pytest.mark.gpu
def test_digest_and_sampled_elements_on_cuda() -> None:
    """The workers compute digests and sampled elements on the device of the outputs."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    x = torch.randn(8, 4096, generator=gen(6)).cuda()
    right, wrong = torch.sort(x, dim=-1).values, x.clone()
    assert fingerprints_match(fingerprint(right), fingerprint(right.cpu()))
    assert not fingerprints_match(fingerprint(wrong), fingerprint(right))
    assert not fingerprints_match(fingerprint(right.bfloat16().float()), fingerprint(right))
    on_gpu, on_cpu = sampled_elements([right], 5, 256), sampled_elements([right.cpu()], 5, 256)
    assert torch.equal(on_gpu[0].cpu(), on_cpu[0])


def test_the_references_rounding_measured_in_blocks_is_the_whole_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks that split rows, and NaN and inf in some of them, give the whole tensor's figures (H200: a
    masked copy of a 1.6e9-element output ran the reference out of memory)."""
    torch.manual_seed(0)
    native = torch.randn(5, 13)
    expected = native.double() + torch.randn(5, 13, dtype=torch.float64) * 1e-7
    native[1, 3], expected[4, 12] = float("nan"), float("inf")
    finite = torch.isfinite(native.double()) & torch.isfinite(expected)
    err = float((native.double() - expected)[finite].abs().max())
    rms = float(native.double()[finite].square().mean().sqrt())
    for block in (7, 13, 1 << 22):
        monkeypatch.setattr(compare_module, "ROUNDING_BLOCK", block)
        assert absolute_rounding(native, expected) == pytest.approx(err, rel=1e-12)
        assert relative_rounding(native, expected) == pytest.approx(err / rms, rel=1e-12)
    assert absolute_rounding(torch.full((3,), float("nan")), torch.zeros(3, dtype=torch.float64)) == 0.0


def test_sampled_elements_judged_in_one_pass_pass_only_what_compare_passes() -> None:
    """``within_bounds`` (a sample's sampled elements in one pass) agrees with ``compare`` tensor by tensor: errors
    at every scale around the bound, non-finite values moved, and what does not qualify (ints, a dtype apart)."""
    torch.manual_seed(3)
    agree = {True: 0, False: 0}
    for trial in range(300):
        scale = [1e-3, 1.0, 1e3][trial % 3]
        want = [torch.randn(256) * scale for _ in range(4)] + [torch.randn(5) * scale]
        noise = [1e-7, 1e-5, 5e-5, 1e-4, 2e-4][trial % 5]
        got = [w + torch.randn(w.shape) * w.abs().mean() * noise for w in want]
        if trial % 7 == 0:
            got[1][3] = float("nan")
        fast = within_bounds(got, want, 1e-7, 1e-9)
        slow = compare(got, want, None, "elements", rounding=1e-7, floor=1e-9) is None
        assert slow or not fast, trial  # never passes what compare fails
        agree[fast] += fast == slow
    assert agree[True] > 50 and agree[False] > 50  # both outcomes seen, and agreeing
    ints = [torch.arange(5)]
    assert not within_bounds(ints, [t.clone() for t in ints], 0.0, 0.0)  # left to compare, which passes it
    assert not within_bounds([torch.zeros(3, dtype=torch.float64)], [torch.zeros(3)], 0.0, 0.0)
    assert not within_bounds({"not": "a list"}, [torch.zeros(3)], 0.0, 0.0)


def test_a_comparison_in_blocks_finds_what_one_over_the_whole_tensor_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-finite positions, the worst element and the counts come out the same whether the output is read in
    one block or in blocks that split its rows (``compare._blocks``)."""
    torch.manual_seed(1)
    expected = torch.randn(6, 11, dtype=torch.float64)
    native = expected.float()
    wrong = native.clone()
    wrong[5, 9] += 1.0  # in the last block of 7
    wrong[2, 3] += 0.5
    nan = native.clone()
    nan[3, 1] = float("nan")
    verdicts = {}
    for block in (7, 1 << 22):
        monkeypatch.setattr(compare_module, "ROUNDING_BLOCK", block)
        verdicts[block] = [compare(c, expected, native, rounding=1e-7) for c in (native, wrong, nan)]
    small, whole = verdicts[7], verdicts[1 << 22]
    assert small[0] is None and whole[0] is None
    assert small[1].reason is whole[1].reason is Reason.WRONG_OUTPUT
    assert small[1].evidence["index"] == whole[1].evidence["index"] == (5, 9)
    assert small[1].evidence["n_bad"] == whole[1].evidence["n_bad"] == 2
    assert small[1].evidence["max_abs_err"] == pytest.approx(whole[1].evidence["max_abs_err"])
    assert small[2].reason is whole[2].reason is Reason.NONFINITE_MISMATCH
    assert small[2].evidence["index"] == whole[2].evidence["index"] == (3, 1)


def test_a_digest_taken_in_blocks_is_the_whole_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of rows (``digests.DIGEST_BLOCK_ROWS``; a 6.4 GB output's float64 copy is never made) give the
    figures of one pass over the output, up to summation order, and still see the order of its elements."""
    from pytest_cudal1.workers import digests

    torch.manual_seed(2)
    x = torch.randn(5 * digests.PROJECTION_WIDTH + 123)
    x[7], x[-1] = float("nan"), float("inf")
    whole = fingerprint(x)
    monkeypatch.setattr(digests, "DIGEST_BLOCK_ROWS", 2)
    blocks = fingerprint(x)
    assert blocks[0][0] == whole[0][0] == x.numel() and blocks[0][4] == whole[0][4] == 2  # numel, non-finite
    assert blocks[0] == pytest.approx(whole[0], rel=1e-12, abs=1e-9)
    shuffled = fingerprint(x[torch.randperm(x.numel())])
    assert shuffled[0][1:4] == pytest.approx(blocks[0][1:4], rel=1e-9)  # the sums do not see order
    assert shuffled[0][6:] != pytest.approx(blocks[0][6:], rel=1e-3)  # the projections do


def test_whole_output_scans_in_blocks_find_what_one_pass_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """``guards.SCAN_BYTES``: poison counts and bitwise equality in blocks (a whole-size mask of a 6.4 GB output
    ran an honest candidate's worker out of memory on the H100) match one pass, wherever the blocks split."""
    from pytest_cudal1.workers import guards

    torch.manual_seed(3)
    out = torch.randn(1001)
    words = out.view(torch.int32)
    words[[0, 5, 500, 1000]] = guards.POISON_WORD
    words[7] = guards.POISON_WORD | guards.QUIET_BIT  # quieted by arithmetic: still the poison
    words[900] = guards.MALLOC_FRESH_WORD
    whole = guards.poisoned_words(out)
    for scan in (4, 12, 4000, 1 << 26):
        monkeypatch.setattr(guards, "SCAN_BYTES", scan)
        assert guards.poisoned_words([out, out[:6]]) == whole + 2 == 8  # words 0 and 5 again
        for at in (0, 3, 999, 1000):  # a changed word in the first, a middle, and the last block
            other = out.clone()
            other.view(torch.int32)[at] ^= 1
            assert guards.same_values(out, out.clone()) and not guards.same_values(out, other)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bool, torch.int64], ids=str)
def test_the_after_return_digest_sees_any_changed_bit_and_blocks_that_trade_places(
        monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype) -> None:
    """``guards.snapshot`` digests the output's bits instead of copying it (a 6.4 GB copy was the allocation that
    ran an honest candidate out of memory on the H100): equal bits give equal digests, and one flipped bit, in
    any block or in the tail bytes, or two blocks swapped, give another, wherever the blocks split."""
    from pytest_cudal1.workers import guards

    torch.manual_seed(5)
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 2, (1003 * size,), dtype=torch.uint8) if dtype is torch.bool else \
        torch.randint(0, 256, (1003 * size,), dtype=torch.uint8)
    out = raw.view(dtype)
    for words in (2, 16, 1 << 20):
        monkeypatch.setattr(guards, "DIGEST_WORDS", words)
        scan = 4 * words
        digest = guards.snapshot([out, out[:3]])
        assert len(digest) == 2 and guards.settled(digest, [out.clone(), out[:3].clone()], set())
        for at in (0, 5, raw.numel() // 2, raw.numel() - 1):
            other = out.clone()
            other.view(-1).view(torch.uint8)[at] ^= 4
            assert not guards.settled(digest, [other, out[:3]], set())
        if raw.numel() >= 2 * scan:
            swapped = out.clone()
            b = swapped.view(-1).view(torch.uint8)
            b[:scan], b[scan:2 * scan] = raw[scan:2 * scan].clone(), raw[:scan].clone()
            assert not torch.equal(b, raw) and not guards.settled(digest, [swapped, out[:3]], set())


class _Overwritten(torch.Tensor):
    """What torch's CUDA-graph trees make of an output a later replay overwrote: reading its storage raises."""

    def untyped_storage(self):  # noqa: ANN201 - torch's signature
        raise RuntimeError("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run.")


def test_an_earlier_output_that_cannot_be_read_any_more_is_a_replay() -> None:
    earlier, fresh = torch.ones(4).as_subclass(_Overwritten), torch.ones(4)
    why = reused([fresh], [torch.zeros(4), earlier])
    assert why is not None and "overwritten by a later call" in why and "CUDAGraphs" in why
    assert reused([fresh], [torch.zeros(4)]) is None
    assert reused([fresh], [fresh]) == "the output buffer of an earlier call was returned again"
