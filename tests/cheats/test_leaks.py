"""Issue 14's leaks, judged by the real plugin: a candidate may not predict or tell apart what the judge does.

- Seeds: the candidate is built under the weight seed, which it can read (``torch.initial_seed()``);
  recipes, timing inputs, order and audits come from a judge seed drawn after it was built.
- Mode leakage: probes that answer wrong whenever a call looks unlike the first one (always a trial)
  must stay OK; a cheat that tells batched timed calls by the gap between them is caught by the
  checks that run on timed calls too.
- Integer inputs are shuffled between timed calls, so a cache keyed on them goes stale.
- Outputs of the last few calls are held and must not share storage with a new one.

Like ``test_cheats_cpu.py`` these run on the CPU and on a GPU machine.
"""

from __future__ import annotations

import pytest

from .cheatkit import Case, explain, groups_from, lookup, planted, verdict_of

OK = "OK"
RELU = "1_ReluScale"
MMSUM = "4_MatmulSum"
SORT = "6_SortByLabel"

CASES: list[Case] = [
    planted(RELU, "honest", OK, group="leaks-relu"),
    # Its predicted outputs are wrong for the inputs it gets, or the values of another call's inputs.
    planted(RELU, "seed_predicts_trials", "WRONG_OUTPUT", "OUTPUT_REPLAY", group="leaks-relu",
            why="right only on inputs predicted from torch.initial_seed()"),
    planted(RELU, "mode_probe_layout", OK, group="leaks-relu", why="wrong on any call laid out unlike a trial"),
    planted(RELU, "mode_alias_between_calls", "OUTPUT_ALIASES_INPUT", group="leaks-relu"),
    planted(SORT, "sort_honest", OK, group="leaks-sort", why="labels keep their range when refilled"),
    planted(SORT, "sort_cached_on_sum", "WRONG_OUTPUT", group="leaks-sort"),
    planted(MMSUM, "matmulsum_honest", OK, group="leaks-buffers"),
    planted(MMSUM, "replay_two_buffers", "OUTPUT_REPLAY", group="leaks-buffers"),
    planted(MMSUM, "replay_three_buffers", "OUTPUT_REPLAY", group="leaks-buffers"),
]
# The CPU allocator's fill: on the GPU a batched sample's later calls allocate from blocks its first call freed.
# Timed calls run without glibc's fill (it would tax every allocated byte), so this probe tells them apart
# and answers wrong there: the checks of timed calls catch it. A recycled heap block can still hold a trial's
# fill, so some runs it never answers wrong (once in many, under load): it notes each wrong answer in a file,
# and the expected verdict follows from that file (``test_cpu_verdict``).
CPU_ONLY = [planted(RELU, "mode_probe_malloc", "WRONG_OUTPUT", "OK", group="leaks-relu", why="wrong on any call "
                    "whose fresh allocations hold other fill patterns than a trial's")]

GROUPS = groups_from(CASES + CPU_ONLY)


def _params(cases: list[Case]) -> list[object]:
    return [pytest.param(c, id=c.id, marks=pytest.mark.judge_group(GROUPS[c.group])) for c in cases]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("case", _params(CASES))
def test_verdict(case: Case, judged) -> None:
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    assert verdict_of(rec)[0] in case.expect, explain(rec, case.expect)


@pytest.mark.parametrize("case", _params(CPU_ONLY))
def test_cpu_verdict(case: Case, judged) -> None:
    if _cuda():
        pytest.skip("inputs live on the GPU here; the probe reads the CPU allocator's fill")
    result = judged.get(GROUPS[case.group])
    rec = lookup(result, case.name, case.task)
    wrong = (result.workdir / "cands" / "level1" / case.task / f"{case.name}.wrong").exists()
    expect = "WRONG_OUTPUT" if wrong else "OK"  # any wrong answer it gave is caught; none, none to catch
    assert verdict_of(rec)[0] == expect, explain(rec, expect)


@pytest.mark.parametrize("case", _params([CASES[1]]))
def test_judge_seed_is_recorded_and_not_the_weight_seed(case: Case, judged) -> None:
    """Every record names both seeds: the weight seed the run was given, and its own judge seed."""
    result = judged.get(GROUPS[case.group])
    seeds = [r.get("judge_seed") for r in result.records]
    assert all(r.get("seed") == 1 for r in result.records)
    assert all(isinstance(s, int) and s != 1 for s in seeds), seeds
    assert len(set(seeds)) == len(seeds), f"items shared a judge seed: {seeds}"
