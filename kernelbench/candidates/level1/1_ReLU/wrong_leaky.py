"""Known-wrong candidate: leaky ReLU (slope 0.01) instead of ReLU, so negative inputs give wrong values."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=0.01)
