"""Red-team task: the sum of all entries of A @ B (admits an exact O(n^2) shortcut).

2 MiB of inputs on the CPU; on a GPU 4096 x 4096 (128 MiB), where a 512 x 512 matmul takes a few
microseconds and the shortcut's half-dozen small kernels would not be faster.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B).sum()


N = 4096 if torch.cuda.is_available() else 512


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
