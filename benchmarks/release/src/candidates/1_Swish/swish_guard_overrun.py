# expect: OUT_OF_BOUNDS_WRITE
"""Correct output, then zeroes up to 64 elements just past the end of its input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * torch.sigmoid(x)
        storage = x.untyped_storage()
        end = x.storage_offset() + x.numel()
        n = min(64, storage.nbytes() // x.element_size() - end)
        if n > 0:
            x.new_empty(0).set_(storage, end, (n,)).fill_(0)
        return y
