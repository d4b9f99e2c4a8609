"""Real ledger records for the policy tests, and a writer process for the concurrency and crash tests.

    python policy_records.py DB PREFIX COUNT   # add COUNT records, printing each id once committed; COUNT 0: forever

Records are built with the judge's own ``JudgedRecord`` and serialised with its
``to_json``, so the tests read exactly the ledger's line format.
"""

from __future__ import annotations

import hashlib
import itertools
import sys
from typing import Any

from kernelbench.loaders import Task
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord, PairedTiming, TimingSummary, Verdict

TASK_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, scale: float = 2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''
TASK = Task(1, 7, "7_scaled_relu", TASK_SOURCE, "tasks/level1/7_scaled_relu.py")


def code(tag: str) -> str:
    """A distinct candidate module per tag."""
    return f"# {tag}\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
           f"    def forward(self, x):\n        return torch.relu(x) * 2.0\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def record(source: str, *, task: Task = TASK, reason: Reason = Reason.OK, speedup: float | None = 1.5,
           gpu: str | None = "NVIDIA H200", judged_at: str = "2026-12-01T10:00:00+00:00",
           origin: str = "cands/level1/7_scaled_relu/x.py", message: str = "",
           kernels: tuple[str, ...] = ()) -> dict[str, Any]:
    side = TimingSummary(median_ms=1.0, iqr_ms=0.01, min_ms=0.9, mean_ms=1.0, n=10, clock="cuda_event")
    timing = None if speedup is None else PairedTiming(
        reference=side, candidate=side, speedup=speedup, speedup_ci=(speedup * 0.98, speedup * 1.02), pairs=10,
        method="test", stopped_because="converged")
    rec = JudgedRecord(
        task_id=task.id, level=task.level, problem_id=task.problem_id, task_name=task.name,
        candidate_name=origin.rsplit("/", 1)[-1].removesuffix(".py"), candidate_sha256=sha(source),
        candidate_origin=origin, backend="torch", device="cuda" if gpu else "cpu",
        verdict=Verdict(reason, message), timing=timing, seed=1, kernels=list(kernels),
        environment={"gpu": gpu} if gpu else {"device": "cpu"}, judged_at=judged_at,
    )
    return rec.to_json()


def main(db_path: str, prefix: str, count: int) -> None:
    from policy.exemplars import ExemplarDB, Origin

    with ExemplarDB(db_path) as db:
        for i in itertools.count() if count == 0 else range(count):
            source = code(f"{prefix}-{i}")
            row = db.add(record(source), source, TASK, Origin("test-writer", round=i))
            print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
