"""A task that keeps state between calls is skipped as STATEFUL_REFERENCE, not charged to its candidates.

KernelBench's L3/33 and L3/34 carry an RNN's hidden state in ``self.hidden``: judged against itself, the
task's own Model failed with WRONG_OUTPUT (2044 of 2048 elements, 0.36 relative error), because the reference
worker makes calls the candidate does not. State that settles at the first call (KernelBench's LSTM tasks
set ``self.c0 = self.h0`` in every forward) is no state, and those tasks are judged as before.
"""

from __future__ import annotations

from pathlib import Path

from cudal1_helpers import FAST, by_candidate, read_ledger, run_pytest, task_source, write_task

RNN = task_source(
    init_body="self.lin = nn.Linear(16, 8)\nself.hidden = torch.randn(4, 8)",
    forward="self.hidden = torch.tanh(self.lin(torch.cat((x, self.hidden.to(x.device)), dim=1)))\n"
            "return self.hidden")
SETTLES = task_source(
    init_body="self.h0 = torch.randn(4, 8)\nself.c0 = torch.randn(4, 8)",
    forward="self.h0 = self.h0.to(x.device)\nself.c0 = self.h0.to(x.device)\nreturn torch.tanh(x + self.h0 + self.c0)")


def test_a_task_with_state_between_calls_is_skipped_and_one_that_settles_is_judged(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, 3, "33_rnn_hidden_state", RNN)
    write_task(tasks, 3, "35_state_set_every_call", SETTLES)
    ledger = tmp_path / "ledger.jsonl"
    result = run_pytest(tmp_path, *FAST, f"--cudal1-tasks={tasks}", "-rs", f"--cudal1-cache-dir={tmp_path / 'cache'}",
                        f"--cudal1-ledger={ledger}")
    records = by_candidate(read_ledger(ledger))
    assert "L3/33_rnn_hidden_state::reference" not in records  # no ledger line: no reward, nothing charged
    line = next(x for x in result.stdout.lines if "L3/33_rnn_hidden_state::reference" in x and "SKIPPED" in x)
    assert "[STATEFUL_REFERENCE]" in line and "keeps state between calls" in line
    assert records["L3/35_state_set_every_call::reference"]["verdict"]["reason"] == "OK"
