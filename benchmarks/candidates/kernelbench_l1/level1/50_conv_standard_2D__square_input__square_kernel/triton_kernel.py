"""AlexNet conv1 (3->96, 11x11, stride 4, pad 2) as a Triton implicit GEMM in true FP32.

GEMM view: [N*OH*OW positions] x [C*KH*KW] @ [C*KH*KW] x [OC]. Each program owns 128 positions x
32 output channels and walks k in steps of 32: the im2col tile is gathered straight from x
(zero padding by masks; KH, KW are compile-time so k -> (ci, kh, kw) is cheap), the filter tile
is read from w, and tl.dot(..., input_precision="ieee") accumulates in FP32 (no TF32).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv_igemm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, OC, OH, OW, P, Kdim,
                       sh, sw, ph, pw, dh, dw,
                       KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr,
                       BLOCK_P: tl.constexpr, BLOCK_OC: tl.constexpr, BLOCK_K: tl.constexpr):
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    oc = tl.program_id(1) * BLOCK_OC + tl.arange(0, BLOCK_OC)
    pmask = p < P
    ocmask = oc < OC
    ohw = OH * OW
    n = p // ohw
    rem = p % ohw
    oy = rem // OW
    ox = rem % OW
    iy0 = oy * sh - ph
    ix0 = ox * sw - pw
    xbase = n.to(tl.int64) * C * H * W
    acc = tl.zeros((BLOCK_P, BLOCK_OC), dtype=tl.float32)
    for k0 in range(0, Kdim, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        kmask = k < Kdim
        ci = k // (KH * KW)
        r = k % (KH * KW)
        kh = r // KW
        kw = r % KW
        iy = iy0[:, None] + (kh * dh)[None, :]
        ix = ix0[:, None] + (kw * dw)[None, :]
        m = pmask[:, None] & kmask[None, :] & (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
        a = tl.load(x_ptr + xbase[:, None] + (ci[None, :] * H + iy) * W + ix, mask=m, other=0.0)
        b = tl.load(w_ptr + oc[None, :] * Kdim + k[:, None], mask=kmask[:, None] & ocmask[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + oc, mask=ocmask, other=0.0)[None, :]
    out = y_ptr + (n.to(tl.int64) * OC)[:, None] * ohw + oc[None, :] * ohw + rem[:, None]
    tl.store(out, acc, mask=pmask[:, None] & ocmask[None, :])


def _conv2d(x, w, b, stride, padding, dilation):
    x = x.contiguous()
    w = w.contiguous()
    N, C, H, W = x.shape
    OC, _, KH, KW = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    y = torch.empty((N, OC, OH, OW), device=x.device, dtype=torch.float32)
    P = N * OH * OW
    if P == 0 or OC == 0:
        return y
    BP, BOC, BK = 128, 32, 32
    grid = (triton.cdiv(P, BP), triton.cdiv(OC, BOC))
    _conv_igemm_kernel[grid](x, w, b if b is not None else w, y, C, H, W, OC, OH, OW, P, C * KH * KW,
                             sh, sw, ph, pw, dh, dw, KH=KH, KW=KW, HAS_BIAS=b is not None,
                             BLOCK_P=BP, BLOCK_OC=BOC, BLOCK_K=BK, num_warps=4, num_stages=2)
    return y


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        # same module (and so the same seeded weights and bias) as the reference
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv1
        b = c.bias.detach() if c.bias is not None else None
        return _conv2d(x, c.weight.detach(), b, c.stride, c.padding, c.dilation)
