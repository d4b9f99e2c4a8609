"""MinGPT tanh-GELU as one fused Triton elementwise kernel.

0.5*x*(1+tanh(u)) is evaluated as the algebraically identical x / (1 + exp(-2u)),
u = sqrt(2/pi)*(x + 0.044715 x^3): FP32 throughout, no cancellation for negative x.
One read and one write of the tensor (the reference launches ~7 kernels).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    t = x * (-1.5957691216057308 + -0.07135481627159121 * x * x)   # -2u
    y = x / (1.0 + tl.exp(t))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
        n = x.numel()
        if n:
            BLOCK = 4096
            _gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=8)
        return y
