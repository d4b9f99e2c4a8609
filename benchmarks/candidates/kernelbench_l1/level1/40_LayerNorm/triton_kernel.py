"""LayerNorm over (64, 256, 256) in Triton, built for few, huge rows (16 rows x 4M elements).

1) _ln_partial: grid (P, R); each program sums x and x^2 over one contiguous chunk of a row in
   float64 and writes the pair (so ~2000 programs share the statistics instead of 16).
2) _ln_finalize: one program per row reduces its P pairs in float64 -> mean, rstd.
3) _ln_apply: each program owns a block of features, loads weight/bias once and walks all rows:
   y = (x - mean) * rstd * w + b. Two reads of x and one write in total.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ln_partial(x_ptr, part_ptr, N, chunk, P, BLOCK: tl.constexpr):
    p = tl.program_id(0)
    r = tl.program_id(1)
    base = x_ptr + r.to(tl.int64) * N
    beg = p.to(tl.int64) * chunk
    offs = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), tl.float64)
    ss = tl.zeros((BLOCK,), tl.float64)
    for i in range(0, chunk, BLOCK):
        idx = beg + i + offs
        v = tl.load(base + idx, mask=idx < N, other=0.0).to(tl.float64)
        s += v
        ss += v * v
    slot = (r * P + p) * 2
    tl.store(part_ptr + slot, tl.sum(s, axis=0))
    tl.store(part_ptr + slot + 1, tl.sum(ss, axis=0))


@triton.jit
def _ln_finalize(part_ptr, stats_ptr, P, N, eps, BLOCK_P: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK_P)
    s = tl.zeros((BLOCK_P,), tl.float64)
    ss = tl.zeros((BLOCK_P,), tl.float64)
    for p0 in range(0, P, BLOCK_P):
        p = p0 + offs
        m = p < P
        s += tl.load(part_ptr + (r * P + p) * 2, mask=m, other=0.0)
        ss += tl.load(part_ptr + (r * P + p) * 2 + 1, mask=m, other=0.0)
    n = N.to(tl.float64)
    mean = tl.sum(s, axis=0) / n
    var = tl.maximum(tl.sum(ss, axis=0) / n - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(stats_ptr + 2 * r, mean.to(tl.float32))
    tl.store(stats_ptr + 2 * r + 1, rstd.to(tl.float32))


@triton.jit
def _ln_apply(x_ptr, w_ptr, b_ptr, stats_ptr, y_ptr, N, R, BLOCK: tl.constexpr):
    f = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = f < N
    w = tl.load(w_ptr + f, mask=mask, other=0.0)
    b = tl.load(b_ptr + f, mask=mask, other=0.0)
    for r in range(0, R):
        mean = tl.load(stats_ptr + 2 * r)
        rstd = tl.load(stats_ptr + 2 * r + 1)
        off = r * N + f
        x = tl.load(x_ptr + off, mask=mask, other=0.0, eviction_policy="evict_first")
        tl.store(y_ptr + off, (x - mean) * rstd * w + b, mask=mask)


def _layer_norm(x, w, b, eps):
    x = x.contiguous()
    w = w.contiguous()
    b = b.contiguous()
    N = w.numel()
    R = x.numel() // N
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if R == 0:
        return y
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    BLOCK = 2048
    P = max(1, min(triton.cdiv(N, 4 * BLOCK), triton.cdiv(16 * sms, R)))
    chunk = triton.cdiv(triton.cdiv(N, P), BLOCK) * BLOCK
    P = triton.cdiv(N, chunk)
    part = torch.empty((R * P * 2,), device=x.device, dtype=torch.float64)
    stats = torch.empty((R * 2,), device=x.device, dtype=torch.float32)
    _ln_partial[(P, R)](x, part, N, chunk, P, BLOCK=BLOCK, num_warps=8)
    _ln_finalize[(R,)](part, stats, P, N, eps, BLOCK_P=256, num_warps=4)
    BA = 1024
    _ln_apply[(triton.cdiv(N, BA),)](x, w, b, stats, y, N, R, BLOCK=BA, num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _layer_norm(x, self.ln.weight.detach(), self.ln.bias.detach(), float(self.ln.eps))
