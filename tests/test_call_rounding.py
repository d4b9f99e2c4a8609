"""A timed call's check grants the reference's rounding on that call's own inputs, when the trials' falls short.

On an H100 an honest KernelBench L2/9 kernel (a ReLU after a subtraction) was rejected WRONG_OUTPUT in one run
of four: every trial's output was clipped to zero, so the trials measured no rounding at all, and one timed call's
single positive element was cancellation noise two float32 steps from the reference's. Here the task's inputs are
all ones, so every trial sums them exactly; timed calls scale each element by a fresh factor in [0.5, 1.5), and
the output, a difference of two sums taken in opposite orders, is rounding noise.
"""

from __future__ import annotations

from pathlib import Path

from cudal1_helpers import candidate_source, read_ledger, reason, run_pytest, write, write_candidate

NOISE_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(-1) - x.flip(-1).sum(-1)


def get_inputs():
    return [torch.ones(64, 4096)]


def get_init_inputs():
    return []
'''

CANDIDATES = {
    # the same difference, its first sum taken in 64 blocks: noise of its own
    "blocked_sum": "return x.view(x.shape[0], 64, -1).sum(-1).sum(-1) - x.flip(-1).sum(-1)",
    # right on all-ones inputs (the trials'), off by far more than the noise elsewhere
    "off_when_not_ones": "return x.sum(-1) - x.flip(-1).sum(-1) + 1e-2 * (x != 1).any(-1)",
}


def test_the_reference_s_rounding_on_a_timed_call_s_own_inputs_is_granted(tmp_path: Path) -> None:
    write(tmp_path / "tasks" / "level1" / "1_noise.py", NOISE_TASK)
    for name, forward in CANDIDATES.items():
        write_candidate(tmp_path / "cands", 1, "1_noise", name, candidate_source(forward=forward))
    ledger = tmp_path / "ledger.jsonl"
    result = run_pytest(tmp_path, "--cudal1-trials=2", "--cudal1-seed=1", "--cudal1-time-budget=1",
                        f"--cudal1-tasks={tmp_path / 'tasks'}", f"--cudal1-candidates={tmp_path / 'cands'}",
                        f"--cudal1-cache-dir={tmp_path / 'cache'}", f"--cudal1-ledger={ledger}")
    records = {r["candidate_name"]: r for r in read_ledger(ledger)}
    assert reason(records["blocked_sum"]) == "OK", (records["blocked_sum"]["verdict"], result.stdout.str()[-3000:])
    wrong = records["off_when_not_ones"]["verdict"]
    assert wrong["reason"] == "WRONG_OUTPUT" and "timed call" in wrong["message"], wrong
    # the rounding it was held to: this call's own, far below the 1e-2 it was off by
    assert 0 < wrong["evidence"]["rounding"]["floor"] < 1e-3, wrong["evidence"]
