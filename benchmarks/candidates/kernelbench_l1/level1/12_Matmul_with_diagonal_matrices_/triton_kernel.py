"""diag(A) @ B as a one-pass Triton row-scaling kernel: C[r, :] = A[r] * B[r, :].

2-D tiles of 8 rows x 1024 columns; the scale is loaded once per row. Same single FP32 rounding
as the reference; no N x N matrix is ever formed.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _diag_scale_kernel(a_ptr, b_ptr, c_ptr, N, M, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    rmask = rows < N
    s = tl.load(a_ptr + rows, mask=rmask, other=0.0)
    offs = rows.to(tl.int64)[:, None] * M + cols[None, :]
    mask = rmask[:, None] & (cols[None, :] < M)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    tl.store(c_ptr + offs, s[:, None] * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        B = B.contiguous()
        N, M = B.shape
        C = torch.empty(B.shape, device=B.device, dtype=B.dtype)
        if N and M:
            BR, BC = 8, 1024
            _diag_scale_kernel[(triton.cdiv(M, BC), triton.cdiv(N, BR))](A, B, C, N, M, BLOCK_R=BR, BLOCK_C=BC,
                                                                          num_warps=8)
        return C
