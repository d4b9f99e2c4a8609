"""diag(A) @ B as a one-pass row-scaling CuPy RawModule kernel: C[r, :] = A[r] * B[r, :].

Streaming float4 loads/stores (evict-first), grid.x over columns, grid.y over rows; the
multiply is the same single FP32 rounding as the reference.
"""
import cupy as cp
import numpy as np
import torch
import torch.nn as nn

_SRC = r"""
// C[r, :] = a[r] * B[r, :]  (diag(a) @ B without the N x N matrix). One pass, float4 where aligned.
// grid.x tiles the columns, grid.y strides over rows.
extern "C" __global__ void __launch_bounds__(256)
diag_scale_rows(const float* __restrict__ a, const float* __restrict__ B, float* __restrict__ C,
                long long N, long long M) {
    const bool vec = ((M & 3) == 0) && ((((unsigned long long)B | (unsigned long long)C) & 15ull) == 0);
    for (long long r = blockIdx.y; r < N; r += gridDim.y) {
        const float s = a[r];
        const float* b = B + r * M;
        float* c = C + r * M;
        if (vec) {
            const float4* b4 = reinterpret_cast<const float4*>(b);
            float4* c4 = reinterpret_cast<float4*>(c);
            for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < (M >> 2);
                 j += (long long)gridDim.x * blockDim.x) {
                float4 v = __ldcs(b4 + j);  // streamed once: evict-first
                v.x *= s; v.y *= s; v.z *= s; v.w *= s;
                __stcs(c4 + j, v);
            }
        } else {
            for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < M;
                 j += (long long)gridDim.x * blockDim.x)
                c[j] = s * b[j];
        }
    }
}
"""

_funcs = {}


def _fn(name):
    dev = cp.cuda.Device().id
    key = (dev, name)
    if key not in _funcs:
        if (dev, None) not in _funcs:
            _funcs[(dev, None)] = cp.RawModule(code=_SRC, options=("--std=c++17",))
        _funcs[key] = _funcs[(dev, None)].get_function(name)
    return _funcs[key]


def _stream(t):
    return cp.cuda.ExternalStream(torch.cuda.current_stream(t.device).cuda_stream)

def _diag_matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    assert A.is_cuda and A.dim() == 1 and B.dim() == 2 and A.shape[0] == B.shape[0]
    assert A.dtype == torch.float32 and B.dtype == torch.float32
    A = A.detach().contiguous()
    B = B.detach().contiguous()
    N, M = B.shape
    with cp.cuda.Device(B.device.index), _stream(B):
        a = cp.from_dlpack(A)
        b = cp.from_dlpack(B)
        c = cp.empty((N, M), dtype=cp.float32)
        if N and M:
            gx = max(1, min(((M + 3) // 4 + 255) // 256, 1024))
            gy = min(N, 65535)
            _fn("diag_scale_rows")((gx, gy), (256,), (a, b, c, np.int64(N), np.int64(M)))
        return torch.from_dlpack(c)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _diag_matmul(A, B)
