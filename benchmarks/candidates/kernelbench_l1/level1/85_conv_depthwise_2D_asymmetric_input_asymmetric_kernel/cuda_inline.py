"""Depthwise 3x7 Conv2d (groups = channels) as a shared-memory tiled CUDA kernel (load_inline).

Each 256-thread block stages one (n, c) plane's 16x64-output input tile (halo and zero padding
included) plus the channel's filter in shared memory, then every thread slides a register
window to produce 4 adjacent outputs (FP32 FMA, no TF32). Handles any stride/padding/dilation
(the register window is used for unit stride/dilation along W and KW <= 8).
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

// Depthwise 2-D convolution (groups == C, one filter per channel), NCHW, any stride/padding/dilation.
// Block = 256 threads -> a 16 x 64 output tile of one (n, c) plane; the input tile it needs
// (halo included, zero-padded at the borders) and the channel's filter are staged in shared
// memory once. Each thread produces 4 horizontally adjacent outputs; for stride-1/dilation-1
// along W and KW <= 8 it slides a register window over the shared row (KH*(KW+3) shared loads
// per 4 outputs instead of 4*KH*KW). grid.z strides over the N*C planes.
#define DW_TH 16
#define DW_TW 64
#define DW_VW 4
#define DW_MAXKW 8

extern "C" __global__ void __launch_bounds__(256)
dwconv2d_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                float* __restrict__ y, int NC, int C, int H, int W, int OH, int OW, int KH, int KW,
                int sh, int sw, int ph, int pw, int dh, int dw, int has_bias) {
    extern __shared__ float dw_smem[];
    const int IT_H = (DW_TH - 1) * sh + (KH - 1) * dh + 1;
    const int IT_W = (DW_TW - 1) * sw + (KW - 1) * dw + 1;
    float* tile = dw_smem;
    float* wk = dw_smem + IT_H * IT_W;
    const int tid = threadIdx.x;
    const int ty = tid >> 4, tx = tid & 15;
    const int oy0 = blockIdx.y * DW_TH, ox0 = blockIdx.x * DW_TW;
    const int iy0 = oy0 * sh - ph, ix0 = ox0 * sw - pw;
    const bool fast = (sw == 1) && (dw == 1) && (KW <= DW_MAXKW);
    for (int nc = blockIdx.z; nc < NC; nc += gridDim.z) {
        const int c = nc % C;
        const float* xp = x + (size_t)nc * H * W;
        for (int i = tid; i < KH * KW; i += blockDim.x) wk[i] = w[(size_t)c * KH * KW + i];
        for (int i = tid; i < IT_H * IT_W; i += blockDim.x) {
            const int r = i / IT_W, q = i - r * IT_W;
            const int iy = iy0 + r, ix = ix0 + q;
            tile[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? __ldg(xp + (size_t)iy * W + ix) : 0.f;
        }
        __syncthreads();
        float acc[DW_VW] = {0.f, 0.f, 0.f, 0.f};
        if (fast) {
            for (int kh = 0; kh < KH; ++kh) {
                const float* row = tile + (ty * sh + kh * dh) * IT_W + tx * DW_VW;
                float win[DW_VW + DW_MAXKW - 1];
#pragma unroll
                for (int q = 0; q < DW_VW + DW_MAXKW - 1; ++q) win[q] = (q < DW_VW + KW - 1) ? row[q] : 0.f;
#pragma unroll
                for (int kw = 0; kw < DW_MAXKW; ++kw) {
                    if (kw < KW) {
                        const float wv = wk[kh * KW + kw];
#pragma unroll
                        for (int j = 0; j < DW_VW; ++j) acc[j] = fmaf(win[j + kw], wv, acc[j]);
                    }
                }
            }
        } else {
            for (int kh = 0; kh < KH; ++kh) {
                const float* row = tile + (ty * sh + kh * dh) * IT_W;
                for (int kw = 0; kw < KW; ++kw) {
                    const float wv = wk[kh * KW + kw];
#pragma unroll
                    for (int j = 0; j < DW_VW; ++j) acc[j] = fmaf(row[(tx * DW_VW + j) * sw + kw * dw], wv, acc[j]);
                }
            }
        }
        const int oy = oy0 + ty;
        if (oy < OH) {
            const float bv = has_bias ? bias[c] : 0.f;
            float* yp = y + ((size_t)nc * OH + oy) * OW;
#pragma unroll
            for (int j = 0; j < DW_VW; ++j) {
                const int ox = ox0 + tx * DW_VW + j;
                if (ox < OW) yp[ox] = acc[j] + bv;
            }
        }
        __syncthreads();  // the tile is overwritten by the next plane
    }
}

torch::Tensor dwconv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                             int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "dwconv_forward: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "dwconv_forward: float32 only");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(1) == 1 && w.size(0) == x.size(1),
                "dwconv_forward: depthwise (C, 1, KH, KW) filter expected");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const bool has_bias = b.numel() > 0;
    auto bc = has_bias ? b.contiguous() : wc;
    const int64_t N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    const int64_t KH = wc.size(2), KW = wc.size(3);
    const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
    const int64_t OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "dwconv_forward: empty output");
    auto y = torch::empty({N, C, OH, OW}, xc.options());
    const int64_t NC = N * C;
    if (NC == 0) return y;
    const int64_t it_h = (DW_TH - 1) * sh + (KH - 1) * dh + 1, it_w = (DW_TW - 1) * sw + (KW - 1) * dw + 1;
    const size_t smem = (size_t)(it_h * it_w + KH * KW) * sizeof(float);
    TORCH_CHECK(smem <= 48 * 1024, "dwconv_forward: tile too large for shared memory");
    const dim3 grid((unsigned)((OW + DW_TW - 1) / DW_TW), (unsigned)((OH + DW_TH - 1) / DW_TH),
                    (unsigned)std::min<int64_t>(NC, 65535));
    dwconv2d_kernel<<<grid, 256, smem, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
        (int)NC, (int)C, (int)H, (int)W, (int)OH, (int)OW, (int)KH, (int)KW,
        (int)sh, (int)sw, (int)ph, (int)pw, (int)dh, (int)dw, has_bias ? 1 : 0);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP_SRC = "torch::Tensor dwconv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw);"

_ext = load_inline(
    name="kbl1_p85_dwconv_cuda",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["dwconv_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size_h: int, kernel_size_w: int,
                 stride_h: int = 1, stride_w: int = 1, padding_h: int = 0, padding_w: int = 0,
                 dilation_h: int = 1, dilation_w: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        # same module (and so the same seeded weights) as the reference
        self.conv2d = nn.Conv2d(in_channels, in_channels, (kernel_size_h, kernel_size_w), stride=(stride_h, stride_w),
                                padding=(padding_h, padding_w), dilation=(dilation_h, dilation_w),
                                groups=in_channels, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv2d
        b = c.bias if c.bias is not None else x.new_empty(0)
        return _ext.dwconv_forward(x, c.weight, b, c.stride[0], c.stride[1], c.padding[0], c.padding[1],
                                   c.dilation[0], c.dilation[1])
