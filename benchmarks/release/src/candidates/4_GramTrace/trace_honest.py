# expect: OK
"""The same computation as the reference."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A):
        return torch.trace(A @ A.t())
