"""LayerNorm through F.layer_norm with the module's own parameters."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)
