"""diag(A) @ B as a one-pass Numba CUDA row-scaling kernel: C[r, :] = A[r] * B[r, :].

2-D grid: x over columns (coalesced), y over rows (grid-stride); single FP32 multiply per
element like the reference. Tensors are shared with torch through __cuda_array_interface__ and
the kernel runs on torch's current stream.
"""
import torch
import torch.nn as nn
from numba import cuda


@cuda.jit
def _diag_scale_kernel(a, B, C):
    N, M = B.shape
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y
    while r < N:
        if j < M:
            C[r, j] = a[r] * B[r, j]
        r += cuda.gridDim.y


def _stream():
    ptr = torch.cuda.current_stream().cuda_stream
    return cuda.external_stream(ptr) if ptr else cuda.default_stream()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.detach().contiguous()
        B = B.detach().contiguous()
        N, M = B.shape
        C = torch.empty(B.shape, device=B.device, dtype=B.dtype)
        if N and M:
            grid = ((M + 255) // 256, min(N, 65535))
            _diag_scale_kernel[grid, 256, _stream()](cuda.as_cuda_array(A), cuda.as_cuda_array(B), cuda.as_cuda_array(C))
        return C
