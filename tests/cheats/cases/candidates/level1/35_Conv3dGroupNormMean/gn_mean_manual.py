"""Honest control (issue 14, item 12): the group norm written out, not bit-identical to torch's.

The task's output is float32 rounding noise around the norm's mean bias; this rewrite's noise is
its own, so only the rounding model (not bit-identity) can accept it. Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = self.conv(x)
        b, c = y.shape[:2]
        g = self.group_norm.num_groups
        grouped = y.reshape(b, g, -1)
        mean = grouped.mean(dim=-1, keepdim=True)
        var = (grouped - mean).square().mean(dim=-1, keepdim=True)
        normed = ((grouped - mean) * torch.rsqrt(var + self.group_norm.eps)).reshape(b, c, -1)
        normed = normed * self.group_norm.weight[None, :, None] + self.group_norm.bias[None, :, None]
        return normed.mean(dim=(1, 2))
