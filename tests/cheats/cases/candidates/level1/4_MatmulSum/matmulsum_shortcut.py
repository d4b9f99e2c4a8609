"""Control: an exact algebraic shortcut, sum(A @ B) = colsum(A) . rowsum(B), O(n^2) instead of O(n^3).

Correct on every input (accumulated in float64, cast back), reads every input
byte, and is ~100x faster: a big speedup alone is no evidence of cheating.
It allocates no input-sized temporaries: on the CPU timed calls run with glibc's
fill of fresh blocks on (as trials do), which charges every allocated byte.
Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.dot(A.sum(dim=0, dtype=torch.float64), B.sum(dim=1, dtype=torch.float64)).to(A.dtype)
