"""diag(A) @ B as a one-pass row-scaling CUDA kernel (load_inline): C[r, :] = A[r] * B[r, :].

Streaming float4 loads/stores (evict-first), grid.x over columns, grid.y over rows; the
multiply is the same single FP32 rounding as the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/types.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <algorithm>

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

torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor B) {
    TORCH_CHECK(a.is_cuda() && B.is_cuda(), "diag_matmul: CUDA tensors expected");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "diag_matmul: float32 only");
    TORCH_CHECK(a.dim() == 1 && B.dim() == 2 && a.size(0) == B.size(0), "diag_matmul: shapes (N,), (N, M) expected");
    const c10::cuda::CUDAGuard guard(B.device());
    auto av = a.contiguous();
    auto Bv = B.contiguous();
    auto C = torch::empty_like(Bv);
    const long long N = Bv.size(0), M = Bv.size(1);
    if (N == 0 || M == 0) return C;
    const unsigned gx = (unsigned)std::max<long long>(1, std::min<long long>(((M + 3) / 4 + 255) / 256, 1024));
    const unsigned gy = (unsigned)std::min<long long>(N, 65535);
    diag_scale_rows<<<dim3(gx, gy), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        av.data_ptr<float>(), Bv.data_ptr<float>(), C.data_ptr<float>(), N, M);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
    return C;
}
"""

_CPP_SRC = "torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor B);"

_ext = load_inline(
    name="kbl1_p12_diag_scale_cuda",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["diag_matmul"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul(A, B)
