# expect: WRONG_OUTPUT
"""Averages only the first 99% of each row (close on positive data, ~10% off on zero-mean data)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        k = (x.shape[1] * 99) // 100
        return x[:, :k].mean(dim=1)
