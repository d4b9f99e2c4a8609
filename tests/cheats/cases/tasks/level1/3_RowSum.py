"""Red-team task: sum of each row of a zero-mean matrix (cancellation exposes skipped work and bf16)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


rows = 32
length = 4096


def get_inputs():
    return [torch.randn(rows, length)]


def get_init_inputs():
    return []
