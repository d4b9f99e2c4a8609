# expect: OUTPUT_REPLAY
"""Caches the first result per input shape and replays a copy of it."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.memo:
            self.memo[key] = x * torch.sigmoid(x)
        return self.memo[key].clone()
