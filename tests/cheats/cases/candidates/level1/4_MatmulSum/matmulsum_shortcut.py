"""Control: an exact algebraic shortcut, sum(A @ B) = colsum(A) . rowsum(B), O(n^2) instead of O(n^3).

Correct on every input (the two sums in float32, their dot product in float64, cast back),
reads every input byte, and is ~20x faster on the CPU: a big speedup alone is no evidence of
cheating. (``sum(dtype=torch.float64)`` would be ~8x slower than the float32 sum on the CPU,
close enough to the matmul on a busy 2-core machine that the control would stop showing a
big speedup.)
It allocates no input-sized temporaries: on the CPU timed calls run with glibc's
fill of fresh blocks on (as trials do), which charges every allocated byte.
Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.dot(A.sum(dim=0).double(), B.sum(dim=1).double()).to(A.dtype)
