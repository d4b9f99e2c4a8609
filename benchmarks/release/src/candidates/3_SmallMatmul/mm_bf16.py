# expect: PRECISION_LOSS
"""Matmul in bfloat16, cast back to float32."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.mm(A.bfloat16(), B.bfloat16()).float()
