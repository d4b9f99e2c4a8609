"""Red-team task: sort each row (an output whose order matters, with order-insensitive sums)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sort(x, dim=-1).values


def get_inputs():
    return [torch.randn(8, 256)]


def get_init_inputs():
    return []
