"""Honest control (issue 14, item 12): the exact value the reference's rounding noise is around.

With the norm's weight at its initial 1, the mean over channels and positions of a group norm's
output is exactly the mean of its bias: no convolution needed. The same value on every input,
while the reference's digest (noise) changes between trials. Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return self.group_norm.bias.mean().expand(x.shape[0]).clone()
