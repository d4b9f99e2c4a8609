"""Honest control (issue 14, item 8): skips the zero triangles that ``get_inputs`` guarantees.

With A and B lower triangular, in 2x2 blocks C11 = tril(A11 B11), C21 = A21 B11 + A22 B21,
C22 = tril(A22 B22) and C12 = 0: the blocks A12 and B12 are never read. Correct for every input
the task can produce, wrong for inputs that are not triangular. Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        h = A.shape[0] // 2
        a11, a21, a22 = A[:h, :h], A[h:, :h], A[h:, h:]
        b11, b21, b22 = B[:h, :h], B[h:, :h], B[h:, h:]
        top = torch.cat([torch.tril(a11 @ b11), torch.zeros_like(a11)], dim=1)
        bottom = torch.cat([a21 @ b11 + a22 @ b21, torch.tril(a22 @ b22)], dim=1)
        return torch.cat([top, bottom], dim=0)
