"""MinGPT tanh-GELU as one fused elementwise CUDA kernel (load_inline).

0.5*x*(1+tanh(u)) is computed as the identical x / (1 + exp(-2u)), u = sqrt(2/pi)*(x + 0.044715 x^3):
one accurate expf and an IEEE divide per element, no cancellation for negative x, no fast-math.
Streaming float4 grid-stride loop: one read and one write of the tensor.
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

// MinGPT "new GELU": 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))) == x * sigmoid(2u), evaluated
// as x / (1 + exp(-2u)), which is exact algebra and has no cancellation for negative x.
// Accurate expf and IEEE division (no fast-math). float4 grid-stride loop plus a scalar tail.
__device__ __forceinline__ float gelu_tanh_f(float x) {
    const float c0 = -1.5957691216057308f;    // -2*sqrt(2/pi)
    const float c1 = -0.07135481627159121f;   // -2*sqrt(2/pi)*0.044715
    const float t = x * fmaf(c1, x * x, c0);  // -2u
    return x / (1.0f + expf(t));
}

extern "C" __global__ void __launch_bounds__(256)
gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec = ((((unsigned long long)x | (unsigned long long)y) & 15ull) == 0);
    long long done = 0;
    if (vec) {
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = tid; i < n4; i += stride) {
            float4 v = __ldcs(x4 + i);
            v.x = gelu_tanh_f(v.x); v.y = gelu_tanh_f(v.y); v.z = gelu_tanh_f(v.z); v.w = gelu_tanh_f(v.w);
            __stcs(y4 + i, v);
        }
        done = n4 << 2;
    }
    for (long long i = done + tid; i < n; i += stride) y[i] = gelu_tanh_f(x[i]);
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_forward: float32 CUDA tensor expected");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int blocks = (int)std::max<long long>(1, std::min<long long>((n / 4 + 255) / 256, (long long)sms * 32));
    gelu_tanh_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP_SRC = "torch::Tensor gelu_forward(torch::Tensor x);"

_ext = load_inline(
    name="kbl1_p88_gelu_tanh_cuda",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["gelu_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_forward(x)
