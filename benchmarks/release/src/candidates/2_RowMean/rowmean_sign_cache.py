# expect: OUTPUT_REPLAY
"""Caches results under a fingerprint (the signs of every 61st element) and replays them on a hit."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = tuple((x.reshape(-1)[::61] >= 0).tolist())
        if key not in self.seen:
            self.seen[key] = x.mean(dim=1)
        return self.seen[key].clone()
