"""LayerNorm as a CUDA kernel with one block per row (two-pass mean/variance, affine), built with load_inline (sm_90)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_CUDA = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

// Block-wide reduction: warp shuffles, then one value per warp through shared memory; every thread gets the result.
template <bool IS_MAX>
__device__ float block_reduce(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_down_sync(0xffffffff, v, off);
        v = IS_MAX ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? shared[lane] : (IS_MAX ? -INFINITY : 0.0f);
        for (int off = 16; off > 0; off >>= 1) {
            const float o = __shfl_down_sync(0xffffffff, v, off);
            v = IS_MAX ? fmaxf(v, o) : v + o;
        }
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    v = shared[0];
    __syncthreads();
    return v;
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                  float* __restrict__ out, int cols, float eps) {
    __shared__ float shared[32];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* orow = out + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const float mean = block_reduce<false>(s, shared) / cols;
    float sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sq += (row[c] - mean) * (row[c] - mean);
    const float rstd = rsqrtf(block_reduce<false>(sq, shared) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) orow[c] = (row[c] - mean) * rstd * w[c] + b[c];
}

torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expects a float32 CUDA tensor");
    auto in = x.contiguous(), w = weight.contiguous(), b = bias.contiguous();
    auto out = torch::empty_like(in);
    const int cols = (int)w.numel();
    const int rows = (int)(in.numel() / cols);
    layer_norm_kernel<<<rows, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        in.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l1_6_layer_norm_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["layer_norm_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layer_norm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
