"""AlexNet conv1 (3->96, 11x11, stride 4, pad 2) as an FP32 implicit-GEMM CUDA kernel (load_inline).

GEMM view: [N*OH*OW positions] x [C*KH*KW] @ [C*KH*KW] x [OC]. A block computes 256 positions x
32 channels; the im2col operand is gathered on the fly (zero padding via bounds checks, k ->
(ci, dy, dx) from a shared table) and each thread accumulates 8x4 outputs with FP32 FMA.
Plain FP32 arithmetic (the cuDNN reference may use TF32): expect it to be slower than cuDNN.
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

// Dense 2-D convolution (groups = 1), NCHW, as an implicit GEMM in plain FP32:
//   out[p, oc] = sum_k im2col(x)[p, k] * w[oc, k],  p = (n, oy, ox), k = (ci, kh, kw).
// Block = 256 threads -> 256 output positions x 32 output channels; k advances 16 at a time.
// Each thread gathers one position's 16 im2col values (zero padding by bounds check, k -> (ci,
// dy, dx) from a shared table built once per block) and computes 8 positions x 4 channels.
// Shared reads are conflict-free (positions along lanes, channels broadcast as float4).
#define CV_BM 256
#define CV_BN 32
#define CV_BK 16

extern "C" __global__ void __launch_bounds__(256)
conv2d_igemm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                    float* __restrict__ y, int Nb, int C, int H, int W, int OC, int OH, int OW,
                    int KH, int KW, int sh, int sw, int ph, int pw, int dh, int dw, int has_bias) {
    extern __shared__ int cv_ktab[];  // 3 ints per k: ci, kh*dh, kw*dw
    __shared__ float As[CV_BK][CV_BM];
    __shared__ __align__(16) float Bs[CV_BK][CV_BN + 4];
    const int tid = threadIdx.x;
    const int KK = KH * KW;
    const int Kdim = C * KK;
    for (int k = tid; k < Kdim; k += blockDim.x) {
        const int ci = k / KK, r = k - ci * KK;
        const int kh = r / KW, kw = r - kh * KW;
        cv_ktab[3 * k] = ci;
        cv_ktab[3 * k + 1] = kh * dh;
        cv_ktab[3 * k + 2] = kw * dw;
    }
    const int OHW = OH * OW;
    const long long P = (long long)Nb * OHW;
    const long long p0 = (long long)blockIdx.x * CV_BM;
    const int oc0 = blockIdx.y * CV_BN;
    // the position this thread gathers for
    const long long pg = p0 + tid;
    const bool pvalid = pg < P;
    int iy0 = 0, ix0 = 0;
    const float* xn = x;
    if (pvalid) {
        const long long n = pg / OHW;
        const int rem = (int)(pg - n * OHW);
        const int oy = rem / OW, ox = rem - oy * OW;
        iy0 = oy * sh - ph;
        ix0 = ox * sw - pw;
        xn = x + (size_t)n * C * H * W;
    }
    const int tp = tid & 31, to = tid >> 5;
    float acc[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    __syncthreads();
    for (int kt = 0; kt < Kdim; kt += CV_BK) {
#pragma unroll
        for (int kk = 0; kk < CV_BK; ++kk) {
            const int k = kt + kk;
            float v = 0.f;
            if (pvalid && k < Kdim) {
                const int ci = cv_ktab[3 * k];
                const int iy = iy0 + cv_ktab[3 * k + 1], ix = ix0 + cv_ktab[3 * k + 2];
                if (iy >= 0 && iy < H && ix >= 0 && ix < W) v = __ldg(xn + ((size_t)ci * H + iy) * W + ix);
            }
            As[kk][tid] = v;
        }
#pragma unroll
        for (int l = 0; l < 2; ++l) {
            const int e = tid + l * 256;
            const int o = e >> 4, kk = e & 15;
            const int oc = oc0 + o, k = kt + kk;
            Bs[kk][o] = (oc < OC && k < Kdim) ? __ldg(w + (size_t)oc * Kdim + k) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < CV_BK; ++kk) {
            const float4 b = *reinterpret_cast<const float4*>(&Bs[kk][to * 4]);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float a = As[kk][tp + 32 * i];
                acc[i][0] = fmaf(a, b.x, acc[i][0]);
                acc[i][1] = fmaf(a, b.y, acc[i][1]);
                acc[i][2] = fmaf(a, b.z, acc[i][2]);
                acc[i][3] = fmaf(a, b.w, acc[i][3]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const long long p = p0 + tp + 32 * i;
        if (p >= P) continue;
        const long long n = p / OHW;
        const int rem = (int)(p - n * OHW);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int oc = oc0 + to * 4 + j;
            if (oc < OC) y[((size_t)n * OC + oc) * OHW + rem] = acc[i][j] + (has_bias ? bias[oc] : 0.f);
        }
    }
}

torch::Tensor conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                           int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "conv_forward: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "conv_forward: float32 only");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(1) == x.size(1), "conv_forward: (OC, C, KH, KW) filter expected");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const bool has_bias = b.numel() > 0;
    auto bc = has_bias ? b.contiguous() : wc;
    const int64_t N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    const int64_t OC = wc.size(0), KH = wc.size(2), KW = wc.size(3);
    const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
    const int64_t OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "conv_forward: empty output");
    auto y = torch::empty({N, OC, OH, OW}, xc.options());
    const int64_t P = N * OH * OW;
    if (P == 0 || OC == 0) return y;
    const int64_t Kdim = C * KH * KW;
    const size_t smem = (size_t)Kdim * 3 * sizeof(int);
    TORCH_CHECK(smem <= 24 * 1024, "conv_forward: C*KH*KW too large for the shared k-table");
    TORCH_CHECK(xc.numel() < (1ll << 31) && y.numel() < (1ll << 40), "conv_forward: tensor too large");
    const dim3 grid((unsigned)((P + CV_BM - 1) / CV_BM), (unsigned)((OC + CV_BN - 1) / CV_BN));
    conv2d_igemm_kernel<<<grid, 256, smem, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
        (int)N, (int)C, (int)H, (int)W, (int)OC, (int)OH, (int)OW, (int)KH, (int)KW,
        (int)sh, (int)sw, (int)ph, (int)pw, (int)dh, (int)dw, has_bias ? 1 : 0);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP_SRC = "torch::Tensor conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw);"

_ext = load_inline(
    name="kbl1_p50_conv_igemm_cuda",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        # same module (and so the same seeded weights and bias) as the reference
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv1
        b = c.bias if c.bias is not None else x.new_empty(0)
        return _ext.conv_forward(x, c.weight, b, c.stride[0], c.stride[1], c.padding[0], c.padding[1],
                                 c.dilation[0], c.dilation[1])
