"""GPU-only planted cheats and controls: side streams, CUDA graphs, scoped TF32, the custom-kernel track.

Skipped without CUDA (the groups are never started then). The task is a
4096^3 float32 matmul, about 2 ms on an H200: long enough that a side stream's
work is still running when forward returns.
"""

from __future__ import annotations

import pytest

from .cheatkit import Case, explain, groups_from, lookup, planted, verdict_of

pytestmark = pytest.mark.gpu

OK = "OK"
MM = "11_GpuMatmul"

CASES: list[Case] = [
    planted(MM, "stream_escape_sleep", "STREAM_ESCAPE", group="gpu-streams"),
    planted(MM, "stream_escape_plain", "STREAM_ESCAPE", group="gpu-streams"),
    planted(MM, "stream_joined", OK, group="gpu-streams"),
    planted(MM, "cuda_graph_replay", OK, group="gpu-streams"),
    planted(MM, "tf32_scoped", "PRECISION_LOSS", group="gpu-streams"),
    planted(MM, "triton_matmul", OK, group="gpu-streams"),
    planted(MM, "torch_matmul", OK, group="gpu-streams", why="no LIBRARY_ONLY without the custom-kernel option"),
    planted(MM, "torch_matmul", "LIBRARY_ONLY", group="gpu-custom-only"),
    planted(MM, "triton_fallback_to_torch", "LIBRARY_ONLY", group="gpu-custom-only"),
    planted(MM, "triton_matmul", OK, group="gpu-custom-only"),
    planted(MM, "cuda_graph_replay", "LIBRARY_ONLY", group="gpu-custom-only",
            why="probe: a graph that replays cuBLAS kernels still ran only library kernels"),
]

GROUPS = groups_from(CASES, extra={"gpu-custom-only": ("--cudal1-custom-kernels-only",)}, gpu=True)


@pytest.fixture(autouse=True)
def _needs_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id, marks=pytest.mark.judge_group(GROUPS[c.group])) for c in CASES])
def test_gpu_verdict(case: Case, judged) -> None:
    result = judged.get(GROUPS[case.group])
    rec = lookup(result, case.name, case.task)
    reason, _ = verdict_of(rec)
    assert reason in case.expect, explain(rec, case.expect)
