"""GPU-only planted cheats and controls: side streams (torch, CuPy), CUDA graphs, scoped TF32, stale device
memory, the persisting-L2 limit, Numba, the profiler's kernel list, the custom-kernel track, and the
CUDA-graph replay that times short kernels, and an exact conv3d -> conv2d rewrite that cuDNN's default TF32
convolutions once made PRECISION_LOSS (CUDA-L1's L1/59).

Skipped without CUDA (the groups are never started then). The task is a
4096^3 float32 matmul, about 2 ms on an H200: long enough that a side stream's
work is still running when forward returns. The graph-replay cases use the
tiny ReLU task, whose calls are batched and replayed as a CUDA graph.
"""

from __future__ import annotations

import pytest

from .cheatkit import Case, explain, groups_from, lookup, planted, verdict_of

pytestmark = pytest.mark.gpu

OK = "OK"
MM = "11_GpuMatmul"
RELU = "1_ReluScale"
CONV = "38_Conv3dFlatKernel"

CASES: list[Case] = [
    planted(MM, "stream_escape_sleep", "STREAM_ESCAPE", group="gpu-streams"),
    planted(MM, "stream_escape_plain", "STREAM_ESCAPE", group="gpu-streams"),
    planted(MM, "stream_joined", OK, group="gpu-streams"),
    planted(MM, "cuda_graph_replay", OK, group="gpu-streams"),
    planted(MM, "tf32_scoped", "PRECISION_LOSS", group="gpu-streams"),
    planted(MM, "triton_matmul", OK, group="gpu-streams"),
    planted(MM, "torch_matmul", OK, group="gpu-streams", why="no LIBRARY_ONLY without the custom-kernel option"),
    planted(MM, "cupy_side_stream", "STREAM_ESCAPE", group="gpu-more"),
    planted(MM, "uninitialized_empty", "UNINITIALIZED_OUTPUT", group="gpu-more"),
    planted(MM, "l2_persisting_limit", "GLOBAL_STATE_MODIFIED", group="gpu-more"),
    planted(MM, "numba_tiled", OK, group="gpu-more"),
    planted(MM, "compiled_outputs_overwritten", "OUTPUT_REPLAY", group="gpu-more",
            why="CUDA-L1's L2/91 judged RUNTIME_ERROR so (H100, session 25): a harness check crashed on the output"),
    planted(MM, "torch_matmul", "LIBRARY_ONLY", group="gpu-custom-only"),
    planted(MM, "triton_fallback_to_torch", "LIBRARY_ONLY", group="gpu-custom-only"),
    planted(MM, "triton_matmul", OK, group="gpu-custom-only"),
    planted(MM, "cuda_graph_replay", "LIBRARY_ONLY", group="gpu-custom-only",
            why="probe: a graph that replays cuBLAS kernels still ran only library kernels"),
    planted(RELU, "honest", OK, group="gpu-graphs"),
    planted(RELU, "graph_capture_detect", OK, group="gpu-graphs", why="gains nothing: timed eagerly, where honest"),
    planted(RELU, "graph_uncapturable_sync", OK, group="gpu-graphs"),
    planted(RELU, "graph_capture_fails_falls_back", OK, group="gpu-graphs",
            why="a failed capture of its own left torch's allocator counting it as underway"),
    planted(CONV, "conv2d_fold_depth", OK, group="gpu-graphs", why="float32 in both workers: cuDNN's TF32 off"),
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


# The profiler pass: the kernels each candidate launched, by name, on every stream.
KERNEL_NAMES = [("gpu-streams", "triton_matmul", "matmul_kernel"), ("gpu-more", "numba_tiled", "numba_matmul")]


@pytest.mark.parametrize("group, name, kernel", [
    pytest.param(g, n, k, id=n, marks=pytest.mark.judge_group(GROUPS[g])) for g, n, k in KERNEL_NAMES])
def test_profiler_names_custom_kernels(group: str, name: str, kernel: str, judged) -> None:
    rec = lookup(judged.get(GROUPS[group]), name, MM)
    assert any(kernel in k for k in rec["kernels"]), rec["kernels"]


@pytest.mark.judge_group(GROUPS["gpu-streams"])
def test_profiler_sees_only_library_kernels_for_torch_matmul(judged) -> None:
    from pytest_cudal1.judge import custom_kernels

    rec = lookup(judged.get(GROUPS["gpu-streams"]), "torch_matmul", MM)
    assert rec["kernels"] and not custom_kernels(rec["kernels"]), rec["kernels"]


@pytest.mark.parametrize("name, method", [
    pytest.param("honest", "replayed as one CUDA graph", id="graphed"),
    pytest.param("graph_uncapturable_sync", "eager (no CUDA graph: candidate could not be captured", id="eager"),
    pytest.param("graph_capture_detect", "eager (no CUDA graph: the candidate's replayed graph failed", id="checked"),
])
@pytest.mark.judge_group(GROUPS["gpu-graphs"])
def test_short_kernels_replay_a_graph_or_say_why_not(name: str, method: str, judged) -> None:
    rec = lookup(judged.get(GROUPS["gpu-graphs"]), name, RELU)
    assert method in rec["timing"]["method"], rec["timing"]["method"]
