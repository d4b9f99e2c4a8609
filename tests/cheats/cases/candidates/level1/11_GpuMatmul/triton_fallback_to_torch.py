"""Call the library behind a kernel's back (exploit #13): a Triton kernel that always fails, caught, then torch.matmul.

The source imports and defines Triton, but only cuBLAS ever runs. Under
--cudal1-custom-kernels-only, expect LIBRARY_ONLY.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def broken_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.load(a_ptr + offs) * tl.load(b_ptr + offs), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, A, B):
        try:
            C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
            broken_kernel[(1,)](A, B, C, C.numel())  # BLOCK missing: always raises
            return C
        except Exception:
            return torch.matmul(A, B)
