"""Red-team task, KernelBench L1/15 at a small size: product of two lower triangular matrices.

``get_inputs`` guarantees triangular inputs (``tril`` after ``rand``); a kernel that skips the zero
triangles is correct for every input the task can produce.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


M = 64


def get_inputs():
    A = torch.rand(M, M)
    B = torch.rand(M, M)
    A = torch.tril(A)
    B = torch.tril(B)
    return [A, B]


def get_init_inputs():
    return []
