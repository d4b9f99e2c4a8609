"""AlexNet conv1 (3->96, 11x11, stride 4, pad 2) as a Numba CUDA direct convolution in FP32.

A 128-thread block owns 128 output positions (one per thread) x 16 output channels (16 FP32
register accumulators per thread). k = (ci, kh, kw) advances in chunks of 64: the block stages
the chunk's 16x64 filter slice and its k -> (ci, dy, dx) table in shared memory, then each
thread gathers its input value per k once (zero padding by bounds checks) and feeds all 16
channels with it. Launched on torch's current stream.
"""
import torch
import torch.nn as nn
from numba import cuda, float32, int32

_TPB = 128   # positions per block (= threads)
_OCG = 16    # output channels per block
_KCH = 64    # k chunk staged in shared memory


@cuda.jit
def _conv_kernel(x, w2, ktab, bias, y, OW, sh, sw, ph, pw, has_bias):
    # x: (N, C, H, W); w2: (OC, K); ktab: (K, 3) int32 = (ci, kh*dh, kw*dw); y: (N, OC, OH*OW)
    ws = cuda.shared.array(shape=(_OCG, _KCH), dtype=float32)
    ks = cuda.shared.array(shape=(_KCH, 3), dtype=int32)
    acc = cuda.local.array(_OCG, float32)
    N = x.shape[0]
    H = x.shape[2]
    W = x.shape[3]
    OC = w2.shape[0]
    K = w2.shape[1]
    OHW = y.shape[2]
    tid = cuda.threadIdx.x
    p = cuda.blockIdx.x * _TPB + tid
    oc0 = cuda.blockIdx.y * _OCG
    P = N * OHW
    valid = p < P
    n = 0
    iy0 = 0
    ix0 = 0
    rem = 0
    if valid:
        n = p // OHW
        rem = p % OHW
        iy0 = (rem // OW) * sh - ph
        ix0 = (rem % OW) * sw - pw
    for o in range(_OCG):
        acc[o] = float32(0.0)
    for k0 in range(0, K, _KCH):
        for e in range(tid, _OCG * _KCH, _TPB):
            o = e // _KCH
            kk = e % _KCH
            v = float32(0.0)
            if oc0 + o < OC and k0 + kk < K:
                v = w2[oc0 + o, k0 + kk]
            ws[o, kk] = v
        for e in range(tid, _KCH, _TPB):
            if k0 + e < K:
                ks[e, 0] = ktab[k0 + e, 0]
                ks[e, 1] = ktab[k0 + e, 1]
                ks[e, 2] = ktab[k0 + e, 2]
        cuda.syncthreads()
        if valid:
            kn = K - k0
            if kn > _KCH:
                kn = _KCH
            for kk in range(kn):
                iy = iy0 + ks[kk, 1]
                ix = ix0 + ks[kk, 2]
                if iy >= 0 and iy < H and ix >= 0 and ix < W:
                    v = x[n, ks[kk, 0], iy, ix]
                    for o in range(_OCG):
                        acc[o] += v * ws[o, kk]
        cuda.syncthreads()
    if valid:
        for o in range(_OCG):
            oc = oc0 + o
            if oc < OC:
                v = acc[o]
                if has_bias:
                    v += bias[oc]
                y[n, oc, rem] = v


_ktabs = {}


def _ktab(C, KH, KW, dh, dw, device):
    key = (C, KH, KW, dh, dw, str(device))
    if key not in _ktabs:
        k = torch.arange(C * KH * KW, dtype=torch.int64)
        ci, r = k // (KH * KW), k % (KH * KW)
        t = torch.stack([ci, (r // KW) * dh, (r % KW) * dw], dim=1)
        _ktabs[key] = t.to(torch.int32).to(device)
    return _ktabs[key]


def _stream():
    ptr = torch.cuda.current_stream().cuda_stream
    return cuda.external_stream(ptr) if ptr else cuda.default_stream()


def _conv2d(x, w, b, stride, padding, dilation):
    x = x.detach().contiguous()
    w = w.detach().contiguous()
    N, C, H, W = x.shape
    OC, _, KH, KW = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    y = torch.empty((N, OC, OH, OW), device=x.device, dtype=torch.float32)
    P = N * OH * OW
    if P == 0 or OC == 0:
        return y
    has_bias = b is not None
    bias = b.detach().contiguous() if has_bias else w.view(-1)[:1]
    kt = _ktab(C, KH, KW, dh, dw, x.device)
    grid = ((P + _TPB - 1) // _TPB, (OC + _OCG - 1) // _OCG)
    _conv_kernel[grid, _TPB, _stream()](cuda.as_cuda_array(x), cuda.as_cuda_array(w.view(OC, -1)), cuda.as_cuda_array(kt),
                                        cuda.as_cuda_array(bias), cuda.as_cuda_array(y.view(N, OC, OH * OW)),
                                        OW, sh, sw, ph, pw, has_bias)
    return y


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        # same module (and so the same seeded weights and bias) as the reference
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv1
        return _conv2d(x, c.weight, c.bias, c.stride, c.padding, c.dilation)
