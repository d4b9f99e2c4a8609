"""LayerNorm over (64, 256, 256) in Numba CUDA, built for few, huge rows (16 rows x 4M elements).

1) _ln_partial: grid (P, R); each block sums x and x^2 over one contiguous chunk of a row in
   float64 (shared-memory tree) and writes the pair, so ~2000 blocks share the statistics.
2) _ln_finalize: one block per row reduces its P pairs in float64 -> mean, rstd.
3) _ln_apply: each thread owns one feature, loads weight/bias once and walks all rows:
   y = (x - mean) * rstd * w + b (FP32). Launched on torch's current stream.
"""
import math

import torch
import torch.nn as nn
from numba import cuda, float32, float64

_TPB = 256


@cuda.jit
def _ln_partial(x, part, chunk):
    sh_s = cuda.shared.array(_TPB, float64)
    sh_ss = cuda.shared.array(_TPB, float64)
    p = cuda.blockIdx.x
    r = cuda.blockIdx.y
    tid = cuda.threadIdx.x
    N = x.shape[1]
    beg = p * chunk
    end = beg + chunk
    if end > N:
        end = N
    s = 0.0
    ss = 0.0
    for i in range(beg + tid, end, _TPB):
        v = float64(x[r, i])
        s += v
        ss += v * v
    sh_s[tid] = s
    sh_ss[tid] = ss
    cuda.syncthreads()
    h = _TPB // 2
    while h > 0:
        if tid < h:
            sh_s[tid] += sh_s[tid + h]
            sh_ss[tid] += sh_ss[tid + h]
        cuda.syncthreads()
        h //= 2
    if tid == 0:
        part[r, p, 0] = sh_s[0]
        part[r, p, 1] = sh_ss[0]


@cuda.jit
def _ln_finalize(part, stats, N, eps):
    sh_s = cuda.shared.array(_TPB, float64)
    sh_ss = cuda.shared.array(_TPB, float64)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    P = part.shape[1]
    s = 0.0
    ss = 0.0
    for p in range(tid, P, _TPB):
        s += part[r, p, 0]
        ss += part[r, p, 1]
    sh_s[tid] = s
    sh_ss[tid] = ss
    cuda.syncthreads()
    h = _TPB // 2
    while h > 0:
        if tid < h:
            sh_s[tid] += sh_s[tid + h]
            sh_ss[tid] += sh_ss[tid + h]
        cuda.syncthreads()
        h //= 2
    if tid == 0:
        mean = sh_s[0] / N
        var = sh_ss[0] / N - mean * mean
        if var < 0.0:
            var = 0.0
        stats[r, 0] = float32(mean)
        stats[r, 1] = float32(1.0 / math.sqrt(var + eps))


@cuda.jit
def _ln_apply(x, w, b, stats, y):
    R = x.shape[0]
    N = x.shape[1]
    f = cuda.grid(1)
    stride = cuda.gridsize(1)
    while f < N:
        wv = w[f]
        bv = b[f]
        for r in range(R):
            y[r, f] = (x[r, f] - stats[r, 0]) * stats[r, 1] * wv + bv
        f += stride


def _stream():
    ptr = torch.cuda.current_stream().cuda_stream
    return cuda.external_stream(ptr) if ptr else cuda.default_stream()


def _layer_norm(x, w, b, eps):
    x = x.detach().contiguous()
    w = w.detach().contiguous().view(-1)
    b = b.detach().contiguous().view(-1)
    N = w.numel()
    R = x.numel() // N
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if R == 0:
        return y
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    P = max(1, min((N + 4095) // 4096, (16 * sms + R - 1) // R))
    chunk = (N + P - 1) // P
    P = (N + chunk - 1) // chunk
    part = torch.empty((R, P, 2), device=x.device, dtype=torch.float64)
    stats = torch.empty((R, 2), device=x.device, dtype=torch.float32)
    stream = _stream()
    x2 = cuda.as_cuda_array(x.view(R, N))
    pd = cuda.as_cuda_array(part)
    sd = cuda.as_cuda_array(stats)
    _ln_partial[(P, R), _TPB, stream](x2, pd, chunk)
    _ln_finalize[R, _TPB, stream](pd, sd, N, eps)
    blocks = max(1, min((N + _TPB - 1) // _TPB, sms * 32))
    _ln_apply[blocks, _TPB, stream](x2, cuda.as_cuda_array(w), cuda.as_cuda_array(b), sd, cuda.as_cuda_array(y.view(R, N)))
    return y


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _layer_norm(x, self.ln.weight, self.ln.bias, float(self.ln.eps))
