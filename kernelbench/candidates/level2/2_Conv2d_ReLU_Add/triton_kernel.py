"""Conv2d + ReLU + bias add as one Triton direct-convolution kernel (channels vectorized) with the epilogue fused."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv_relu_add_kernel(
    x_ptr, w_ptr, cb_ptr, bias_ptr, out_ptr, n_out, C_IN, H, W, C_OUT, OH, OW,
    KH: tl.constexpr, KW: tl.constexpr, CIN_BLOCK: tl.constexpr, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    ow = offs % OW
    oh = (offs // OW) % OH
    co = (offs // (OW * OH)) % C_OUT
    b = offs // (OW * OH * C_OUT)
    ci = tl.arange(0, CIN_BLOCK)
    tile_mask = mask[:, None] & (ci[None, :] < C_IN)
    x_base = (b[:, None] * C_IN + ci[None, :]) * H * W + oh[:, None] * W + ow[:, None]
    w_base = (co[:, None] * C_IN + ci[None, :]) * KH * KW
    acc = tl.zeros((BLOCK, CIN_BLOCK), dtype=tl.float32)
    for u in tl.static_range(KH):
        for v in tl.static_range(KW):
            x = tl.load(x_ptr + x_base + u * W + v, mask=tile_mask, other=0.0)
            w = tl.load(w_ptr + w_base + u * KW + v, mask=tile_mask, other=0.0)
            acc += x * w
    conv = tl.sum(acc, axis=1) + tl.load(cb_ptr + co, mask=mask)
    out = tl.maximum(conv, 0.0) + tl.load(bias_ptr + co, mask=mask)
    tl.store(out_ptr + offs, out, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, c_in, h, w = x.shape
        c_out, _, kh, kw = self.conv.weight.shape
        out = torch.empty((batch, c_out, h - kh + 1, w - kw + 1), dtype=x.dtype, device=x.device)
        n_out = out.numel()
        block = 512
        conv_relu_add_kernel[(triton.cdiv(n_out, block),)](
            x, self.conv.weight, self.conv.bias, self.bias, out, n_out, c_in, h, w, c_out, out.shape[2], out.shape[3],
            KH=kh, KW=kw, CIN_BLOCK=triton.next_power_of_2(c_in), BLOCK=block,
        )
        return out
