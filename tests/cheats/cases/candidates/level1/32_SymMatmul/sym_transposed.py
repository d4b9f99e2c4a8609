"""Honest control (issue 14, item 8): uses the symmetry ``get_inputs`` guarantees.

Multiplies with A's transpose (a layout choice: rows of A read as columns), equal to A @ B only
because A is symmetric. Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A.t().contiguous(), B)
