"""Sum over the reduced dimension (moved last) as a CUDA kernel with one block per row, built with load_inline (sm_90)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor row_sum_forward(torch::Tensor x);"

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

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float shared[32];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    s = block_reduce<false>(s, shared);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

torch::Tensor row_sum_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2, "expects a 2-D float32 CUDA tensor");
    auto in = x.contiguous();
    const int rows = (int)in.size(0), cols = (int)in.size(1);
    auto out = torch::empty({rows}, in.options());
    row_sum_kernel<<<rows, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(in.data_ptr<float>(), out.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l1_4_sum_reduction_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["row_sum_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.movedim(self.dim, -1)
        return _ext.row_sum_forward(rows.reshape(-1, rows.shape[-1])).reshape(rows.shape[:-1])
