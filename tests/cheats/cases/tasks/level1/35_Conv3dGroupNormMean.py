"""Red-team task, KernelBench L2/23's shape at a small size: the mean of a group-normalised output.

In exact arithmetic the output is the mean of the norm's bias (zero at initialisation): the float32
reference returns rounding noise around it, which no rewrite that is not bit-identical reproduces.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        x = x.mean(dim=[1, 2, 3, 4])  # Compute mean across all dimensions except batch
        return x


batch_size = 16
in_channels = 3
out_channels = 8
D, H, W = 6, 8, 8
kernel_size = 3
num_groups = 4


def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
