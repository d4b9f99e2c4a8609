"""LayerNorm over (64, 256, 256) in CUDA C++ (load_inline), built for few, huge rows.

16 rows of 4M elements each: a per-row single block (what a generic kernel does) would leave
most SMs idle, so the statistics are split over ~2000 blocks (double-precision sum / sum of
squares per chunk, float4 loads), reduced per row in double, then one apply pass in which each
thread loads 4 weights/biases once and reuses them for every row. Traffic: 2 reads + 1 write.
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

// LayerNorm over the trailing N = prod(normalized_shape) elements of R rows (biased variance).
// 1) ln_partial: grid (P, R); each block sums x and x^2 over a contiguous chunk of one row,
//    accumulating in double (float4 loads), and writes one (sum, sumsq) pair.
// 2) ln_finalize: one block per row reduces its P pairs in double -> mean, rstd (as float).
// 3) ln_apply: each thread owns 4 consecutive features, loads weight/bias once and walks all
//    R rows: y = (x - mean) * rstd * w + b. Reads x twice and writes y once in total.
__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void __launch_bounds__(256)
ln_partial(const float* __restrict__ x, double* __restrict__ part, long long N, long long chunk) {
    const long long p = blockIdx.x, r = blockIdx.y;
    const int P = gridDim.x;
    const float* xr = x + r * N;
    const long long beg = p * chunk;
    const long long end = min(N, beg + chunk);
    double s = 0.0, ss = 0.0;
    const bool vec = ((N & 3) == 0) && ((chunk & 3) == 0) && ((((unsigned long long)x) & 15ull) == 0);
    if (vec) {
        for (long long i = beg + 4ll * threadIdx.x; i < end; i += 4ll * blockDim.x) {
            const float4 v = *reinterpret_cast<const float4*>(xr + i);
            const double a = v.x, b = v.y, c = v.z, d = v.w;
            s += (a + b) + (c + d);
            ss += (a * a + b * b) + (c * c + d * d);
        }
    } else {
        for (long long i = beg + threadIdx.x; i < end; i += blockDim.x) {
            const double a = xr[i];
            s += a;
            ss += a * a;
        }
    }
    s = warp_sum_d(s);
    ss = warp_sum_d(ss);
    __shared__ double sh_s[32], sh_ss[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) { sh_s[warp] = s; sh_ss[warp] = ss; }
    __syncthreads();
    if (warp == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        s = warp_sum_d(lane < nw ? sh_s[lane] : 0.0);
        ss = warp_sum_d(lane < nw ? sh_ss[lane] : 0.0);
        if (lane == 0) {
            part[2 * (r * P + p)] = s;
            part[2 * (r * P + p) + 1] = ss;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
ln_finalize(const double* __restrict__ part, float* __restrict__ stats, int P, long long N, double eps) {
    const long long r = blockIdx.x;
    double s = 0.0, ss = 0.0;
    for (int p = threadIdx.x; p < P; p += blockDim.x) {
        s += part[2 * (r * P + p)];
        ss += part[2 * (r * P + p) + 1];
    }
    s = warp_sum_d(s);
    ss = warp_sum_d(ss);
    __shared__ double sh_s[32], sh_ss[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) { sh_s[warp] = s; sh_ss[warp] = ss; }
    __syncthreads();
    if (warp == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        s = warp_sum_d(lane < nw ? sh_s[lane] : 0.0);
        ss = warp_sum_d(lane < nw ? sh_ss[lane] : 0.0);
        if (lane == 0) {
            const double mean = s / (double)N;
            const double var = fmax(ss / (double)N - mean * mean, 0.0);
            stats[2 * r] = (float)mean;
            stats[2 * r + 1] = (float)(1.0 / sqrt(var + eps));
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
ln_apply(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
         const float* __restrict__ stats, float* __restrict__ y, long long N, int R) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec = ((N & 3) == 0) &&
        ((((unsigned long long)x | (unsigned long long)y | (unsigned long long)w | (unsigned long long)b) & 15ull) == 0);
    if (vec) {
        const long long N4 = N >> 2;
        for (long long f = tid; f < N4; f += stride) {
            const float4 wv = reinterpret_cast<const float4*>(w)[f];
            const float4 bv = reinterpret_cast<const float4*>(b)[f];
            for (int r = 0; r < R; ++r) {
                const float mean = stats[2 * r], rstd = stats[2 * r + 1];
                const float4 v = __ldcs(reinterpret_cast<const float4*>(x + (long long)r * N) + f);
                float4 o;
                o.x = fmaf((v.x - mean) * rstd, wv.x, bv.x);
                o.y = fmaf((v.y - mean) * rstd, wv.y, bv.y);
                o.z = fmaf((v.z - mean) * rstd, wv.z, bv.z);
                o.w = fmaf((v.w - mean) * rstd, wv.w, bv.w);
                __stcs(reinterpret_cast<float4*>(y + (long long)r * N) + f, o);
            }
        }
    } else {
        for (long long f = tid; f < N; f += stride) {
            const float wv = w[f], bv = b[f];
            for (int r = 0; r < R; ++r)
                y[(long long)r * N + f] = fmaf((x[(long long)r * N + f] - stats[2 * r]) * stats[2 * r + 1], wv, bv);
        }
    }
}

torch::Tensor ln_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "ln_forward: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "ln_forward: float32 only");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = b.contiguous();
    const long long N = wc.numel();
    TORCH_CHECK(N > 0 && bc.numel() == N && xc.numel() % N == 0, "ln_forward: normalized_shape mismatch");
    const long long R = xc.numel() / N;
    auto y = torch::empty_like(xc);
    if (R == 0) return y;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    long long P = std::max<long long>(1, std::min<long long>((N + 4095) / 4096, (16ll * sms + R - 1) / R));
    long long chunk = ((N + P - 1) / P + 3) / 4 * 4;
    P = (N + chunk - 1) / chunk;
    TORCH_CHECK(R < 65536 && P < (1ll << 31), "ln_forward: too many rows");
    auto part = torch::empty({R * P * 2}, xc.options().dtype(torch::kFloat64));
    auto stats = torch::empty({R * 2}, xc.options());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    ln_partial<<<dim3((unsigned)P, (unsigned)R), 256, 0, stream>>>(xc.data_ptr<float>(), part.data_ptr<double>(), N, chunk);
    ln_finalize<<<(unsigned)R, 256, 0, stream>>>(part.data_ptr<double>(), stats.data_ptr<float>(), (int)P, N, eps);
    const int ablocks = (int)std::max<long long>(1, std::min<long long>((N / 4 + 255) / 256, (long long)sms * 32));
    ln_apply<<<ablocks, 256, 0, stream>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                          stats.data_ptr<float>(), y.data_ptr<float>(), N, (int)R);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP_SRC = "torch::Tensor ln_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

_ext = load_inline(
    name="kbl1_p40_layernorm_cuda",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["ln_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.ln_forward(x, self.ln.weight, self.ln.bias, float(self.ln.eps))
