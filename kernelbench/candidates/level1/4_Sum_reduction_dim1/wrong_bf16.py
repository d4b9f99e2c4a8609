"""Known-wrong candidate: sums in bfloat16 and casts back, losing precision beyond a 1e-4 relative tolerance."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16).sum(self.dim).to(x.dtype)
