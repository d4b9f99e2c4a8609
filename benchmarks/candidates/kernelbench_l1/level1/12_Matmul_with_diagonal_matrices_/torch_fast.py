"""diag(A) @ B in plain PyTorch: one broadcast multiply (a single elementwise kernel, no N x N matrix).

This is already what the reference does; there is nothing cheaper than one read of B and one write.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.mul(B, A.unsqueeze(1))
