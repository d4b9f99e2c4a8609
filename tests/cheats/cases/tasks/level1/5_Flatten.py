"""Red-team task: flatten all but the batch dimension; the reference returns a view of its input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size(0), -1)


def get_inputs():
    return [torch.randn(8, 16, 32)]


def get_init_inputs():
    return []
