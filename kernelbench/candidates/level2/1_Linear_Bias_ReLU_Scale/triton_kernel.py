"""Linear + ReLU + scale: torch.mm for the GEMM, then a fused bias/ReLU/scale Triton epilogue."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_scale_kernel(y_ptr, bias_ptr, n, cols, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % cols, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(y, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        n = y.numel()
        block = 1024
        bias_relu_scale_kernel[(triton.cdiv(n, block),)](y, self.linear.bias, n, y.shape[1], self.scale, BLOCK=block)
        return y
