"""Lazy output (exploit #3): a tensor with no real storage (meta device) of the right shape and dtype.

Expect LAZY_OUTPUT.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
