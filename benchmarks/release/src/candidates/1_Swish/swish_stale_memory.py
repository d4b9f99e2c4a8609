# expect: UNINITIALIZED_OUTPUT
"""Allocates the output and never writes it."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
