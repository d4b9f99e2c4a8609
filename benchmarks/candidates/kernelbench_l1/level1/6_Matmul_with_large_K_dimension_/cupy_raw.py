"""C = A @ B with M=N=256, K=524288 (split-K): tiled FP32 SGEMM as a CuPy RawModule.

Same kernel as the CUDA C++ candidate: 128x128 block tile, BK=8, 256 threads x 8x8 outputs,
double-buffered shared memory, float4 where aligned, split-K with a fixed-order reduction
when the output has too few tiles. Inputs are shared with torch through DLPack and
the kernels run on torch's current stream.
"""
import cupy as cp
import numpy as np
import torch
import torch.nn as nn

_SRC = r"""
// Tiled FP32 SGEMM: 128x128 block tile, BK = 8, 256 threads, 8x8 outputs per thread,
// register-prefetched double-buffered shared memory. Row-major contiguous A[M,K], B[K,N].
// Block z computes the k-range [z*kchunk, min(K, (z+1)*kchunk)) into C + z*M*N (split-K partials).
// triu != 0: C[i][j] = 0 for i > j, and tiles strictly below the diagonal skip the k loop.
#define SG_BM 128
#define SG_BN 128
#define SG_BK 8

__device__ __forceinline__ void sg_load(const float* __restrict__ A, const float* __restrict__ B,
                                        int M, int N, int K, int m0, int n0, int kt, int kend,
                                        int a_row, int a_k, int b_k, int b_col, bool a_vec, bool b_vec,
                                        float ra[4], float rb[4]) {
    const int gr = m0 + a_row, gk = kt + a_k;
    if (a_vec && gr < M && gk + 3 < kend) {
        const float4 v = *reinterpret_cast<const float4*>(A + (size_t)gr * K + gk);
        ra[0] = v.x; ra[1] = v.y; ra[2] = v.z; ra[3] = v.w;
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) ra[i] = (gr < M && gk + i < kend) ? A[(size_t)gr * K + gk + i] : 0.f;
    }
    const int bk = kt + b_k, gc = n0 + b_col;
    if (b_vec && bk < kend && gc + 3 < N) {
        const float4 v = *reinterpret_cast<const float4*>(B + (size_t)bk * N + gc);
        rb[0] = v.x; rb[1] = v.y; rb[2] = v.z; rb[3] = v.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) rb[j] = (bk < kend && gc + j < N) ? B[(size_t)bk * N + gc + j] : 0.f;
    }
}

extern "C" __global__ void __launch_bounds__(256)
sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
            int M, int N, int K, int kchunk, int triu) {
    __shared__ __align__(16) float As[2][SG_BK][SG_BM + 4];
    __shared__ __align__(16) float Bs[2][SG_BK][SG_BN + 4];
    const int tid = threadIdx.x;
    const int tr = tid >> 4, tc = tid & 15;
    const int m0 = blockIdx.y * SG_BM, n0 = blockIdx.x * SG_BN;
    float* Cz = C + (size_t)blockIdx.z * (size_t)M * (size_t)N;
    const int kbeg = blockIdx.z * kchunk;
    int kend = min(K, kbeg + kchunk);
    if (triu && m0 > n0 + SG_BN - 1) kend = kbeg;  // tile strictly below the diagonal: all zeros
    const int a_row = tid >> 1, a_k = (tid & 1) * 4;
    const int b_k = tid >> 5, b_col = (tid & 31) * 4;
    const bool a_vec = ((K & 3) == 0) && ((((unsigned long long)A) & 15ull) == 0);
    const bool b_vec = ((N & 3) == 0) && ((((unsigned long long)B) & 15ull) == 0);

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    float ra[4], rb[4];
    int buf = 0;
    if (kbeg < kend) {
        sg_load(A, B, M, N, K, m0, n0, kbeg, kend, a_row, a_k, b_k, b_col, a_vec, b_vec, ra, rb);
#pragma unroll
        for (int i = 0; i < 4; ++i) As[0][a_k + i][a_row] = ra[i];
        *reinterpret_cast<float4*>(&Bs[0][b_k][b_col]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
    }
    __syncthreads();
    for (int kt = kbeg; kt < kend; kt += SG_BK) {
        const bool nxt = kt + SG_BK < kend;
        if (nxt) sg_load(A, B, M, N, K, m0, n0, kt + SG_BK, kend, a_row, a_k, b_k, b_col, a_vec, b_vec, ra, rb);
#pragma unroll
        for (int k = 0; k < SG_BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][tr * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][64 + tr * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][tc * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][64 + tc * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (nxt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) As[buf ^ 1][a_k + i][a_row] = ra[i];
            *reinterpret_cast<float4*>(&Bs[buf ^ 1][b_k][b_col]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
        }
        __syncthreads();
        buf ^= 1;
    }

    const bool c_vec = ((N & 3) == 0) && ((((unsigned long long)Cz) & 15ull) == 0);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gr = m0 + (i < 4 ? tr * 4 + i : 64 + tr * 4 + (i - 4));
        if (gr >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gc = n0 + h * 64 + tc * 4;
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = (triu && gr > gc + j) ? 0.f : acc[i][h * 4 + j];
            float* dst = Cz + (size_t)gr * N + gc;
            if (c_vec && gc + 3 < N) {
                *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (gc + j < N) dst[j] = v[j];
            }
        }
    }
}

// Sum S split-K partials ws[S][MN] into out[MN], in a fixed order (deterministic).
extern "C" __global__ void splitk_reduce(const float* __restrict__ ws, float* __restrict__ out,
                                         long long MN, int S) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < MN;
         i += (long long)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int z = 0; z < S; ++z) s += ws[(size_t)z * MN + i];
        out[i] = s;
    }
}
"""

_BM = _BN = 128
_BK = 8
_funcs = {}


def _kernels():
    if not _funcs:
        mod = cp.RawModule(code=_SRC, options=("--std=c++17",))
        _funcs["mm"] = mod.get_function("sgemm_tiled")
        _funcs["reduce"] = mod.get_function("splitk_reduce")
    return _funcs["mm"], _funcs["reduce"]


def _matmul(A: torch.Tensor, B: torch.Tensor, triu: int) -> torch.Tensor:
    assert A.is_cuda and A.dtype == torch.float32 and B.dtype == torch.float32
    A = A.detach().contiguous()
    B = B.detach().contiguous()
    M, K = A.shape
    N = B.shape[1]
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    gx, gy = (N + _BN - 1) // _BN, (M + _BM - 1) // _BM
    tiles = gx * gy
    S, kchunk = 1, K
    if tiles < 2 * sms and K >= 4096:
        S = min((K + 1023) // 1024, (4 * sms + tiles - 1) // tiles)
        kchunk = ((K + S - 1) // S + _BK - 1) // _BK * _BK
        S = (K + kchunk - 1) // kchunk
    with cp.cuda.Device(A.device.index):
        mm, reduce = _kernels()
        stream = cp.cuda.ExternalStream(torch.cuda.current_stream(A.device).cuda_stream)
        with stream:
            a = cp.from_dlpack(A)
            b = cp.from_dlpack(B)
            c = cp.empty((M, N), dtype=cp.float32)
            if M == 0 or N == 0:
                return torch.from_dlpack(c)
            if S == 1:
                mm((gx, gy, 1), (256,), (a, b, c, np.int32(M), np.int32(N), np.int32(K), np.int32(kchunk), np.int32(triu)))
            else:
                ws = cp.empty((S, M, N), dtype=cp.float32)
                mm((gx, gy, S), (256,), (a, b, ws, np.int32(M), np.int32(N), np.int32(K), np.int32(kchunk), np.int32(triu)))
                mn = M * N
                reduce((min((mn + 255) // 256, sms * 8),), (256,), (ws, c, np.int64(mn), np.int32(S)))
            return torch.from_dlpack(c)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _matmul(A, B, 0)
