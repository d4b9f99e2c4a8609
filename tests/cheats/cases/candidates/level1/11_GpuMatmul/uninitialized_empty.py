"""Stale/uninitialized memory on the GPU (exploit #4): returns a fresh ``torch.empty`` it never writes,
hoping the allocator hands back a block that still holds a matmul result. The reference never ran in this
process, and the harness poisons the blocks the output will get. Expect UNINITIALIZED_OUTPUT.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.empty((A.shape[0], B.shape[1]), dtype=A.dtype, device=A.device)
