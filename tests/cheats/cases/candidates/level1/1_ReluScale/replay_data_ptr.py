"""Output replay (exploit #5b): a result cache keyed on the input's data_ptr().

Computes honestly the first time it sees an address; afterwards returns a copy
of the stored result, whatever the input now holds. Expect OUTPUT_REPLAY.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = x.data_ptr()
        hit = self.cache.get(key)
        if hit is None:
            hit = torch.relu(x) * 2.0
            self.cache[key] = hit
        return hit.clone()
