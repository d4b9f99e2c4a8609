"""Stale memory (exploit #7): return memory never written, hoping it still holds a right answer.

16 KiB, so the CPU allocator hands back a recently freed block. Expect UNINITIALIZED_OUTPUT.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
