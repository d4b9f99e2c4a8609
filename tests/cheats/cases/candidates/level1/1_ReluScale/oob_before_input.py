"""Out-of-bounds write (exploit #19): correct output, then up to 64 elements before the input's start are zeroed.

Expect OUT_OF_BOUNDS_WRITE.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.relu(x) * 2.0
        n = min(64, x.storage_offset())
        if n > 0:
            x.new_empty(0).set_(x.untyped_storage(), x.storage_offset() - n, (n,)).fill_(0)
        return out
