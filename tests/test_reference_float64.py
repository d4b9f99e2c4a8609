"""The reference's float64 twin is built again from the seed, so closures over its layers are float64 too.

minGPT's block (KernelBench L3/44) keeps ``self.mlpf = lambda x: m.c_proj(...)``: a deep copy's lambda still
called the float32 layers, the float64 copy failed, and candidates were compared with the float32 output.
"""

from __future__ import annotations

from pathlib import Path

from cudal1_helpers import FAST, by_candidate, read_ledger, run_pytest, task_source, write_candidate, write_task

CLOSURE = dict(init_args=", n", init_inputs="8",
               init_body="m = nn.Linear(n, n)\nself.m = m\nself.f = lambda x: torch.tanh(m(x))")
TASK = task_source(forward="return self.f(x)", **CLOSURE)
WRONG_ACTIVATION = '''\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.m = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.m(x))  # relu for tanh
'''


def test_a_reference_with_a_closure_over_its_layers_is_compared_in_float64(tmp_path: Path) -> None:
    tasks, cands = tmp_path / "tasks", tmp_path / "cands"
    write_task(tasks, 3, "44_closure", TASK)
    write_candidate(cands, 3, "44_closure", "wrong", WRONG_ACTIVATION)
    ledger = tmp_path / "ledger.jsonl"
    result = run_pytest(tmp_path, *FAST, f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                        f"--cudal1-cache-dir={tmp_path / 'cache'}", f"--cudal1-ledger={ledger}")
    verdict = by_candidate(read_ledger(ledger))["L3/44_closure::wrong"]["verdict"]
    assert verdict["reason"] == "WRONG_OUTPUT", "\n".join(result.outlines[-30:])
    assert verdict["evidence"]["float64_reference"] is True
