"""LayerNorm over (64, 256, 256) in a CuPy RawModule, built for few, huge rows.

16 rows of 4M elements each: a per-row single block (what a generic kernel does) would leave
most SMs idle, so the statistics are split over ~2000 blocks (double-precision sum / sum of
squares per chunk, float4 loads), reduced per row in double, then one apply pass in which each
thread loads 4 weights/biases once and reuses them for every row. Traffic: 2 reads + 1 write.
"""
import cupy as cp
import numpy as np
import torch
import torch.nn as nn

_SRC = r"""
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

def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    assert x.is_cuda and x.dtype == torch.float32
    x = x.detach().contiguous()
    w = w.detach().contiguous()
    b = b.detach().contiguous()
    N = w.numel()
    assert N > 0 and b.numel() == N and x.numel() % N == 0
    R = x.numel() // N
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    P = max(1, min((N + 4095) // 4096, (16 * sms + R - 1) // max(R, 1)))
    chunk = ((N + P - 1) // P + 3) // 4 * 4
    P = (N + chunk - 1) // chunk
    with cp.cuda.Device(x.device.index), _stream(x):
        xa, wa, ba = cp.from_dlpack(x), cp.from_dlpack(w), cp.from_dlpack(b)
        y = cp.empty(x.shape, dtype=cp.float32)
        if R:
            part = cp.empty((R * P * 2,), dtype=cp.float64)
            stats = cp.empty((R * 2,), dtype=cp.float32)
            _fn("ln_partial")((P, R), (256,), (xa, part, np.int64(N), np.int64(chunk)))
            _fn("ln_finalize")((R,), (256,), (part, stats, np.int32(P), np.int64(N), np.float64(eps)))
            ablocks = max(1, min((N // 4 + 255) // 256, sms * 32))
            _fn("ln_apply")((ablocks,), (256,), (xa, wa, ba, stats, y, np.int64(N), np.int32(R)))
        return torch.from_dlpack(y)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _layer_norm(x, self.ln.weight, self.ln.bias, float(self.ln.eps))
